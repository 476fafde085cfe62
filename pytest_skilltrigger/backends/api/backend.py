"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The request is built in :mod:`.request` (the builtin one) or captured from the installed CLI
(:mod:`pytest_skilltrigger.backends.capture`); the SDK's client, shared by the session and
made on first use, is :mod:`.sdk_client`. Each run is streamed through the SDK's public
``with_streaming_response`` and its bytes read by :class:`~.sse.EventReader` only as far as
the decision; leaving the response closes it.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.backends.api.errors import describe_error, with_request_id
from pytest_skilltrigger.backends.api.follow_up import follow_up, offered_tools, request_size
from pytest_skilltrigger.backends.api.rate_limit import (
    Need,
    RateLimiter,
    RateLimitSetting,
    counted_input,
)
from pytest_skilltrigger.backends.api.request import (
    ApiRequest,
    RequestTemplate,
    builtin_template,
)
from pytest_skilltrigger.backends.api.sdk_client import RunState, SdkClient, credentials_configured
from pytest_skilltrigger.backends.api.sse import EventReader
from pytest_skilltrigger.backends.base import (
    ASK_MAX_TOKENS,
    Answer,
    BackendUnavailable,
)
from pytest_skilltrigger.backends.capture import CaptureError, Captures
from pytest_skilltrigger.backends.first_choice import StreamError, choice_of
from pytest_skilltrigger.backends.looking_around import ProjectFiles
from pytest_skilltrigger.backends.message_assembly import MessageAssembly
from pytest_skilltrigger.backends.prompt_hooks import (
    HookedTemplate,
    HookFailed,
    PromptHooks,
    prompt_hook_commands,
)
from pytest_skilltrigger.model.context import ProjectSetup, TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.prices import did_you_mean
from pytest_skilltrigger.model.settings import DEFAULT_MODEL
from pytest_skilltrigger.model.turn import LOOKING, step_text
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.redact import redact

if TYPE_CHECKING:  # the SDK is imported on the first call (a second of CPU)
    from anthropic import APIStatusError

    from pytest_skilltrigger.backends.api.message_batches import MessageBatches

STREAM_RETRIES = 4
RATE_LIMIT_RETRIES = 8  # 429s a request is waited out for (the limiter paces the retries)
ASK_TIMEOUT = 120.0
DECISION_OUTPUT_TOKENS = 300  # a budget estimate of the output before a decision
ASK_OUTPUT_TOKENS = 1024  # what an answer to a plain question is expected to take
DEAD_ENDPOINT_FAILURES = 3  # connections that could not be made, in a row, never an answer
DRAIN_BYTES = 16 * 1024

#: (the outcome, whether a failure is worth another try)
Attempt = tuple[RunOutcome, bool]


def _retried_status(status: int) -> bool:
    """Whether the SDK retries a status (and so may this loop, past the SDK's retries)."""
    return status in (408, 409, 429) or status >= 500


@dataclass
class _Paced:
    """What a paced request used (None: it failed), for the limiter to correct its counts."""

    usage: Usage | None = None


