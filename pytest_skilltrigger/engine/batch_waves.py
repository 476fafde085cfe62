"""Sampling many queries through message batches, in the waves exact early stopping plans.

``--trigger-batch`` sends the runs a session needs as Message Batches instead of live streams:
half the price, and no local limit on how many are in flight. The first wave of every query
goes in one batch; once it has ended, the next wave holds only the runs of queries still
undecided (:meth:`~pytest_skilltrigger.model.plan.SamplingPlan.next_runs`, the rule live sampling
follows), until every verdict is decided. So a batch run makes exactly the runs a live run
with the same outcomes would, and gives the same verdicts.

A request that errored or expired is an error for its query, never a miss; it is sent again
in the next wave, at most :data:`RETRIES` times. So is an answer cut at the batch request's
``max_tokens`` before a decision, then with the live request's own ``max_tokens``, and read
as a live stream would be. ``timeout`` is one deadline for every wave the runner sends,
counted from its first batch (a session keeps one runner, so the improvement rounds do not
each start their own wait): a wait past it cancels the batch, keeps what was processed before
the cancel, and leaves the other queries with errors. Ctrl-C cancels every batch in flight.

The runs a wave returned are handed to ``record`` as soon as they are read, not when every
wave is over: they are paid, so an interrupt in a later wave must not lose them, and the one
process that made the batches is the one place they are stored (xdist workers that resolve
items from them store nothing).

Nothing here knows pytest: the caller gets the runs as :class:`BatchedRuns` values to hand to
the sampler (and, under xdist, to the workers as JSON), and progress as
:class:`BatchProgress` values to show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_skilltrigger.backends.base import BatchAnswer, BatchClient, BatchError, BatchRequest
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.sampler import Recorder
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.plan import QueryIdent, SamplingPlan

RETRIES = 2  # further waves a query's failed batch request is sent in
MAX_POLL = 60.0  # the longest pause between two polls of a batch
PROGRESS_EVERY = 5.0  # at most one progress line per batch in this many seconds
RESULT_READS = 3  # tries at reading an ended batch's results (free) before its runs error
CANCEL_GRACE = 30.0  # after a cancel at the timeout, how long to wait for what was processed


@dataclass(frozen=True)
class BatchProgress:
    """One poll of one batch, for a person waiting on it."""

    batch_id: str
    wave: int
    succeeded: int
    processing: int
    errored: int  # errored, expired and canceled requests
    elapsed: float
    ended: bool
    model: str | None = None  # a matrix's model (its batches run beside the others')

    def line(self) -> str:
        minutes, seconds = divmod(int(self.elapsed), 60)
        state = "ended" if self.ended else "in progress"
        on = f" on {self.model}" if self.model else ""
        return (
            f"batch {self.batch_id}{on} (wave {self.wave}, {state}): {self.succeeded} succeeded, "
            f"{self.processing} processing, {self.errored} errored, {minutes}m{seconds:02d}s"
        )


@dataclass
class BatchedRuns:
    """The runs made (and the stored runs built on) for one sampling, ready for the sampler;
    crosses to xdist workers as JSON. ``skipped`` says why no (further) run could be made
    (the budget): the sampling is then skipped without a call."""

    ident: QueryIdent
    outcomes: list[RunOutcome]
    skipped: str | None = None
    model: str | None = None  # the lane (model of a matrix) whose sampling it is

    def to_dict(self) -> dict[str, Any]:
        return {
            "ident": list(self.ident),
            "outcomes": [o.to_dict() for o in self.outcomes],
            "skipped": self.skipped,
            "model": self.model,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BatchedRuns:
        key, query, plan = data["ident"]
        ident = (str(key), str(query), _tuples(plan))
        outcomes = [RunOutcome.from_dict(o) for o in data["outcomes"]]
        return cls(ident, outcomes, data.get("skipped"), data.get("model"))


@dataclass
class BatchWork:
    """One query to decide: its context, plan and runs so far (stored runs first)."""

    ident: QueryIdent
    context: TriggerContext
    query: str
    plan: SamplingPlan
    outcomes: list[RunOutcome] = field(default_factory=list)
    retries: int = RETRIES
    skipped: str | None = None  # why no further request was sent (the budget)
    failed: bool = False  # a request of the current wave is to be sent again
    uncapped: bool = False  # an answer reached the cap: send the live max_tokens from now on
    # what answers dropped for a retry used: paid, so carried onto the next run kept
    carried: Usage = field(default_factory=Usage)
    carried_requests: int = 0
    recorded: int = 0  # how many of ``outcomes`` the recorder has been given

    def wave(self) -> int:
        return 0 if self.skipped else self.plan.next_runs(self.outcomes)

    def keep(self, outcome: RunOutcome) -> None:
        """Add a run, with what the dropped answers before it used."""
        self.outcomes.append(
            replace(
                outcome,
                usage=outcome.usage + self.carried,
                requests=outcome.requests + self.carried_requests,
            )
        )
        self.carried, self.carried_requests = Usage(), 0


class BatchRunner:
    """Runs waves of batches until every work is decided, failed or out of budget.

    ``estimate`` gives a run's expected usage (the budget reserves its batch-rate cost before
    a request is sent); ``progress`` is told every poll worth showing; ``record`` is told the
    new runs of every work whose plan is not fresh, as soon as a wave has read them (a fresh
    measurement is never stored, as in the sampler). One runner may :meth:`run` many times
    (the items, then each improvement round): ``timeout`` counts from its first batch.
    """

    def __init__(
        self,
        client: BatchClient,
        *,
        guard: CostGuard | None,
        estimate: Callable[[TriggerContext, str], Usage],
        poll: float,
        timeout: float,
        progress: Callable[[BatchProgress], None] | None = None,
        record: Recorder | None = None,
        model: str | None = None,
    ) -> None:
        self.client = client
        self.guard = guard
        self.model = model  # whose prices the budget reserves at
        self.estimate = estimate
        self.poll = poll
        self.timeout = timeout
        self.progress = progress
        self.record = record
        self.fatal: str | None = None
        self._started = 0.0  # this run's start (the elapsed time progress shows)
        self._first: float | None = None  # when the first batch was sent (the deadline's start)
        # set from another thread, it stops the runner as Ctrl-C would: at its next pause the
        # batches in flight are cancelled, what was read is recorded, and run() raises
        # KeyboardInterrupt (cleared by whoever starts a run)
        self.stopping = threading.Event()

    def run(self, works: Sequence[BatchWork]) -> None:
        """Decide every work (its ``outcomes`` grow); KeyboardInterrupt (or ``stopping``)
        cancels what is in flight and propagates, once the runs already read are recorded."""
        self._started = time.monotonic()
        wave = 0
        while not self.fatal:
            todo = [(work, n) for work in works if (n := work.wave()) > 0]
            if not todo:
                return
            wave += 1
            self._wave(wave, todo)

    @property
    def expired(self) -> bool:
        """True once the session's batch deadline has passed: no wave will be sent again."""
        return self._first is not None and self._left() <= 0

    def _left(self) -> float:
        """Seconds until the deadline (the whole timeout before any batch was sent)."""
        if self._first is None:
            return self.timeout
        return self.timeout - (time.monotonic() - self._first)

    def timeout_reason(self) -> str:
        return (
            f"no batch result within {self.timeout:.0f}s of the session's first batch "
            "(--trigger-batch-timeout)"
        )

    def _wave(self, wave: int, todo: list[tuple[BatchWork, int]]) -> None:
        if self.stopping.is_set():  # before anything is reserved against the budget
            raise KeyboardInterrupt
        requests: list[BatchRequest] = []
        owners: dict[str, tuple[BatchWork, float]] = {}
        for number, (work, runs) in enumerate(todo):
            reserved = self._reserve(work, runs)
            if reserved is None:
                work.skipped = budget_reached(self.guard.budget_usd if self.guard else None)
                continue
            for run in range(runs):
                custom_id = f"w{wave}-q{number}-r{run}"
                requests.append(
                    BatchRequest(custom_id, work.context, work.query, capped=not work.uncapped)
                )
                owners[custom_id] = (work, reserved / runs)
        if not requests:
            return
        if self._left() <= 0:
            self._fail(owners, self.timeout_reason())
            return
        ids: list[str] = []
        answered: set[str] = set()
        failure: tuple[str, bool] | None = None  # why the wave failed, and whether fatally
        try:
            if self._first is None:
                self._first = time.monotonic()
            ids = self.client.create(requests)
            for batch_id in ids:
                self._collect(batch_id, wave, owners, answered)
        except KeyboardInterrupt:
            self._record(todo)  # first, what was read is paid: a rerun reuses it
            self._cancel(ids)
            raise
        except Exception as exc:  # a BatchError, or anything the SDK let through
            failure = (f"the batch failed: {exc}", isinstance(exc, BatchError) and exc.fatal)
            self._cancel(ids)
        self._record(todo)
        for work, _runs in todo:
            if work.failed:  # one retry spent per wave, however many of its requests failed
                work.retries -= 1
                work.failed = False
        missing = {c: o for c, o in owners.items() if c not in answered}
        if missing:
            if failure is None:
                timed_out = self._left() <= 0
                reason = "the batch gave no result for this request"
                failure = (self.timeout_reason() if timed_out else reason, False)
            self._fail(missing, *failure)

    def _collect(
        self,
        batch_id: str,
        wave: int,
        owners: dict[str, tuple[BatchWork, float]],
        answered: set[str],
    ) -> None:
        """Take the batch's answers once it has ended. At the timeout it is cancelled, and
        what it processed before the cancel is still read (it is paid); the rest has none.
        Reading the results is free: a read that fails midway is started again, skipping
        what was taken."""
        timed_out = not self._wait(batch_id, wave)
        if timed_out:
            self._cancel([batch_id])
            if not self._wait(batch_id, wave, grace=True):
                return
        skills = {c: work.context.skill_name for c, (work, _r) in owners.items()}
        for attempt in range(RESULT_READS):
            try:
                for answer in self.client.results(batch_id, skills):
                    if answer.custom_id in answered:
                        continue
                    if timed_out and answer.outcome.requests == 0:
                        continue  # canceled: the timeout's error, said as such
                    answered.add(answer.custom_id)
                    self._take(owners[answer.custom_id], answer)
                return
            except BatchError as exc:
                if exc.fatal or attempt == RESULT_READS - 1:
                    raise
                time.sleep(self.poll)

    def _wait(self, batch_id: str, wave: int, grace: bool = False) -> bool:
        """Poll with back-off until the batch ends (True), or until the timeout (or, after a
        cancel, the grace period) passes (False). A poll that fails is tried again at the
        next pause: one failed request must not cancel hours of work."""
        pause, shown = self.poll, float("-inf")
        until = time.monotonic() + (CANCEL_GRACE if grace else max(self._left(), 0.0))
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            if self.stopping.wait(min(pause, left)):
                raise KeyboardInterrupt
            pause = max(self.poll, min(pause * 2, MAX_POLL))
            try:
                status = self.client.status(batch_id)
            except BatchError as exc:
                if exc.fatal:
                    raise
                continue
            now = time.monotonic()
            if self.progress is not None and (status.ended or now - shown >= PROGRESS_EVERY):
                shown = now
                self.progress(
                    BatchProgress(
                        batch_id,
                        wave,
                        status.succeeded,
                        status.processing,
                        status.errored + status.expired + status.canceled,
                        now - self._started,
                        status.ended,
                    )
                )
            if status.ended:
                return True

    def _record(self, todo: Sequence[tuple[BatchWork, int]]) -> None:
        """Hand the runs this wave added to the recorder, each once (errors and stored runs
        included: the store keeps only new successful runs); never a fresh plan's."""
        for work, _runs in todo:
            new = work.outcomes[work.recorded :]
            if self.record is not None and new and not work.plan.fresh:
                self.record(work.ident[0], work.query, new)
            work.recorded += len(new)

    def _reserve(self, work: BatchWork, runs: int) -> float | None:
        """The budget reservation for a wave's runs of a work, at the batch rate (None:
        refused, and the query is skipped; its runs so far are stored all the same)."""
        if self.guard is None:
            return 0.0
        return self.guard.reserve_runs(
            lambda: self.estimate(work.context, work.query), runs, batch=True, model=self.model
        )

    def _take(self, owner: tuple[BatchWork, float], answer: BatchAnswer) -> None:
        """Count one answer (every request the API processed is paid, at the batch rate) and
        give it to its work. An answer worth another try is dropped while retries are left
        (what it used is carried onto the run kept); one cut at the cap is sent again with
        the live request's ``max_tokens``."""
        work, reserved = owner
        outcome = answer.outcome
        if self.guard is not None:
            self.guard.settle(
                reserved,
                outcome.usage,
                outcome.requests,
                work.plan.phase,
                outcome.model,
                batch=True,
            )
        if outcome.fatal:
            self.fatal = self.fatal or outcome.error
        if answer.capped:
            work.uncapped = True
        if answer.retry and work.retries > 0:
            work.failed = True
            work.carried = work.carried + outcome.usage
            work.carried_requests += outcome.requests
            return
        work.keep(outcome)

    def _fail(
        self, owners: dict[str, tuple[BatchWork, float]], reason: str, fatal: bool = False
    ) -> None:
        """Requests without an answer: an error for their queries (never a miss)."""
        if fatal:
            self.fatal = self.fatal or reason
        for work, reserved in owners.values():
            if self.guard is not None:
                self.guard.settle(reserved, Usage(), 0, work.plan.phase)
            if not any(o.status == "error" for o in work.outcomes):
                work.keep(RunOutcome("error", error=reason, fatal=fatal, requests=0, batch=True))

    def _cancel(self, ids: Sequence[str]) -> None:
        """Cancel batches still running (an interrupt, a timeout, a failure); a failure to
        cancel is not worth a second error."""
        for batch_id in ids:
            try:
                self.client.cancel(batch_id)
            except Exception:
                pass


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples a sampling's ident is made of (it keys dicts)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
