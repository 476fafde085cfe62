"""A lean HTTP/1.1 transport for the SDK's HTTP client: the standard library's ``http.client``.

Why: a trigger run is one small request and a stream of many tiny SSE frames, and the default
transport (httpcore + h11) spends tens of microseconds of Python per frame across a deep stack
of generators. ``http.client`` reads a frame with a couple of buffered C-level reads. Everything
above the transport stays the SDK's: authentication, headers, retries with back-off, status
errors. It plugs in through httpx's documented transport interface. It does not do proxies:
the backend keeps the SDK's default client whenever the environment configures one.

Idle connections are pooled and reused (keep-alive); one found closed by the server is dropped
before it is used, and a connection goes back to the pool only after its body was read to the
end. Failures surface as the httpx exceptions the SDK expects (it retries connection errors
and timeouts). :meth:`LeanTransport.close` shuts down every socket, including those a run is
reading from, so closing the client aborts calls in flight at once.
"""

from __future__ import annotations

import http.client
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx2

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept (httpx's default as well)
MAX_IDLE = 64
READ_SIZE = 65536

Origin = tuple[str, str, int]


class LeanTransport(httpx2.BaseTransport):
    """HTTP/1.1 over ``http.client`` with a keep-alive pool; thread-safe."""

    def __init__(self) -> None:
        self._ssl_context: ssl.SSLContext | None = None  # made on the first HTTPS request
        self._lock = threading.Lock()
        self._idle: dict[Origin, list[tuple[float, http.client.HTTPConnection]]] = {}
        # Every connection in use or idle, with its socket: http.client forgets the socket
        # of a response that ends the connection, but close() must still be able to cut it.
        self._open: dict[http.client.HTTPConnection, socket.socket | None] = {}
        self._closed = False

    # -- connections ---------------------------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        """The same trust as httpx's default (certifi or truststore, ``SSL_CERT_FILE``...)."""
        with self._lock:
            if self._ssl_context is None:
                context = httpx2.create_ssl_context()
                try:  # say which protocol we speak, as httpx does for HTTP/1.1 connections
                    context.set_alpn_protocols(["http/1.1"])
                except (NotImplementedError, AttributeError):  # pragma: no cover - old TLS libs
                    pass
                self._ssl_context = context
            return self._ssl_context

    def _checkout(self, origin: Origin, timeout: float | None) -> tuple[Any, bool]:
        """An idle connection to ``origin`` that is still usable, or a new unconnected one."""
        now = time.monotonic()
        with self._lock:
            if self._closed:
                raise httpx2.ConnectError("the HTTP client is closed")
            idle = self._idle.get(origin)
            while idle:
                since, conn = idle.pop()
                if now - since < KEEPALIVE_EXPIRY and _still_open(conn):
                    return conn, True
                self._discard_locked(conn)
        scheme, host, port = origin
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=self._ssl())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        conn.auto_open = 0  # never reconnect silently (e.g. after close() cut the socket)
        with self._lock:
            if self._closed:  # closed while this one was being made
                raise httpx2.ConnectError("the HTTP client is closed")
            self._open[conn] = None
        return conn, False

    def _connected(self, conn: http.client.HTTPConnection) -> None:
        """Remember the new socket; cut it at once if close() came during the handshake."""
        with self._lock:
            if conn in self._open:
                self._open[conn] = conn.sock
                return
        _shut(conn, conn.sock)
        raise httpx2.ConnectError("the HTTP client is closed")

    def _checkin(self, origin: Origin, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if self._closed or conn not in self._open or len(idle) >= MAX_IDLE:
                self._discard_locked(conn)
            else:
                idle.append((time.monotonic(), conn))

    def _discard(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._discard_locked(conn)

    def _discard_locked(self, conn: http.client.HTTPConnection) -> None:
        _shut(conn, self._open.pop(conn, None))

    # -- httpx interface -----------------------------------------------------------------

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        scheme = url.scheme
        # raw_host: the IDNA-encoded name as httpx would connect to it (IPv6 without brackets)
        port = url.port or (443 if scheme == "https" else 80)
        origin = (scheme, url.raw_host.decode("ascii"), port)
        timeouts = request.extensions.get("timeout", {})
        conn, reused = self._checkout(origin, timeouts.get("connect"))
        phase = "write" if reused else "connect"
        try:
            if not reused:
                conn.connect()
                self._connected(conn)
                phase = "write"
            conn.sock.settimeout(timeouts.get("write"))
            body = request.read()
            conn.putrequest(
                request.method, url.raw_path.decode("ascii"),
                skip_host=True, skip_accept_encoding=True,
            )  # fmt: skip
            for name, value in request.headers.raw:
                conn.putheader(name, value)
            conn.endheaders(body or None)
            phase = "read"
            conn.sock.settimeout(timeouts.get("read"))
            response = conn.getresponse()
            if response.status < 200:  # 1xx other than 100 Continue: not a final answer
                raise http.client.HTTPException(f"unexpected informational {response.status}")
            headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.getheaders()]
            return httpx2.Response(
                status_code=response.status,
                headers=headers,
                stream=_ResponseStream(self, origin, conn, response),
                extensions={
                    "http_version": b"HTTP/1.0" if response.version == 10 else b"HTTP/1.1",
                    "reason_phrase": response.reason.encode("latin-1", "replace"),
                },
            )
        except Exception as exc:
            self._discard(conn)
            raise _as_httpx_error(exc, phase) from exc
        except BaseException:
            self._discard(conn)
            raise

    def close(self) -> None:
        """Shut down every connection, idle or in use (a blocked read then fails at once)."""
        with self._lock:
            self._closed = True
            for conn, sock in self._open.items():
                _shut(conn, sock)
            self._open.clear()
            self._idle.clear()


class _ResponseStream(httpx2.SyncByteStream):
    """The body as it arrives: one piece per HTTP chunk; the connection goes back to the pool
    only when the body was read to the end and the server keeps it alive."""

    def __init__(self, transport: LeanTransport, origin: Origin, conn: Any, response: Any) -> None:
        self._transport = transport
        self._origin = origin
        self._conn = conn
        self._response: http.client.HTTPResponse | None = response

    def __iter__(self) -> Iterator[bytes]:
        response = self._response
        if response is None:
            return
        read1 = response.read1
        try:
            while True:
                data = read1(READ_SIZE)
                if not data:
                    break
                yield data
            if response.length:  # the connection ended before the Content-Length did
                raise http.client.IncompleteRead(b"", response.length)
        except Exception as exc:  # incl. errors of a socket close() cut from another thread
            self._release(reuse=False)
            raise _as_httpx_error(exc, "read") from exc
        # A body with a Content-Length is not marked read at its end; closing the response
        # (not the socket) is what lets http.client send the next request on this connection.
        response.close()
        self._release(reuse=not response.will_close)

    def close(self) -> None:
        """Called when the body was read to its end, or given up early (connection dropped)."""
        self._release(reuse=False)

    def _release(self, reuse: bool) -> None:
        response, self._response = self._response, None
        if response is None:
            return
        if reuse:
            self._transport._checkin(self._origin, self._conn)
        else:
            response.close()
            self._transport._discard(self._conn)


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """An idle keep-alive socket that is readable has been closed by the server (or holds
    bytes nobody asked for); either way it must not carry another request."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):  # select() fails on descriptors above 1023
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return not poller.poll(0)
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _shut(conn: http.client.HTTPConnection, sock: socket.socket | None) -> None:
    """Cut ``sock`` for every thread using it, then close the connection.

    ``socket.socket.shutdown`` is called on purpose instead of the SSL socket's own method,
    which would first drop its TLS state under a thread that is still reading.
    """
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass
    conn.close()


def _as_httpx_error(exc: Exception, phase: str) -> Exception:
    """The httpx exception the SDK and the backend expect for a failure in ``phase``."""
    if isinstance(exc, httpx2.HTTPError):
        return exc
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TimeoutError | socket.timeout):
        timeout = {"connect": httpx2.ConnectTimeout, "write": httpx2.WriteTimeout}
        return timeout.get(phase, httpx2.ReadTimeout)(message)
    if phase == "connect":
        return httpx2.ConnectError(message)
    if isinstance(exc, http.client.HTTPException | ValueError):
        return httpx2.RemoteProtocolError(message)
    if phase == "write":
        return httpx2.WriteError(message)
    return httpx2.ReadError(message)
