"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request itself is built in :mod:`pytest_skilltrigger.backends.api.request`; the SDK's
client, shared by the session and made on first use, is :mod:`.sdk_client`.

Each attempt goes through the SDK's request path and its own HTTP transport (``client.post``:
authentication, headers, connection pool, retries with back-off, status errors) with a body
serialised once per context; the raw stream is read by
:func:`pytest_skilltrigger.backends.api.sse.decide` only as far as the decision, then cut.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.backends.api.errors import describe_error, with_request_id
from pytest_skilltrigger.backends.api.request import body_length, build_request, request_body
from pytest_skilltrigger.backends.api.sdk_client import RunState, SdkClient, credentials_configured
from pytest_skilltrigger.backends.api.sse import EventReader
from pytest_skilltrigger.backends.base import ASK_MAX_TOKENS, BackendUnavailable
from pytest_skilltrigger.backends.capture import Captures, splice
from pytest_skilltrigger.backends.first_choice import StreamError
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.settings import DEFAULT_MODEL
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.redact import redact

if TYPE_CHECKING:
    from pytest_skilltrigger.backends.api.message_batches import MessageBatches

STREAM_RETRIES = 4
ASK_TIMEOUT = 120.0
DECISION_OUTPUT_TOKENS = 300  # a budget estimate of the output before a decision
DEAD_ENDPOINT_FAILURES = 3  # refused connections in a row, never a success: stop
DRAIN_BYTES = 16 * 1024
# The SDK's own switch (what ``with_streaming_response`` sets): hand back the unread response.
RAW_STREAM_HEADER = "X-Stainless-Raw-Response"