class AnthropicBackend:
    """Runs trigger checks through the ``anthropic`` SDK, one shared client and pool."""

    name = "anthropic"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        timeout: float = 30.0,
        max_retries: int = 6,
        captures: Captures | None = None,
        limiter: RateLimiter | None = None,
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
        # the session's pacing to the rate limits (none: requests go out as they come)
        self.limiter = limiter or RateLimiter(RateLimitSetting(enabled=False))
        # the SDK's client, shared by every run and proposal (made on first use)
        self.connection = SdkClient(
            timeout, max_retries, paced=self.limiter.enabled, watcher=self._observe
        )
        # what each context's last answer counted toward the input-token limit (its cached
        # prefix does not count): the next run of it is paced at that
        self._counted: dict[TriggerContext, int] = {}
        self._rng = random.Random()
        self._lock = threading.Lock()
        self._dead_streak = 0  # connections not made in a row before the endpoint answered
        self._hooks: dict[ProjectSetup, PromptHooks] = {}  # each project's prompt hooks
        self._hooked: dict[TriggerContext, HookedTemplate] = {}  # their contexts' requests

    def template(self, context: TriggerContext) -> RequestTemplate:
        """The request every run of ``context`` sends, but for its query: the captured CLI
        request, or the builtin one (built per query when the project's prompt hooks add
        text to each, see :class:`~pytest_skilltrigger.backends.prompt_hooks.PromptHooks`)."""
        hooked = context.project is not None and prompt_hook_commands(context.project)
        if self.captures is not None:
            if hooked:
                raise CaptureError(
                    "capture mode replays one request, and the project's UserPromptSubmit "
                    "hooks add text of each query's own: use the builtin context or the "
                    "claude-code backend"
                )
            return self.captures.get(context)[1]
        if not hooked:
            return builtin_template(context, self.model)
        with self._lock:
            if context not in self._hooked:
                setup = context.project
                assert setup is not None
                hooks = self._hooks.get(setup) or self._hooks.setdefault(setup, PromptHooks(setup))
                self._hooked[context] = HookedTemplate(context, self.model, hooks)
            return self._hooked[context]

    def context_key(self, context: TriggerContext) -> str:
        if self.captures is not None:
            captured, _template = self.captures.get(context)
            return context.key(backend=self.name, captured=captured.key_material())
        return context.key(
            backend=self.name,
            model=self.model,
            request=self.template(context).key_params(),
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
        """One run within ``timeout`` seconds, retries included (time spent waiting for the
        rate limit apart): statuses and connection errors are retried by the SDK, stream
        failures and 429s by this loop; every request sent is counted on the outcome."""
        model = self.model_of(context)
        state = RunState(time.monotonic() + self.timeout, model=model)
        need = Need(model, self._input_for_limit(context, query), DECISION_OUTPUT_TOKENS)
        try:
            request = self.template(context).for_query(query)  # built once, sent by every try
        except HookFailed as exc:  # the project's hook: its words may hold what it was given
            return RunOutcome("error", error=redact(str(exc)), requests=0, model=model)
        with self.connection.running(state):
            if context.within is None:
                outcome = self._attempts(request, context, need, state)
            else:
                outcome = self._turn(request, context, need, state)
        if outcome.status != "error":
            self._counted[context] = counted_input(model, outcome.usage.to_dict())
        return replace(
            outcome,
            requests=state.sent,
            model=model,
            waited=state.waited,
            rate_limited=state.refused,
        )

    def _turn(
        self, request: ApiRequest, context: TriggerContext, need: Need, state: RunState
    ) -> RunOutcome:
        """A run that goes on through read-only looking around (``--trigger-within=turn``):
        each read-only call is answered from the project's files and the next request sent,
        until a call that is not one (the choice) or the bound. Every request is paced,
        counted and priced; the usage is the turn's."""
        rule = context.within
        assert rule is not None  # (run() sends the others to _attempts)
        suffix = self.captures.get(context)[0].read_suffix if self.captures else ""
        files = ProjectFiles(rule.root, offered_tools(request), read_suffix=suffix)
        steps: list[str] = []
        usage = Usage()
        for looked in range(rule.bound + 1):
            assembly = MessageAssembly()
            outcome = self._attempts(request, context, need, state, assembly)
            usage = usage + outcome.usage
            calls = assembly.tool_calls() if outcome.status != "error" else []
            chosen = next(((n, i) for _id, n, i in calls if not rule.looks(n, i)), None)
            if not calls or chosen is not None:
                if chosen is not None and outcome.chosen != choice_of(*chosen):
                    outcome = RunOutcome.of_choice(choice_of(*chosen), context)
                return replace(outcome, usage=usage, path=tuple(steps))
            steps += [step_text(name, given, rule.root) for _id, name, given in calls]
            if looked == rule.bound:
                break
            results = [files.answer(name, given).block(use_id) for use_id, name, given in calls]
            request = follow_up(request, assembly.content(), results)
            need = replace(need, input_tokens=request_size(request) // 3 + 1)
        return RunOutcome("not_triggered", chosen=LOOKING, usage=usage, path=tuple(steps))

    def _input_for_limit(self, context: TriggerContext, query: str) -> int:
        """The input tokens a run is expected to count toward the limit: what its context's
        last answer counted, else the whole request."""
        known = self._counted.get(context)
        return known if known is not None else self.estimate(context, query).input_tokens

    def _attempts(
        self,
        request: ApiRequest,
        context: TriggerContext,
        need: Need,
        state: RunState,
        assembly: MessageAssembly | None = None,
    ) -> RunOutcome:
        """One request, tried again as its failures allow (``assembly``: the blocks of the
        message that answers it are wanted too, a turn's)."""
        failures = refusals = 0
        while True:
            refused_before = state.refused
            with self._paced(need, state) as paced:
                if assembly is not None:
                    assembly.reset()
                outcome, retryable = self._attempt(request, context, state, assembly)
                paced.usage = outcome.usage if outcome.status != "error" else None
            if state.refused > refused_before and self.limiter.enabled:
                if refusals < RATE_LIMIT_RETRIES and outcome.status == "error":
                    refusals += 1  # the limiter waits out its retry-after, for every run
                    continue
            if not retryable or failures == STREAM_RETRIES:
                return outcome
            pause = self._backoff(failures)
            failures += 1
            if state.remaining() <= pause or self.connection.closed.wait(pause):
                return outcome  # out of time, or the session is shutting down

    @contextlib.contextmanager
    def _paced(self, need: Need, state: RunState) -> Iterator[_Paced]:
        """Hold a request back until the rate limit lets it through (the wait is not the
        run's time); once it is over, tell the limiter what it used and whether a 429 met
        it."""
        permit = self.limiter.acquire(need, self.connection.closed)
        state.wait_out(permit.waited)
        refused_before = state.refused
        paced = _Paced()
        try:
            yield paced
        finally:
            usage = paced.usage.to_dict() if paced.usage is not None else None
            self.limiter.release(permit, usage, state.refused > refused_before)

    def _observe(self, model: str, headers: Mapping[str, str], status: int) -> None:
        self.limiter.observe(model or self.model, headers, status)

    def batches(self) -> MessageBatches:
        """Trigger runs as message batches on this backend's client (``--trigger-batch``)."""
        # deferred: the batches' module, only with --trigger-batch
        from pytest_skilltrigger.backends.api.message_batches import MessageBatches

        return MessageBatches(self)

    def _backoff(self, attempt: int) -> float:
        with self._lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return float(min(8.0, 0.25 * (2**attempt)) * jitter)

    def _attempt(
        self,
        request: ApiRequest,
        context: TriggerContext,
        state: RunState,
        assembly: MessageAssembly | None = None,
    ) -> Attempt:
        """One request, with the SDK's retries, read as far as the decision (to its end when
        the message is to be assembled)."""
        sdk = self.connection.sdk()
        retries = self.connection.sdk_retries(state)
        try:
            with self.connection.stream(request, retries, max(state.remaining(), 0.001)) as resp:
                return self._read(resp, context, assembly)
        except sdk.APIStatusError as exc:
            # the SDK was given one retry when the endpoint had not answered yet: a status it
            # retries (429, 5xx) is an answer, so the run goes on with the retries it is due
            cold = retries < self.connection.sdk_retries(state)
            return self._refused(exc, state), cold and _retried_status(exc.status_code)
        except sdk.APITimeoutError as exc:
            if type(exc.__cause__).__name__ == "ConnectTimeout":  # no connection was made
                return self._unreachable(exc), self.connection.answered.is_set()
            message = f"timed out after {self.timeout:g}s (--trigger-timeout), retries included"
            return RunOutcome("error", error=message), False
        except sdk.APIConnectionError as exc:
            # a refused connection or a failed name lookup, after the SDK's own retries; not
            # tried again here unless the endpoint has answered before (a passing blip)
            return self._unreachable(exc), self.connection.answered.is_set()

    def _refused(self, exc: APIStatusError, state: RunState) -> RunOutcome:
        """An error status, after the SDK's own retries (with back-off, honouring
        retry-after). Bad credentials, no access or an unknown model stop the session."""
        sdk = self.connection.sdk()
        fatal = isinstance(
            exc, (sdk.AuthenticationError, sdk.PermissionDeniedError, sdk.NotFoundError)
        )
        message = describe_error(exc)
        hint = did_you_mean(state.model) if isinstance(exc, sdk.NotFoundError) else ""
        if hint:
            message += f"; {hint}"
        if not fatal and state.gave_up_waiting is not None:
            message += (
                f" (not retried: the server asked to wait {state.gave_up_waiting:g}s, "
                "past the run's --trigger-timeout)"
            )
        return RunOutcome("error", error=message, request_id=exc.request_id, fatal=fatal)

    def _read(
        self, response: Any, context: TriggerContext, assembly: MessageAssembly | None = None
    ) -> Attempt:
        """Read the stream as far as the decision (see :class:`EventReader`), and to its end
        into ``assembly`` when one is given."""
        request_id = response.headers.get("request-id")
        reader = EventReader(response.iter_bytes(), assembly)
        try:
            decision = reader.decide()
            if assembly is not None:
                reader.finish()
            elif decision.tool_input is not None or decision.chosen == "text":
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
            decision.chosen, context, usage=reader.usage, request_id=request_id
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

    def ask(self, prompt: str, model: str | None = None) -> Answer:
        """One plain request (the optimizer's proposals) on the same client and pool, paced
        as runs are, with a longer timeout: a proposal is a few hundred words, not one tool
        call. The requests sent are counted (the SDK's retries included)."""
        model = model or self.model
        timeout = max(self.timeout, ASK_TIMEOUT)
        need = Need(model, len(prompt.encode("utf-8")) // 3 + 1, ASK_OUTPUT_TOKENS)
        state = RunState(time.monotonic() + timeout, model=model)
        # the request hook counts its attempts, the SDK's retries included
        with self.connection.running(state):
            for refusals in range(RATE_LIMIT_RETRIES + 1):
                try:
                    message = self._ask_once(prompt, need, state)
                    break
                except self.connection.sdk().RateLimitError as exc:
                    if not self.limiter.enabled or refusals == RATE_LIMIT_RETRIES:
                        raise _failed(exc, state) from None
                except self.connection.sdk().APIError as exc:
                    raise _failed(exc, state) from None
        text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        usage = Usage.from_dict(message.usage.model_dump())
        return Answer(text, usage, state.sent, state.waited, state.refused)

    def _ask_once(self, prompt: str, need: Need, state: RunState) -> Any:
        with self._paced(need, state) as paced:
            message = self.connection.client().messages.create(
                model=need.model,
                max_tokens=ASK_MAX_TOKENS,
                messages=[{"role": "user", "content": prompt}],
                timeout=max(state.remaining(), 0.001),
            )
            paced.usage = Usage.from_dict(message.usage.model_dump())
        return message

    def close(self) -> None:
        """Stop retrying and close the pool (and the capturing CLI's workspace)."""
        if self.captures is not None:
            self.captures.close()
        for hooks in self._hooks.values():
            hooks.close()
        self.connection.close()


def _failed(exc: Exception, state: RunState) -> AskError:
    """A question that failed, with what it cost all the same: its requests, its waits and
    its 429s."""
    return AskError(redact(str(exc)), state.sent, state.waited, state.refused)
