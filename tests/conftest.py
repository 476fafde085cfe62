"""Shared fixtures for the plugin's own tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fake_messages_api import FakeMessagesAPI

pytest_plugins = ["pytester"]


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    """A fresh fake Messages API, with the SDK's environment pointed at it.

    Why via the environment: the plugin must work offline exactly as a user would configure
    it (ANTHROPIC_BASE_URL), and a stray ANTHROPIC_AUTH_TOKEN must not leak into the tests.
    """
    with FakeMessagesAPI() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        yield api