class AnthropicBackend:
    """Runs trigger checks through the ``anthropic`` SDK, one shared client and pool."""

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        timeout: float = 30.0,
        max_retries: int = 6,
        captures: Captures | None = None,
    ):
        if not credentials_configured():
            raise BackendUnavailable(
                "no Anthropic API credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
            )
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        # the installed CLI's own requests, replayed (None: the builtin request)
        self.captures = captures
        # the SDK's client, shared by every run and proposal (made on first use)
        self.connection = SdkClient(model, timeout, max_retries)
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._reachable = False  # set once the endpoint has answered
        self._dead_streak = 0  # connections refused in a row before it ever answered

    def context_key(self, context: TriggerContext) -> str:
        if self.captures is not None:
            captured, _frame = self.captures.get(context)
            return context.key(backend=self.name, captured=captured.key_material())
        return context.key(
            backend=self.name,
            model=self.model,
            request=build_request(context, "", self.model),
        )

    @property
    def context_label(self) -> str:
        """Which context the runs send, for the header line."""
        if self.captures is None:
            return "builtin (our approximation of Claude Code's context)"
        return f"claude-code (captured from the Claude Code CLI {self.captures.cli_version})"

    def request_parts(
        self, context: TriggerContext, query: str
    ) -> tuple[bytes, str, dict[str, str]]:
        """The body, path and extra headers of one run: the captured CLI request with the
        query spliced in, or the builtin request."""
        if self.captures is None:
            return request_body(context, query, self.model), "/v1/messages", {}
        captured, frame = self.captures.get(context)
        return splice(frame, query), captured.path + "?beta=true", captured.headers

    def model_of(self, context: TriggerContext) -> str:
        if self.captures is None:
            return self.model
        return self.captures.get(context)[0].model or self.model

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        """What one run is expected to cost before it is sent: the request's size in tokens
        (about a token per three bytes, all counted as uncached input) and the output a
        decision takes."""
        if self.captures is None:
            size = body_length(context, query, self.model)
        else:
            head, tail = self.captures.get(context)[1]
            size = len(head) + len(tail) + len(query.encode("utf-8"))
        return Usage(input_tokens=size // 3 + 1, output_tokens=DECISION_OUTPUT_TOKENS)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One run within ``timeout`` seconds, retries included: statuses and connection
        errors are retried by the SDK, stream failures by this loop; every request sent is
        counted on the outcome."""
        state = RunState(time.monotonic() + self.timeout)
        state.request = self.request_parts(context, query)  # built once, sent by every attempt
        with self.connection.running(state):
            outcome = self._attempts(context, query, state)
        return replace(outcome, requests=state.sent, model=self.model_of(context))

    def _attempts(self, context: TriggerContext, query: str, state: RunState) -> RunOutcome:
        for attempt in range(STREAM_RETRIES + 1):
            outcome, retryable = self._attempt(context, query, state)
            if not retryable or attempt == STREAM_RETRIES:
                return outcome
            pause = self._backoff(attempt)
            if state.remaining() <= pause or self.connection.closed.wait(pause):
                return outcome  # out of time, or the session is shutting down
        raise AssertionError("unreachable")

    def batches(self) -> MessageBatches:
        """Trigger runs as message batches on this backend's client (``--trigger-batch``)."""
        from pytest_skilltrigger.backends.api.message_batches import MessageBatches

        return MessageBatches(self)

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return min(8.0, 0.25 * (2**attempt)) * jitter

    def _attempt(
        self, context: TriggerContext, query: str, state: RunState
    ) -> tuple[RunOutcome, bool]:
        """One request, with the SDK's retries; the outcome and whether a failure is worth
        another try."""
        sent = self._send(state)
        if isinstance(sent, tuple):
            return sent
        self._reachable = True
        return self._read(sent, context)

    def _send(self, state: RunState) -> Any:
        """Post the run's body through the SDK's own request path (auth, headers, retries,
        status errors); the raw-stream header makes it hand back the unread response. A
        failure comes back as (outcome, worth another try)."""
        client = self.connection.client()
        sdk = self.connection.sdk()
        fatal = (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        body, path, headers = state.request
        try:
            return client.post(
                path,
                cast_to=object,
                content=body,
                options={
                    "headers": {**headers, RAW_STREAM_HEADER: "stream"},
                    "max_retries": self.connection.sdk_retries(state, self._reachable),
                },
            )
        except fatal as exc:
            outcome = RunOutcome(
                "error", error=describe_error(exc), request_id=exc.request_id, fatal=True
            )
            return outcome, False
        except sdk.APIStatusError as exc:
            # the SDK has already retried this status with back-off (honouring retry-after)
            message = describe_error(exc)
            if state.gave_up_waiting is not None:
                message += (
                    f" (not retried: the server asked to wait {state.gave_up_waiting:g}s, "
                    "past the run's --trigger-timeout)"
                )
            return RunOutcome("error", error=message, request_id=exc.request_id), False
        except sdk.APITimeoutError:
            message = f"timed out after {self.timeout:g}s (--trigger-timeout), retries included"
            return RunOutcome("error", error=message), False
        except sdk.APIError as exc:
            # a refused connection or a failed name lookup, after the SDK's own retries; not
            # tried again here unless the endpoint has answered before (a passing blip)
            return self._unreachable(exc), self._reachable

    def _read(self, response: Any, context: TriggerContext) -> tuple[RunOutcome, bool]:
        """Read the stream as far as the decision (see :class:`EventReader`)."""
        request_id = response.headers.get("request-id")
        raw = response.http_response
        encoded = response.headers.get("content-encoding", "identity") != "identity"
        reader = EventReader(raw.iter_bytes() if encoded else raw.iter_raw())
        try:
            decision = reader.decide()
            if decision.tool_input is not None or decision.chosen == "text":
                # A stream decided at its end (a Skill call, a plain answer) is read on for
                # its short tail: its connection goes back to the pool, and its
                # message_delta gives the output tokens (thinking included) it is billed
                # for. One decided at another tool's start is cut at once, which also stops
                # the generation of that tool's input.
                reader.drain(DRAIN_BYTES)
        except StreamError as exc:
            message = with_request_id(f"stream error: {redact(str(exc))}", request_id)
            outcome = RunOutcome("error", error=message, usage=reader.usage, request_id=request_id)
            return outcome, exc.retryable
        except Exception as exc:  # the HTTP library's read errors: a stream cut while read
            message = with_request_id(f"{type(exc).__name__}: {redact(str(exc))}", request_id)
            outcome = RunOutcome("error", error=message, usage=reader.usage, request_id=request_id)
            return outcome, True
        finally:
            response.close()
        triggered = decision.chosen == f"skill:{context.skill_name}"
        status = "triggered" if triggered else "not_triggered"
        outcome = RunOutcome(
            status, chosen=decision.chosen, usage=reader.usage, request_id=request_id
        )
        return outcome, False

    def _unreachable(self, exc: Exception) -> RunOutcome:
        """A connection that could not be made. Before the endpoint has ever answered, a few
        of these in a row stop the session (fatal), naming the endpoint."""
        message = f"{type(exc).__name__}: {redact(str(exc))}"
        with self._rng_lock:
            if not self._reachable:
                self._dead_streak += 1
            dead = not self._reachable and self._dead_streak >= DEAD_ENDPOINT_FAILURES
        if not dead:
            return RunOutcome("error", error=message)
        endpoint = redact(self.connection.base_url)
        return RunOutcome(
            "error", error=f"cannot reach the Messages API at {endpoint}: {message}", fatal=True
        )

    def ask(self, prompt: str, model: str | None = None) -> tuple[str, Usage, int]:
        """One plain request (the optimizer's proposals) on the same client and pool, with a
        longer timeout: a proposal is a few hundred words, not one tool call. Returns the
        text, the usage and the requests sent (the SDK's retries included)."""
        client = self.connection.client()
        timeout = max(self.timeout, ASK_TIMEOUT)
        # the request hook counts its attempts, the SDK's retries included
        with self.connection.running(RunState(time.monotonic() + timeout)) as state:
            try:
                message = client.with_options(timeout=timeout).messages.create(
                    model=model or self.model,
                    max_tokens=ASK_MAX_TOKENS,
                    messages=[{"role": "user", "content": prompt}],
                )
            except self.connection.sdk().APIError as exc:
                raise AskError(redact(str(exc)), requests=state.sent) from None
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        return text, Usage.from_dict(message.usage.model_dump()), state.sent

    def close(self) -> None:
        """Stop retrying and close the pool (and the capturing CLI's workspace)."""
        if self.captures is not None:
            self.captures.close()
        self.connection.close()
