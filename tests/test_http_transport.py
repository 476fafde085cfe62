"""The lean HTTP transport under the SDK: keep-alive, stale connections, TLS, aborts, fallbacks.

Everything goes through the real ``anthropic`` SDK and real sockets to the local fake API
(plain HTTP, or HTTPS with a throw-away CA from ``trustme``).
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import trustme

from pytest_skilltrigger.backends.api.backend import (
    TRANSPORT_ENV,
    AnthropicBackend,
    _lean_http_client,
)
from pytest_skilltrigger.backends.http_transport import LeanTransport
from pytest_skilltrigger.engine.context import TriggerContext
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import PROXY_VARIABLES

CONTEXT = TriggerContext("pdf-tools", "Merge, split and fill PDF files.")
QUERY = "merge these pdf files into one"


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_VARIABLES, TRANSPORT_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def backend(fake_api: FakeMessagesAPI) -> Iterator[AnthropicBackend]:
    fake_api.script(QUERY, ["skill:pdf-tools", "text"])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=2)
    yield b
    b.close()


def transport_of(backend: AnthropicBackend) -> object:
    return backend._connect()._client._transport


def test_runs_use_the_lean_transport_and_keep_one_connection(
    backend: AnthropicBackend, fake_api: FakeMessagesAPI
) -> None:
    statuses = [backend.run(CONTEXT, QUERY).status for _ in range(6)]
    assert statuses == ["triggered", "not_triggered"] * 3
    assert isinstance(transport_of(backend), LeanTransport)
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


def test_close_aborts_a_run_in_flight(backend: AnthropicBackend, fake_api: FakeMessagesAPI) -> None:
    fake_api.hang_seconds = 30
    fake_api.faults = {"hang": 1.0}
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(backend.run(CONTEXT, QUERY)))
    worker.start()
    time.sleep(0.5)
    started = time.monotonic()
    backend.close()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert time.monotonic() - started < 5
    assert result and result[0].status == "error"  # type: ignore[attr-defined]


def test_proxies_and_the_escape_hatch_keep_the_sdk_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _lean_http_client(5.0) is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert _lean_http_client(5.0) is None
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv(TRANSPORT_ENV, "httpx")
    assert _lean_http_client(5.0) is None


def test_sdk_transport_gives_the_same_outcomes(
    monkeypatch: pytest.MonkeyPatch, fake_api: FakeMessagesAPI
) -> None:
    monkeypatch.setenv(TRANSPORT_ENV, "httpx")
    fake_api.script(QUERY, ["skill:pdf-tools", "tool:Bash"])
    b = AnthropicBackend(model="claude-opus-5-5", timeout=10, max_retries=2)
    try:
        assert not isinstance(transport_of(b), LeanTransport)
        assert [b.run(CONTEXT, QUERY).chosen for _ in range(2)] == ["skill:pdf-tools", "tool:Bash"]
    finally:
        b.close()


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


# -- HTTP/1.1 details, against a raw socket server ------------------------------------------------


class RawServer:
    """Answers every request on a connection with the next scripted raw response."""

    def __init__(self, responses: list[bytes], *, stall: bool = False) -> None:
        self.responses = list(responses)
        self.stall = stall  # after a response, wait (silently) for the client to hang up
        self.accepted = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
        except OSError:
            pass
        self.sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while self.responses:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = re.search(rb"(?i)content-length: *(\d+)", head)
                reader.read(int(length.group(1)) if length else 0)
                response = self.responses.pop(0)
                try:
                    conn.sendall(response)
                except OSError:  # the client gave up on this body
                    return
                if self.stall:
                    reader.read()
                    return
                if b"connection: close" in response.lower() or response.startswith(b"HTTP/1.0"):
                    return


@pytest.mark.parametrize(
    ("response", "reused"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"3\r\nhel\r\n2\r\nlo\r\n0\r\nX-Trailer: yes\r\n\r\n", True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello", False),
        (b"HTTP/1.0 200 OK\r\n\r\nhello", False),  # no length: the body ends with the connection
    ],
    ids=["length", "empty", "chunked-with-trailer", "connection-close", "http10-to-eof"],
)  # fmt: skip
def test_bodies_and_connection_reuse(response: bytes, reused: bool) -> None:
    with RawServer([response, response]) as server, httpx2.Client(
        transport=LeanTransport(), timeout=5
    ) as client:
        bodies = [client.post(server.url + "/x", content=b"{}").content for _ in range(2)]
    expected = b"" if b"Content-Length: 0" in response else b"hello"
    assert bodies == [expected, expected]
    assert server.accepted == (1 if reused else 2)


def test_a_body_given_up_early_closes_its_connection() -> None:
    long_body = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000
    short = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    with RawServer([long_body, short]) as server, httpx2.Client(
        transport=LeanTransport(), timeout=5
    ) as client:
        with client.stream("POST", server.url + "/x", content=b"{}") as response:
            first = next(response.iter_raw())
        assert first.startswith(b"x")
        assert client.post(server.url + "/x", content=b"{}").content == b"ok"
    assert server.accepted == 2  # the unread rest was not taken for the next response


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",  # not HTTP at all
        # the connection ends before the Content-Length does (httpx raises here too)
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nabc",
        # an informational answer is not the final one
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    ],
    ids=["garbage", "cut-before-content-length", "stray-1xx"],
)
def test_malformed_answers_are_protocol_errors_not_responses(answer: bytes) -> None:
    with RawServer([answer]) as server, httpx2.Client(
        transport=LeanTransport(), timeout=5
    ) as client:
        with pytest.raises(httpx2.RemoteProtocolError):
            client.post(server.url + "/x", content=b"{}")


def test_nothing_listening_is_a_connect_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with httpx2.Client(transport=LeanTransport(), timeout=5) as client:
        with pytest.raises(httpx2.ConnectError):
            client.post(f"http://127.0.0.1:{port}/x", content=b"{}")


def test_close_cuts_a_stalled_body_even_when_the_server_ends_the_connection() -> None:
    """With ``Connection: close`` http.client hands the socket to the response and forgets it;
    closing the transport must still cut it (not wait for the read timeout)."""
    stalled = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 100\r\n\r\npart"
    transport = LeanTransport()
    errors: list[BaseException] = []
    with RawServer([stalled], stall=True) as server:
        client = httpx2.Client(transport=transport, timeout=30)

        def read() -> None:
            try:
                with client.stream("POST", server.url + "/x", content=b"{}") as response:
                    response.read()
            except BaseException as exc:  # what the reading thread sees
                errors.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.3)
        started = time.monotonic()
        transport.close()
        reader.join(timeout=5)
    assert not reader.is_alive() and time.monotonic() - started < 2
    assert errors and isinstance(errors[0], httpx2.TransportError)


def test_a_header_outside_ascii_is_read_and_leaks_nothing() -> None:
    response = b"HTTP/1.1 200 OK\r\nX-Note: caf\xe9\r\nContent-Length: 2\r\n\r\nok"
    with RawServer([response, response]) as server, httpx2.Client(
        transport=LeanTransport(), timeout=5
    ) as client:
        answers = [client.post(server.url + "/x", content=b"{}") for _ in range(2)]
    assert [a.content for a in answers] == [b"ok", b"ok"]
    assert answers[0].headers.raw[0] == (b"X-Note", b"caf\xe9")
    assert server.accepted == 1


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


def test_a_retired_model_gets_the_sdks_deprecation_warning_once(fake_api: FakeMessagesAPI) -> None:
    """``client.post`` skips the warning ``messages.create`` would give: the backend gives it."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    retired = next(iter(DEPRECATED_MODELS))
    fake_api.script(QUERY, ["skill:pdf-tools"])
    b = AnthropicBackend(model=retired, timeout=10, max_retries=0)
    try:
        with pytest.warns(DeprecationWarning, match=f"'{retired}' is deprecated") as record:
            assert [b.run(CONTEXT, QUERY).status for _ in range(2)] == ["triggered"] * 2
    finally:
        b.close()
    assert len([w for w in record if issubclass(w.category, DeprecationWarning)]) == 1
