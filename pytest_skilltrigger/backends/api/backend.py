"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request is built in :mod:`.request` (the builtin one) or captured from the installed CLI
(:mod:`pytest_skilltrigger.backends.capture`); the SDK's client, shared by the session and
made on first use, is :mod:`.sdk_client`. Each run is streamed through the SDK's public
``with_streaming_response`` and its bytes read by :class:`~.sse.EventReader` only as far as
the decision; leaving the response closes it.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.backends.api.errors import describe_error, with_request_id
from pytest_skilltrigger.backends.api.request import (
    ApiRequest,
    RequestTemplate,
    builtin_template,
)
from pytest_skilltrigger.backends.api.sdk_client import RunState, SdkClient, credentials_configured
from pytest_skilltrigger.backends.api.sse import EventReader
from pytest_skilltrigger.backends.base import ASK_MAX_TOKENS, BackendUnavailable
from pytest_skilltrigger.backends.capture import Captures
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
DEAD_ENDPOINT_FAILURES = 3  # connections that could not be made, in a row, never an answer
DRAIN_BYTES = 16 * 1024

#: (the outcome, whether a failure is worth another try)
Attempt = tuple[RunOutcome, bool]


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
        self.connection = SdkClient(timeout, max_retries)
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._dead_streak = 0  # connections not made in a row before the endpoint answered

    def template(self, context: TriggerContext) -> RequestTemplate:
        """The request every run of ``context`` sends, but for its query: the captured CLI
        request, or the builtin one."""
        if self.captures is None:
            return builtin_template(context, self.model)
        return self.captures.get(context)[1]

    def context_key(self, context: TriggerContext) -> str:
        if self.captures is not None:
            captured, _template = self.captures.get(context)
            return context.key(backend=self.name, captured=captured.key_material())
        return context.key(
            backend=self.name,
            model=self.model,
            request=self.template(context).for_query("").params,
        )

    @property
    def context_label(self) -> str:
        """Which context the runs send, for the header line."""
        if self.captures is None:
            return "builtin (our approximation of Claude Code's context)"
        return f"claude-code (captured from the Claude Code CLI {self.captures.cli_version})"

    def model_of(self, context: TriggerContext) -> str:
        if self.captures is None:
            return self.model
        return self.captures.get(context)[0].model or self.model

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        """What one run is expected to cost before it is sent: the request's size in tokens
        (about a token per three bytes, all counted as uncached input) and the output a
        decision takes."""
        size = self.template(context).size_with(query)
        return Usage(input_tokens=size // 3 + 1, output_tokens=DECISION_OUTPUT_TOKENS)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One run within ``timeout`` seconds, retries included: statuses and connection
        errors are retried by the SDK, stream failures by this loop; every request sent is
        counted on the outcome."""
        state = RunState(time.monotonic() + self.timeout)
        with self.connection.running(state):
            outcome = self._attempts(context, query, state)
        return replace(outcome, requests=state.sent, model=self.model_of(context))

    def _attempts(self, context: TriggerContext, query: str, state: RunState) -> RunOutcome:
        request = self.template(context).for_query(query)  # built once, sent by every try
        for attempt in range(STREAM_RETRIES + 1):
            outcome, retryable = self._attempt(request, context, state)
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
        with self._lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return float(min(8.0, 0.25 * (2**attempt)) * jitter)

    def _attempt(self, request: ApiRequest, context: TriggerContext, state: RunState) -> Attempt:
        """One request, with the SDK's retries, read as far as the decision."""
        sdk = self.connection.sdk()
        retries = self.connection.sdk_retries(state)
        try:
            with self.connection.stream(request, retries, max(state.remaining(), 0.001)) as resp:
                return self._read(resp, context)
        except sdk.APIStatusError as exc:
            return self._refused(exc, state), False
        except sdk.APITimeoutError as exc:
            if type(exc.__cause__).__name__ == "ConnectTimeout":  # no connection was made
                return self._unreachable(exc), self.connection.answered.is_set()
            message = f"timed out after {self.timeout:g}s (--trigger-timeout), retries included"
            return RunOutcome("error", error=message), False
        except sdk.APIConnectionError as exc:
            # a refused connection or a failed name lookup, after the SDK's own retries; not
            # tried again here unless the endpoint has answered before (a passing blip)
            return self._unreachable(exc), self.connection.answered.is_set()

    def _refused(self, exc: Any, state: RunState) -> RunOutcome:
        """An error status, after the SDK's own retries (with back-off, honouring
        retry-after). Bad credentials, no access or an unknown model stop the session."""
        sdk = self.connection.sdk()
        fatal = isinstance(
            exc, (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        )
        message = describe_error(exc)
        if not fatal and state.gave_up_waiting is not None:
            message += (
                f" (not retried: the server asked to wait {state.gave_up_waiting:g}s, "
                "past the run's --trigger-timeout)"
            )
        return RunOutcome("error", error=message, request_id=exc.request_id, fatal=fatal)

    def _read(self, response: Any, context: TriggerContext) -> Attempt:
        """Read the stream as far as the decision (see :class:`EventReader`)."""
        request_id = response.headers.get("request-id")
        reader = EventReader(response.iter_bytes())
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
        outcome = RunOutcome.of_choice(
            decision.chosen, context.skill_name, usage=reader.usage, request_id=request_id
        )
        return outcome, False

    def _unreachable(self, exc: Exception) -> RunOutcome:
        """A connection that could not be made. Before the endpoint has ever answered, a few
        of these in a row stop the session (fatal), naming the endpoint."""
        message = f"{type(exc).__name__}: {redact(str(exc))}"
        answered = self.connection.answered.is_set()
        with self._lock:
            if not answered:
                self._dead_streak += 1
            dead = not answered and self._dead_streak >= DEAD_ENDPOINT_FAILURES
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
                message = client.messages.create(
                    model=model or self.model,
                    max_tokens=ASK_MAX_TOKENS,
                    messages=[{"role": "user", "content": prompt}],
                    timeout=timeout,
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
