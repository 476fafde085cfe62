"""The API backend on the SDK's own HTTP transport: keep-alive, stale connections, TLS, aborts.

Everything goes through the real ``anthropic`` SDK and real sockets to the local fake API
(plain HTTP, or HTTPS with a throw-away CA from ``trustme``).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.model.context import TriggerContext
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import PROXY_VARIABLES

CONTEXT = TriggerContext("pdf-tools", "Merge, split and fill PDF files.")
QUERY = "merge these pdf files into one"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def backend(fake_api: FakeMessagesAPI) -> Iterator[AnthropicBackend]:
    fake_api.script(QUERY, ["skill:pdf-tools", "text"])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=2)
    yield b
    b.close()


def test_runs_keep_one_connection(backend: AnthropicBackend, fake_api: FakeMessagesAPI) -> None:
    statuses = [backend.run(CONTEXT, QUERY).status for _ in range(6)]
    assert statuses == ["triggered", "not_triggered"] * 3
    assert fake_api.stats["connections"] == 1  # keep-alive: every run reused the connection


def test_a_connection_closed_by_the_server_while_idle_is_not_reused(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    fake_api.idle_timeout = 0.2
    assert backend.run(CONTEXT, QUERY).status == "triggered"
    time.sleep(0.6)  # the server has closed the idle keep-alive connection by now
    outcome = backend.run(CONTEXT, QUERY)
    assert outcome.status == "not_triggered", outcome.error
    assert fake_api.stats["connections"] == 2
    assert fake_api.stats["calls"] == 2  # no failed attempt on the dead connection


def test_status_errors_with_bodies_leave_the_connection_usable(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    fake_api.retry_after_ms = 1
    fake_api.faults = {"529": 1.0}
    outcome = backend.run(CONTEXT, QUERY)
    assert outcome.status == "error" and "529" in (outcome.error or "")
    opened = fake_api.stats["connections"]  # the SDK drops a connection it retries away from
    fake_api.faults = {}
    assert backend.run(CONTEXT, QUERY).status == "triggered"
    assert fake_api.stats["connections"] == opened  # the last error body was read: reused


def test_close_ends_a_run_in_flight_without_further_retries(fake_api: FakeMessagesAPI) -> None:
    """Closing the backend (the session ending, Ctrl-C) lets a hanging run end at its own
    timeout with an error, and the backend's retries stop there. (The session does not wait
    for it: the sampler's threads are abandoned on Ctrl-C.)"""
    fake_api.script(QUERY, ["skill:pdf-tools"])
    fake_api.hang_seconds = 30
    fake_api.faults = {"hang": 1.0}
    backend = AnthropicBackend(model="claude-opus-5-5", timeout=1.5, max_retries=0)
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(backend.run(CONTEXT, QUERY)))
    worker.start()
    time.sleep(0.5)
    backend.close()
    worker.join(timeout=10)
    assert not worker.is_alive()  # ended at its own timeout, not the server's 30 s hang
    assert result and result[0].status == "error"  # type: ignore[attr-defined]
    assert fake_api.stats["calls"] == 1


# -- TLS ----------------------------------------------------------------------------------------


@pytest.fixture
def tls_api(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[tuple[FakeMessagesAPI, Path]]:
    """HTTPS with a certificate for 127.0.0.1 from a throw-away CA (``trustme``)."""
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.set_alpn_protocols(["h2", "http/1.1"])
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with FakeMessagesAPI(tls=server_ctx) as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        api.script(QUERY, ["skill:pdf-tools"])
        yield api, ca_file


def test_https_with_a_trusted_certificate(
    tls_api: tuple[FakeMessagesAPI, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, ca_file = tls_api
    assert api.url.startswith("https://")
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # trusted the way httpx trusts a CA
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=1)
    try:
        outcomes = [b.run(CONTEXT, QUERY) for _ in range(3)]
    finally:
        b.close()
    assert [o.status for o in outcomes] == ["triggered"] * 3, outcomes[0].error
    assert api.stats["connections"] == 1
    assert api.stats["alpn"] == {"http/1.1": 1}  # never taken for an HTTP/2 client


def test_https_with_an_untrusted_certificate_is_an_error(
    tls_api: tuple[FakeMessagesAPI, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    api, _ = tls_api
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=0)
    try:
        outcome = b.run(CONTEXT, QUERY)
    finally:
        b.close()
    assert outcome.status == "error"  # never "did not trigger"
    assert api.stats["calls"] == 0


@pytest.mark.parametrize(("outcome", "connections"), [("skill:pdf-tools", 1), ("tool:Bash", 4)])
def test_streams_decided_at_a_tool_start_are_cut_not_drained(
    fake_api: FakeMessagesAPI, outcome: str, connections: int
) -> None:
    """A Skill call is decided at its end, so the short tail is drained and the connection
    reused; another tool is decided at its start, so the stream (its input still being
    generated) is closed at once, which also stops the generation."""
    fake_api.script(QUERY, [outcome])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=0)
    try:
        assert {b.run(CONTEXT, QUERY).chosen for _ in range(4)} == {outcome}
    finally:
        b.close()
    assert fake_api.stats["connections"] == connections


def test_a_retired_model_gets_the_sdks_deprecation_warning(fake_api: FakeMessagesAPI) -> None:
    """Runs go through ``messages.create`` (streamed), so the SDK's own warning for a
    retired model reaches the user, in the SDK's words."""
    import anthropic

    retired = "claude-opus-4-5"  # retired in the SDK this project pins
    fake_api.script(QUERY, ["skill:pdf-tools"])
    b = AnthropicBackend(model=retired, timeout=10, max_retries=0)
    try:
        with pytest.warns(DeprecationWarning, match=f"'{retired}' is deprecated"):
            assert b.run(CONTEXT, QUERY).status == "triggered"
    finally:
        b.close()
    assert anthropic.__version__  # the SDK that warned


def test_a_run_is_priced_at_the_output_its_stream_reports(fake_api: FakeMessagesAPI) -> None:
    """A Skill call is decided at its block's end, before the message_delta that reports the
    output tokens (thinking included): the drained tail is read for them, so what a run is
    priced at equals what the server billed, for Skill calls and plain answers alike."""
    fake_api.script(QUERY, ["skill:pdf-tools", "text", "skill:pdf-tools"])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=0)
    try:
        outcomes = [b.run(CONTEXT, QUERY) for _ in range(6)]
    finally:
        b.close()
    assert {o.chosen for o in outcomes} == {"skill:pdf-tools", "text"}
    assert sum(o.usage.output_tokens for o in outcomes) == fake_api.stats["output_tokens"]
    assert all(o.usage.output_tokens > 1 for o in outcomes)
