"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request itself is built in :mod:`pytest_skilltrigger.backends.api.request`. Credentials and
the base URL follow the SDK's own rules (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``,
``ANTHROPIC_BASE_URL``, profiles). The SDK is imported and its client created on the first
call: importing it costs seconds of CPU, which a run served from the store never needs to pay.

Each attempt goes through the SDK's request path (``client.post``: authentication, headers,
retries with back-off, status errors) with a body serialised ahead, on the SDK's HTTP client
with the lean transport of :mod:`pytest_skilltrigger.backends.http_transport`; the raw stream
is read by :func:`pytest_skilltrigger.backends.api.sse.decide` only as far as the decision.
"""

from __future__ import annotations

import os
import random
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from typing import Any

from pytest_skilltrigger.backends.api.request import build_request, request_body
from pytest_skilltrigger.backends.api.sse import StreamError, decide
from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.outcome import RunOutcome
from pytest_skilltrigger.engine.settings import DEFAULT_MODEL
from pytest_skilltrigger.support.redact import redact

STREAM_RETRIES = 4
DRAIN_BYTES = 16 * 1024
# Set to "httpx" to send through the SDK's default HTTP transport instead of the lean one.
TRANSPORT_ENV = "SKILLTRIGGER_HTTP_TRANSPORT"


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
        self._response_type: Any = None
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
        deadline = time.monotonic() + self.timeout * (STREAM_RETRIES + 1)
        for attempt in range(STREAM_RETRIES + 1):
            outcome, retryable = self._attempt(context, query)
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
                from httpx2 import HTTPError, Response  # the SDK's HTTP library

                self._sdk = anthropic
                self._response_type = Response
                self._transport_errors = (anthropic.APIError, HTTPError, OSError, ValueError)
                self._client = anthropic.Anthropic(
                    max_retries=self.max_retries,
                    timeout=self.timeout,
                    http_client=_lean_http_client(self.timeout),
                )
                _warn_if_deprecated(self.model)
            return self._client

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return min(8.0, 0.25 * (2**attempt)) * jitter

    def _attempt(self, context: TriggerContext, query: str) -> tuple[RunOutcome, bool]:
        """One HTTP request; returns the outcome and whether a failure is worth retrying."""
        request_id: str | None = None
        client = self._connect()
        sdk = self._sdk
        fatal = (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        try:
            # The SDK's own request path (auth, headers, retries, status errors) with a body
            # serialised ahead; the raw response is read here, only as far as the decision.
            response = client.post(
                "/v1/messages",
                cast_to=self._response_type,
                content=request_body(context, query, self.model),
                stream=True,
            )
            try:
                request_id = response.headers.get("request-id")
                encoded = response.headers.get("content-encoding", "identity") != "identity"
                chunks = iter(response.iter_bytes() if encoded else response.iter_raw())
                decision = decide(chunks)
                if decision.tool_input is not None or decision.chosen == "text":
                    _drain(chunks, self._transport_errors)
            finally:
                response.close()
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
            message = _with_id(f"{type(exc).__name__}: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), True
        triggered = decision.chosen == f"skill:{context.skill_name}"
        status = "triggered" if triggered else "not_triggered"
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


def _drain(chunks: Iterator[bytes], errors: tuple[type[BaseException], ...]) -> None:
    """Read the short tail of a stream decided at its end, unparsed, so the connection goes
    back to the pool instead of being torn down (a new TLS handshake costs more than the
    few frames after a finished tool call). A long tail is cut; so is any stream decided at
    a tool's start, whose input is still being generated: closing it at once saves both the
    wait and the output tokens. The decision is made: a failure here does not undo it."""
    seen = 0
    try:
        for chunk in chunks:
            seen += len(chunk)
            if seen >= DRAIN_BYTES:
                return
    except errors:
        return


def _warn_if_deprecated(model: str) -> None:
    """The SDK's own warning for a retired model, once: ``messages.create`` gives it on every
    call, and requests here go through ``client.post``, which does not."""
    try:
        from anthropic.resources.messages.messages import DEPRECATED_MODELS
    except ImportError:  # pragma: no cover - an SDK without the table
        return
    if model in DEPRECATED_MODELS:
        warnings.warn(
            f"The model '{model}' is deprecated and will reach end-of-life on "
            f"{DEPRECATED_MODELS[model]}: trigger results for it will not last "
            "(set --trigger-model to a current model).",
            DeprecationWarning,
            stacklevel=2,
        )


def _lean_http_client(timeout: float) -> Any:
    """The SDK's HTTP client on :class:`LeanTransport`, or ``None`` for the SDK's default.

    The default is kept when proxies are configured in the environment (the SDK's transport
    honours them) or when ``SKILLTRIGGER_HTTP_TRANSPORT=httpx`` asks for it.
    """
    if os.environ.get(TRANSPORT_ENV, "").strip().lower() == "httpx":
        return None
    proxies = urllib.request.getproxies()
    if any(proxies.get(scheme) for scheme in ("http", "https", "all")):
        return None
    import anthropic

    from pytest_skilltrigger.backends.http_transport import LeanTransport

    return anthropic.DefaultHttpxClient(transport=LeanTransport(), timeout=timeout)


def _describe(exc: Any) -> str:
    message = exc.api_message or str(exc)
    return _with_id(f"{exc.status_code} {exc.type or 'error'}: {redact(message)}", exc.request_id)


def _with_id(message: str, request_id: str | None) -> str:
    return f"{message} (request id {request_id})" if request_id else message
