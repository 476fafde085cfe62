"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request itself is built in :mod:`pytest_skilltrigger.backends.request`. Credentials and
the base URL follow the SDK's own rules (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``,
``ANTHROPIC_BASE_URL``, profiles). The SDK is imported and its client created on the first
call: importing it costs seconds of CPU, which a run served from the store never needs to pay.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.backends.request import build_request
from pytest_skilltrigger.backends.sse import StreamError, decide
from pytest_skilltrigger.context import TriggerContext
from pytest_skilltrigger.outcome import RunOutcome
from pytest_skilltrigger.redact import redact
from pytest_skilltrigger.settings import DEFAULT_MODEL

STREAM_RETRIES = 4
DRAIN_LINES = 400


def credentials_configured() -> bool:
    """True when the SDK would find credentials (env key or token, or a configured profile)."""
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return True  # the common case, decided without importing the SDK
    import anthropic

    try:
        client = anthropic.Anthropic(max_retries=0)
    except Exception:  # any failure here means "not configured"
        return False
    try:
        return bool(client.api_key or client.auth_token or client.credentials)
    finally:
        client.close()


def iter_sse_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """Lines of an event stream from raw byte chunks.

    Splitting bytes ourselves is several times cheaper than the HTTP library's text line
    iterator, and only the few lines the decision needs are decoded further.
    """
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
    if pending:
        yield pending.rstrip(b"\r").decode("utf-8", "replace")


class AnthropicBackend:
    """Runs trigger checks through the ``anthropic`` SDK, one shared client and pool."""

    name = "anthropic"

    def __init__(self, model: str = DEFAULT_MODEL, timeout: float = 30.0, max_retries: int = 6):
        if not credentials_configured():
            raise BackendUnavailable(
                "no Anthropic API credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
            )
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self._client: Any = None
        self._sdk: Any = None
        self._transport_errors: tuple[type[BaseException], ...] = ()
        self._client_lock = threading.Lock()
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._closed = threading.Event()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(
            backend=self.name,
            model=self.model,
            request=build_request(context, "", self.model),
        )

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One run; statuses are retried by the SDK, stream failures by this loop."""
        request = build_request(context, query, self.model)
        deadline = time.monotonic() + self.timeout * (STREAM_RETRIES + 1)
        for attempt in range(STREAM_RETRIES + 1):
            outcome, retryable = self._attempt(context.skill_name, request)
            if not retryable or attempt == STREAM_RETRIES or time.monotonic() >= deadline:
                return outcome
            if self._closed.wait(self._backoff(attempt)):
                return outcome  # the session is shutting down: no more retries
        raise AssertionError("unreachable")

    def _connect(self) -> Any:
        """The shared client (and its connection pool), created on first use."""
        with self._client_lock:
            if self._client is None:
                import anthropic

                try:  # the SDK's HTTP library; a cut stream surfaces as its error, unwrapped
                    from httpx2 import HTTPError
                except ImportError:  # SDKs before 2.x use httpx
                    from httpx import HTTPError

                self._sdk = anthropic
                self._transport_errors = (anthropic.APIError, HTTPError, OSError, ValueError)
                self._client = anthropic.Anthropic(
                    max_retries=self.max_retries, timeout=self.timeout
                )
            return self._client

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return min(8.0, 0.25 * (2**attempt)) * jitter

    def _attempt(self, skill_name: str, request: dict[str, Any]) -> tuple[RunOutcome, bool]:
        """One HTTP request; returns the outcome and whether a failure is worth retrying."""
        request_id: str | None = None
        client = self._connect()
        sdk = self._sdk
        fatal = (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        try:
            with client.messages.with_streaming_response.create(
                **request, stream=True
            ) as response:
                request_id = response.http_response.headers.get("request-id")
                lines = iter_sse_lines(response.http_response.iter_bytes())
                decision = decide(lines)
                _drain(lines)
        except StreamError as exc:
            message = _with_id(f"stream error: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), exc.retryable
        except fatal as exc:
            outcome = RunOutcome(
                "error", error=_describe(exc), request_id=exc.request_id, fatal=True
            )
            return outcome, False
        except sdk.APIStatusError as exc:
            # the SDK has already retried this status with back-off (honouring retry-after)
            return RunOutcome("error", error=_describe(exc), request_id=exc.request_id), False
        except self._transport_errors as exc:
            # connection errors, timeouts and streams cut while we read them
            # connection errors, timeouts and streams cut while we read them
            message = _with_id(f"{type(exc).__name__}: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), True
        status = "triggered" if decision.chosen == f"skill:{skill_name}" else "not_triggered"
        outcome = RunOutcome(
            status, chosen=decision.chosen, usage=decision.usage, request_id=request_id
        )
        return outcome, False

    def close(self) -> None:
        """Stop retrying and close the pool, which also aborts calls still in flight."""
        self._closed.set()
        with self._client_lock:
            if self._client is not None:
                self._client.close()


def _drain(lines: Iterator[str], limit: int = DRAIN_LINES) -> None:
    """Read the short tail of a decided stream without parsing it, so the connection goes
    back to the pool instead of being torn down (a new TLS handshake costs more than the
    few frames after a tool call). A stream with a long tail is simply closed."""
    for count, _line in enumerate(lines):
        if count >= limit:
            return


def _describe(exc: Any) -> str:
    message = exc.api_message or str(exc)
    return _with_id(f"{exc.status_code} {exc.type or 'error'}: {redact(message)}", exc.request_id)


def _with_id(message: str, request_id: str | None) -> str:
    return f"{message} (request id {request_id})" if request_id else message
