"""Redaction: API-key-shaped strings, auth headers and every known secret (from the
environment, or handed in by the backend that read it) are replaced before a string is
printed or stored."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.support.redact import SECRET_ENV, redact, secrets


@pytest.fixture(autouse=True)
def _no_known_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """No secret from the developer's environment."""
    for name in SECRET_ENV:
        monkeypatch.delenv(name, raising=False)


def test_an_api_key_shaped_string_is_removed_anywhere() -> None:
    key = "sk-ant-api03-AbC_dEf-0123456789xyz"
    text = f"401 for key {key}: invalid; again ({key})"
    assert redact(text) == "401 for key [REDACTED]: invalid; again ([REDACTED])"
    assert "sk-ant-" not in redact(f"path=/tmp/{key}/x")


def test_a_short_sk_ant_prefix_is_not_a_key() -> None:
    assert redact("the prefix sk-ant-abc is documented") == "the prefix sk-ant-abc is documented"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("x-api-key: abc123secret", "x-api-key: [REDACTED]"),
        ("X-Api-Key=abc123secret next", "X-Api-Key=[REDACTED] next"),
        ("Authorization: Bearer tok.en-123", "Authorization: [REDACTED]"),
        ("authorization: basic_token_xyz", "authorization: [REDACTED]"),
        ("{'x-api-key': 'abc123secret', 'a': 1}", "{'x-api-key': '[REDACTED]', 'a': 1}"),
        ('{"authorization": "Bearer abc"}', '{"authorization": "[REDACTED]"}'),
    ],
)
def test_auth_headers_keep_their_name_and_lose_their_value(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_text_without_secrets_is_unchanged() -> None:
    text = "529 overloaded_error: try again later (request req_011) at /tmp/skills/pdf"
    assert redact(text) == text


def test_secrets_from_the_environment_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "plain-looking-value")
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "oauth987654")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "abc")  # too short to be worth matching
    assert secrets() == ["plain-looking-value", "oauth987654"]
    text = "cwd /home/plain-looking-value/x and token oauth987654; abc stays"
    assert redact(text) == "cwd /home/[REDACTED]/x and token [REDACTED]; abc stays"


def test_a_secret_handed_in_is_removed_and_a_short_one_ignored() -> None:
    """The claude-code backend hands in the login key it read from the user's Claude
    config: no registry, no state shared by the process."""
    also = ("from-claude-config", "xyz")
    assert secrets(also) == ["from-claude-config"]
    assert redact("key=from-claude-config; xyz", also) == "key=[REDACTED]; xyz"
    assert redact("key=from-claude-config") == "key=from-claude-config"
