"""The API backend's limits: a whole run within --trigger-timeout, every request counted, a
dead endpoint that stops the session instead of being retried for minutes."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.model.context import TriggerContext
from tests.fake_messages_api import FakeMessagesAPI

CONTEXT = TriggerContext("pdf-tools", "Merge, split and fill PDF files.")
QUERY = "merge these pdf files into one"


@pytest.fixture
def backend(fake_api: FakeMessagesAPI) -> Iterator[AnthropicBackend]:
    fake_api.script(QUERY, ["skill:pdf-tools"])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=2.0, max_retries=6)
    yield b
    b.close()


def test_a_hanging_server_ends_the_run_as_an_error_with_every_request_counted(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    fake_api.hang_seconds = 10
    fake_api.faults = {"hang": 1.0}
    outcome = backend.run(CONTEXT, QUERY)
    assert outcome.status == "error" and "timed out after 2s" in (outcome.error or "")
    # the server may read a request the client has given up on a moment later: let it
    deadline = time.monotonic() + 5
    while fake_api.stats["calls"] < outcome.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    assert outcome.requests == fake_api.stats["calls"] >= 1


def test_retried_statuses_are_counted_as_the_server_saw_them(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    fake_api.retry_after_ms = 1
    fake_api.faults = {"529": 0.5}
    outcomes = [backend.run(CONTEXT, QUERY) for _ in range(8)]
    assert sum(o.requests for o in outcomes) == fake_api.stats["calls"]
    assert fake_api.stats["calls"] > 8  # some were retried by the SDK, and counted
    assert all(o.model == "claude-opus-5-5" for o in outcomes)


def test_a_retry_after_longer_than_the_run_has_left_is_not_waited_for(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    fake_api.retry_after_ms = 60_000  # the server asks for a minute; the run has 2 s
    fake_api.faults = {"429": 1.0}
    outcome = backend.run(CONTEXT, QUERY)
    assert outcome.status == "error" and "asked to wait 60s" in (outcome.error or "")
    assert outcome.requests == fake_api.stats["calls"] == 1


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when this returns: nothing listens


def test_a_dead_endpoint_becomes_fatal_after_a_few_refused_connections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    backend = AnthropicBackend(model="claude-opus-5-5", timeout=30, max_retries=6)
    try:
        outcomes = [backend.run(CONTEXT, QUERY) for _ in range(3)]
    finally:
        backend.close()
    assert all(o.status == "error" for o in outcomes)
    assert not outcomes[0].fatal and outcomes[-1].fatal
    assert f"cannot reach the Messages API at {url}" in (outcomes[-1].error or "")
    # before the endpoint ever answered, the SDK retries once, not six times
    assert all(o.requests <= 2 for o in outcomes)


def test_a_dead_endpoint_stops_the_session_with_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.plugin.test_items import standard_skill

    with FakeMessagesAPI() as api:
        skills = standard_skill(pytester, api)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--trigger-skill-path={skills}", timeout=120
    )
    result.stdout.fnmatch_lines(["*stopping: cannot reach the Messages API at http://127.0.0.1:*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", outcomes.get("error", 0)) >= 1
    assert "passed" not in outcomes and "failed" not in outcomes
