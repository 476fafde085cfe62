"""Sampling many queries through message batches, in the waves exact early stopping plans.

``--trigger-batch`` sends the runs a session needs as Message Batches instead of live streams:
half the price, and no local limit on how many are in flight. The first wave of every query
goes in one batch; once it has ended, the next wave holds only the runs of queries still
undecided (:func:`~pytest_skilltrigger.engine.sampler.wave_size`, the rule live sampling
follows), until every verdict is decided. So a batch run makes exactly the runs a live run
with the same outcomes would, and gives the same verdicts.

A request that errored or expired is an error for its query, never a miss; it is sent again
in the next wave, at most :data:`RETRIES` times. A wait past ``batch_timeout`` cancels the
batch and leaves its queries with errors. Ctrl-C cancels every batch in flight.

Nothing here knows pytest: the caller gets the runs as :class:`Presampled` values to hand to
the sampler (and, under xdist, to the workers as JSON), and progress as
:class:`BatchProgress` values to show.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.backends.base import BatchClient, BatchError
from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.cost import BATCH_RATE, CostGuard
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage
from pytest_skilltrigger.engine.sampler import QueryIdent, SamplingPlan, wave_size

RETRIES = 2  # further waves a query's failed batch request is sent in
MAX_POLL = 60.0  # the longest pause between two polls of a batch
PROGRESS_EVERY = 5.0  # at most one progress line per batch in this many seconds


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

    def line(self) -> str:
        minutes, seconds = divmod(int(self.elapsed), 60)
        state = "ended" if self.ended else "in progress"
        return (
            f"batch {self.batch_id} (wave {self.wave}, {state}): {self.succeeded} succeeded, "
            f"{self.processing} processing, {self.errored} errored, {minutes}m{seconds:02d}s"
        )


@dataclass
class Presampled:
    """The runs made (and the stored runs built on) for one sampling, ready for the sampler;
    crosses to xdist workers as JSON."""

    ident: QueryIdent
    outcomes: list[RunOutcome]

    def to_dict(self) -> dict[str, Any]:
        return {"ident": list(self.ident), "outcomes": [o.to_dict() for o in self.outcomes]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Presampled:
        key, query, runs, threshold, curtail, fresh = data["ident"]
        ident = (str(key), str(query), int(runs), float(threshold), bool(curtail), bool(fresh))
        return cls(ident, [RunOutcome.from_dict(o) for o in data["outcomes"]])


@dataclass
class BatchWork:
    """One query to decide: its context, plan and runs so far (stored runs first)."""

    ident: QueryIdent
    context: TriggerContext
    query: str
    plan: SamplingPlan
    outcomes: list[RunOutcome] = field(default_factory=list)
    retries: int = RETRIES
    skipped: bool = False  # the budget allowed no batch request for it
    failed: bool = False  # a request of the current wave is to be sent again

    def wave(self) -> int:
        return 0 if self.skipped else wave_size(self.outcomes, self.plan)


class BatchRunner:
    """Runs waves of batches until every work is decided, failed or out of budget.

    ``estimate`` gives a run's expected usage (the budget reserves its batch-rate cost before
    a request is sent); ``progress`` is told every poll worth showing.
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
    ) -> None:
        self.client = client
        self.guard = guard
        self.estimate = estimate
        self.poll = poll
        self.timeout = timeout
        self.progress = progress
        self.fatal: str | None = None
        self.requests = 0  # batch requests sent

    def run(self, works: Sequence[BatchWork]) -> None:
        """Decide every work (its ``outcomes`` grow); KeyboardInterrupt cancels what is in
        flight and propagates."""
        started = time.monotonic()
        wave = 0
        while not self.fatal:
            todo = [(work, n) for work in works if (n := work.wave()) > 0]
            if not todo:
                return
            wave += 1
            self._wave(wave, todo, started)

    def _wave(self, wave: int, todo: list[tuple[BatchWork, int]], started: float) -> None:
        requests: list[tuple[str, TriggerContext, str]] = []
        owners: dict[str, tuple[BatchWork, float]] = {}
        for number, (work, runs) in enumerate(todo):
            reserved = self._reserve(work, runs)
            if reserved is None:
                work.skipped = True
                continue
            for run in range(runs):
                custom_id = f"w{wave}-q{number}-r{run}"
                requests.append((custom_id, work.context, work.query))
                owners[custom_id] = (work, reserved / runs)
        if not requests:
            return
        try:
            ids = self.client.create(requests)
        except BatchError as exc:
            self._fail(owners, f"cannot create the batch: {exc}", fatal=exc.fatal)
            return
        self.requests += len(requests)
        answered: set[str] = set()
        try:
            for batch_id in ids:
                if not self._wait(batch_id, wave, started):
                    continue
                skills = {cid: owners[cid][0].context.skill_name for cid in owners}
                for answer in self.client.results(batch_id, skills):
                    answered.add(answer.custom_id)
                    self._take(owners[answer.custom_id], answer.outcome, answer.retry)
        except KeyboardInterrupt:
            self._cancel(ids)
            raise
        except BatchError as exc:
            self.fatal = self.fatal or (str(exc) if exc.fatal else None)
            self._cancel(ids)
            reason = f"the batch failed: {exc}"
            self._fail({c: o for c, o in owners.items() if c not in answered}, reason, exc.fatal)
            return
        for work, _runs in todo:
            if work.failed:  # one retry spent per wave, however many of its requests failed
                work.retries -= 1
                work.failed = False
        missing = {c: o for c, o in owners.items() if c not in answered}
        if missing:
            waited = time.monotonic() - started
            self._fail(
                missing,
                f"no batch result after waiting {waited:.0f}s (--trigger-batch-timeout)"
                if waited >= self.timeout
                else "the batch gave no result for this request",
            )

    def _reserve(self, work: BatchWork, runs: int) -> float | None:
        """The budget reservation for a work's runs at the batch rate (None: refused)."""
        if self.guard is None or self.guard.budget_usd is None:
            return 0.0
        try:
            usage = self.estimate(work.context, work.query)
        except Exception:  # the request itself will say what is wrong with it
            usage = Usage()
        cost = self.guard.estimate_usd(usage) * BATCH_RATE * runs
        return cost if self.guard.reserve(cost) else None

    def _wait(self, batch_id: str, wave: int, started: float) -> bool:
        """Poll with back-off until the batch ends (True) or the wait passes the timeout
        (the batch is cancelled: False)."""
        pause, shown = self.poll, float("-inf")
        while True:
            left = self.timeout - (time.monotonic() - started)
            if left <= 0:
                self._cancel([batch_id])
                return False
            time.sleep(min(pause, left))
            status = self.client.status(batch_id)
            now = time.monotonic()
            if self.progress is not None and (status.ended or now - shown >= PROGRESS_EVERY):
                shown = now
                self.progress(
                    BatchProgress(
                        batch_id, wave, status.succeeded, status.processing,
                        status.errored + status.expired + status.canceled, now - started,
                        status.ended,
                    )
                )  # fmt: skip
            if status.ended:
                return True
            pause = min(pause * 2, MAX_POLL)

    def _take(self, owner: tuple[BatchWork, float], outcome: RunOutcome, retry: bool) -> None:
        """Count one answer (every request the API processed is paid, at the batch rate) and
        give it to its work: an answer worth retrying is dropped while retries are left."""
        work, reserved = owner
        if self.guard is not None:
            self.guard.settle(reserved, outcome.usage, outcome.requests, work.plan.phase,
                              outcome.model, batch=True)  # fmt: skip
        if outcome.fatal:
            self.fatal = self.fatal or outcome.error
        if retry and work.retries > 0:
            work.failed = True
            return
        work.outcomes.append(outcome)

    def _fail(self, owners: dict[str, tuple[BatchWork, float]], reason: str,
              fatal: bool = False) -> None:  # fmt: skip
        """Requests without an answer: an error for their queries (never a miss)."""
        if fatal:
            self.fatal = self.fatal or reason
        for work, reserved in owners.values():
            if self.guard is not None:
                self.guard.settle(reserved, Usage(), 0, work.plan.phase)
            if not any(o.status == "error" for o in work.outcomes):
                work.outcomes.append(
                    RunOutcome("error", error=reason, fatal=fatal, requests=0, batch=True)
                )

    def _cancel(self, ids: Sequence[str]) -> None:
        """Cancel batches still running (an interrupt, a timeout); a failure to cancel is
        not worth a second error."""
        for batch_id in ids:
            try:
                self.client.cancel(batch_id)
            except BatchError:
                pass
