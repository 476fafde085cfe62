"""Live runs: each run one request to the backend, on a pool of daemon threads.

Before a run its estimated cost is reserved against the budget; a run the budget refuses is
not made, and its sampling is skipped. After a fatal error (bad credentials, an unknown
model) no further call is made: every run asked for after it is that error.
"""

from __future__ import annotations

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.run_sources import RunJob, Stop
from pytest_skilltrigger.engine.thread_pool import DaemonPool
from pytest_skilltrigger.model.outcome import RunOutcome
from pytest_skilltrigger.model.prices import Calls


class LiveRuns:
    """Runs of one lane's backend, at most ``concurrency.limit`` in flight."""

    def __init__(
        self,
        backend: TriggerBackend,
        concurrency: Concurrency,
        guard: CostGuard | None,
        stop: Stop,
    ) -> None:
        self.backend = backend
        self.concurrency = concurrency
        self.guard = guard
        self.stop = stop
        self._pool = DaemonPool(concurrency.most)

    def request(self, job: RunJob, runs: int) -> None:
        for _ in range(runs):
            self._pool.submit(self._run, job)

    def _run(self, job: RunJob) -> None:
        if self.stop.reason:
            job.take(self.stop.error())
            return
        reserved = self._fund(job)
        if reserved is None:
            job.drop(budget_reached(self.guard.budget_usd if self.guard else None))
            return
        with self.concurrency.slot():
            try:
                outcome = self.backend.run(job.context, job.query)
            except Exception as exc:  # a backend bug must not hang the item
                outcome = RunOutcome("error", error=f"{type(exc).__name__}: {exc}")
        if self.guard is not None:
            self.guard.settle(reserved, Calls.of(outcome, job.plan.phase))
        if outcome.fatal:
            self.stop.set(outcome.error or "fatal backend error")
        job.take(outcome)

    def _fund(self, job: RunJob) -> float | None:
        """The budget this run holds until it settles (its estimated cost, 0 without a
        budget), or None when it is refused (or its sampling is skipped already)."""
        if self.guard is None:
            return 0.0
        if job.skipped:
            return None
        return self.guard.reserve_runs(
            lambda: self.backend.estimate(job.context, job.query), model=self.backend.model
        )

    def close(self, wait: bool = True) -> None:
        """Stop the threads; without ``wait`` the runs queued are dropped (Ctrl-C)."""
        self._pool.shutdown(wait=wait)
