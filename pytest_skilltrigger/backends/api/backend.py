"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request itself is built in :mod:`pytest_skilltrigger.backends.api.request`. Credentials and
the base URL follow the SDK's own rules (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``,
``ANTHROPIC_BASE_URL``, profiles). The SDK is imported and its client created on the first
call: importing it costs seconds of CPU, which a run served from the store never needs to pay.

Each attempt goes through the SDK's request path and its own HTTP transport (``client.post``:
authentication, headers, connection pool, retries with back-off, status errors) with a body
serialised once per context; the raw stream is read by
:func:`pytest_skilltrigger.backends.api.sse.decide` only as far as the decision, then cut.
"""

from __future__ import annotations

import os
import random
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from pytest_skilltrigger.backends.api.request import build_request, request_body
from pytest_skilltrigger.backends.api.sse import decide
from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.backends.first_choice import StreamError
from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage
from pytest_skilltrigger.engine.settings import DEFAULT_MODEL
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.redact import redact

STREAM_RETRIES = 4
ASK_TIMEOUT = 120.0
DRAIN_BYTES = 16 * 1024
# The SDK's own switch (what ``with_streaming_response`` sets): hand back the unread response.
RAW_STREAM_HEADER = "X-Stainless-Raw-Response"


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
        """The shared client (and the SDK's own connection pool), created on first use."""
        with self._client_lock:
            if self._client is None:
                import anthropic

                self._sdk = anthropic
                self._client = anthropic.Anthropic(
                    max_retries=self.max_retries, timeout=self.timeout
                )
                _warn_if_deprecated(self.model)
            return self._client

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return min(8.0, 0.25 * (2**attempt)) * jitter

    def _attempt(self, context: TriggerContext, query: str) -> tuple[RunOutcome, bool]:
        """One HTTP request; returns the outcome and whether a failure is worth retrying."""
        client = self._connect()
        sdk = self._sdk
        fatal = (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        try:
            # The SDK's own request path (auth, headers, retries, status errors) with a body
            # serialised ahead; the raw-stream header makes it hand back the unread response.
            response = client.post(
                "/v1/messages",
                cast_to=object,
                content=request_body(context, query, self.model),
                options={"headers": {RAW_STREAM_HEADER: "stream"}},
            )
        except fatal as exc:
            outcome = RunOutcome(
                "error", error=_describe(exc), request_id=exc.request_id, fatal=True
            )
            return outcome, False
        except sdk.APIStatusError as exc:
            # the SDK has already retried this status with back-off (honouring retry-after)
            return RunOutcome("error", error=_describe(exc), request_id=exc.request_id), False
        except sdk.APIError as exc:
            # connection errors and timeouts, after the SDK's own retries
            message = f"{type(exc).__name__}: {redact(str(exc))}"
            return RunOutcome("error", error=message), True
        request_id = response.headers.get("request-id")
        raw = response.http_response
        try:
            encoded = response.headers.get("content-encoding", "identity") != "identity"
            chunks = iter(raw.iter_bytes() if encoded else raw.iter_raw())
            decision = decide(chunks)
            if decision.tool_input is not None or decision.chosen == "text":
                _drain(chunks)
        except StreamError as exc:
            message = _with_id(f"stream error: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), exc.retryable
        except Exception as exc:  # the HTTP library's read errors: a stream cut while read
            message = _with_id(f"{type(exc).__name__}: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), True
        finally:
            response.close()
        triggered = decision.chosen == f"skill:{context.skill_name}"
        status = "triggered" if triggered else "not_triggered"
        outcome = RunOutcome(
            status, chosen=decision.chosen, usage=decision.usage, request_id=request_id
        )
        return outcome, False

    def ask(self, prompt: str, model: str | None = None) -> tuple[str, Usage]:
        """One plain request (the optimizer's proposals) on the same client and pool, with a
        longer timeout: a proposal is a few hundred words, not one tool call."""
        client = self._connect()
        try:
            message = client.with_options(timeout=max(self.timeout, ASK_TIMEOUT)).messages.create(
                model=model or self.model,
                max_tokens=4096,
                messages=[{"role": "user", "content": prompt}],
            )
        except self._sdk.APIError as exc:
            raise AskError(redact(str(exc))) from None
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        return text, Usage.from_dict(message.usage.model_dump())

    def close(self) -> None:
        """Stop retrying and close the pool, which also aborts calls still in flight."""
        self._closed.set()
        with self._client_lock:
            if self._client is not None:
                self._client.close()


def _drain(chunks: Iterator[bytes]) -> None:
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
    except Exception:  # the HTTP library's read errors; the decision stands
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


def _describe(exc: Any) -> str:
    message = exc.api_message or str(exc)
    return _with_id(f"{exc.status_code} {exc.type or 'error'}: {redact(message)}", exc.request_id)


def _with_id(message: str, request_id: str | None) -> str:
    return f"{message} (request id {request_id})" if request_id else message
