"""The one small interface every trigger backend implements.

A backend asks the model once whether it would use the skill for a query and reports a
:class:`~pytest_skilltrigger.model.outcome.RunOutcome`: triggered, not triggered (with what it
chose instead) or error. Sampling, concurrency, the store and verdicts live elsewhere, so a backend
stays a thin adapter that is easy to add and to test.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import TOKEN_KEYS, RunOutcome, Usage

# The longest answer ``ask`` lets the model give (a few proposed descriptions fit well within
# it); the budget holds it for every question before it is sent.
ASK_MAX_TOKENS = 4096


@runtime_checkable
class TriggerBackend(Protocol):
    """``run`` must be thread-safe: the sampler calls it from many threads at once."""

    name: str
    model: str

    def context_key(self, context: TriggerContext) -> str:
        """Hash of the full request context (listing, competitors, prompt, model)."""
        ...

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        """The usage one request of a run is expected to have, known before it is sent: err
        on the high side. (A run judged within the turn may send more; the engine reserves
        for them, see :func:`turn_estimate`.)"""
        ...

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """Ask once; never raise for API or process failures: return an error outcome."""
        ...

    def ask(self, prompt: str, model: str | None = None) -> Answer:
        """Ask a plain question (the optimizer's proposals). Raises
        :class:`~pytest_skilltrigger.support.errors.AskError` on failure, carrying the
        requests sent all the same."""
        ...

    def close(self) -> None:
        """Release connections, processes and temporary folders."""
        ...


@runtime_checkable
class ProcessBackend(TriggerBackend, Protocol):
    """A backend whose runs are processes on this machine (the Claude Code CLI): the
    session holds all its lanes' runs in flight to one limit, moved by what the machine can
    take, and ``process_peak`` is the most memory one of its processes has held so far."""

    @property
    def process_peak(self) -> int | None: ...


@dataclass(frozen=True)
class Answer:
    """A plain question's answer: its text and usage, the requests sent (retries included),
    the seconds it waited for the rate limit, and the 429s it met."""

    text: str
    usage: Usage
    requests: int = 1
    waited: float = 0.0
    rate_limited: int = 0


class BackendUnavailable(Exception):
    """No backend can run here (no credentials, no CLI); items skip with this reason."""


@dataclass(frozen=True)
class BatchStatus:
    """One poll of a message batch: its request counts, and whether it has ended."""

    batch_id: str
    ended: bool
    processing: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    canceled: int = 0


@dataclass(frozen=True)
class BatchRequest:
    """One run in a batch. ``capped``: with ``max_tokens`` cut to what a decision needs (a
    request whose answer reached that cap is sent again with the live request's own)."""

    custom_id: str
    context: TriggerContext
    query: str
    capped: bool = True


@dataclass(frozen=True)
class BatchAnswer:
    """One request's result in a batch. ``retry``: worth sending again in the next wave (a
    transient error, an expired request, an answer cut at the cap before a decision, which
    ``capped`` marks)."""

    custom_id: str
    outcome: RunOutcome
    retry: bool = False
    capped: bool = False


class BatchError(Exception):
    """A batch could not be created, polled or read; ``fatal`` when no further call can
    succeed (bad credentials, unknown model)."""

    def __init__(
        self,
        message: str,
        *,
        fatal: bool = False,
        rejected: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.rejected = rejected  # the API answered that it did not take it: safe to resend
        self.retry_after = retry_after  # how long the API asked to wait before sending again


class BatchClient(Protocol):
    """Message batches of trigger runs, offered by a backend that has them (the API's
    ``batches()``). One request is one run: a context and a query."""

    def create(self, requests: Sequence[BatchRequest]) -> list[str]:
        """Submit the requests; the ids of the batches made (requests whose contexts need
        different headers, or too many for one batch, go in separate batches). Raises
        :class:`BatchError`, having cancelled any batch it made."""
        ...

    def status(self, batch_id: str) -> BatchStatus:
        """One poll; raises :class:`BatchError`."""
        ...

    def results(self, batch_id: str, contexts: dict[str, TriggerContext]) -> Iterator[BatchAnswer]:
        """The ended batch's answers, decided by the first-choice rule; ``contexts`` maps
        each custom id to the context whose skill's trigger it tests. Raises
        :class:`BatchError`."""
        ...

    def cancel(self, batch_id: str) -> None:
        """Ask for the batch to stop; what it processed before stays readable."""
        ...


@runtime_checkable
class BatchingBackend(TriggerBackend, Protocol):
    """A backend that can also make its trigger runs as message batches (the API's)."""

    def batches(self) -> BatchClient:
        """The batch client on this backend's own connection and credentials."""
        ...


def turn_estimate(usage: Usage, context: TriggerContext) -> Usage:
    """What a run may cost at most: in a turn (``--trigger-within=turn``), a request for
    every read-only call the bound allows and one for the choice, each at least the first's
    size. The budget reserves it, so that a turn's follow-ups never take a session past it."""
    if context.within is None:
        return usage
    requests = context.within.most_requests
    return Usage(*(getattr(usage, key) * requests for key in TOKEN_KEYS))
