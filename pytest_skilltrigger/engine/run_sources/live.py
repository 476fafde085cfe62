"""Live runs: each run one request to the backend, on a pool of daemon threads.

Runs wait in a queue that serves the furthest sampling first (the one with the most runs
made): a query that needs many successive waves is the one the session ends waiting for, so
its next wave goes ahead of the first waves of queries just begun. A run takes the best
queued job once it holds a slot, so the order holds while the limit moves.

Before a run its estimated cost is reserved against the budget; a run the budget refuses is
not made, and its sampling is skipped. After a fatal error (bad credentials, an unknown
model) no further call is made: every run asked for after it is that error.
"""

from __future__ import annotations

import heapq
import itertools
import threading

from pytest_skilltrigger.backends.base import TriggerBackend, turn_estimate
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.run_sources import RunJob, Stop
from pytest_skilltrigger.engine.thread_pool import DaemonPool
from pytest_skilltrigger.model.outcome import RunOutcome
from pytest_skilltrigger.model.prices import Calls


class FurthestFirst:
    """Jobs waiting for a run, the one with the most runs made first (in the order asked
    among equals); thread-safe."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, RunJob]] = []
        self._order = itertools.count()
        self._lock = threading.Lock()

    def put(self, job: RunJob, runs: int) -> None:
        with self._lock:
            for _ in range(runs):
                heapq.heappush(self._heap, (-job.runs_made, next(self._order), job))

    def pop(self) -> RunJob:
        with self._lock:
            return heapq.heappop(self._heap)[2]


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
        self._waiting = FurthestFirst()
        self._pool = DaemonPool(concurrency.most)

    def request(self, job: RunJob, runs: int) -> None:
        self._waiting.put(job, runs)
        for _ in range(runs):  # a task per run queued: each takes the best one left
            self._pool.submit(self._next)

    def _next(self) -> None:
        if self.stop.reason:  # no call will be made: no slot to wait for
            self._waiting.pop().take(self.stop.error())
            return
        with self.concurrency.slot():
            job = self._waiting.pop()
            made = self._run(job)
        # the sampling's next wave, its store write and its callers are not the slot's
        if isinstance(made, RunOutcome):
            job.take(made)
        else:
            job.drop(made)

    def _run(self, job: RunJob) -> RunOutcome | str:
        """The run's outcome, or why it was not made (the budget)."""
        if self.stop.reason:
            return self.stop.error()
        reserved = self._fund(job)
        if reserved is None:
            return budget_reached(self.guard.budget_usd if self.guard else None)
        try:
            outcome = self.backend.run(job.context, job.query)
        except Exception as exc:  # a backend bug must not hang the item
            outcome = RunOutcome("error", error=f"{type(exc).__name__}: {exc}")
        if self.guard is not None:
            self.guard.settle(reserved, Calls.of(outcome, job.plan.phase))
        if outcome.fatal:
            self.stop.set(outcome.error or "fatal backend error")
        return outcome

    def _fund(self, job: RunJob) -> float | None:
        """The budget this run holds until it settles (its estimated cost, 0 without a
        budget), or None when it is refused (or its sampling is skipped already)."""
        if self.guard is None:
            return 0.0
        if job.skipped:
            return None
        return self.guard.reserve_runs(
            lambda: turn_estimate(self.backend.estimate(job.context, job.query), job.context),
            model=self.backend.model,
        )

    def close(self, wait: bool = True) -> None:
        """Stop the threads; without ``wait`` the runs queued are dropped (Ctrl-C)."""
        self._pool.shutdown(wait=wait)
