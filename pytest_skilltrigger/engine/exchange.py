"""What crosses between the processes of one session (pytest-xdist), on the engine's side.

The controller takes in each result a worker sampled: its calls count against the one budget
and its new runs are stored there, by the one process that writes the store. With message
batches the controller makes the runs ahead and the workers take them over, with their part
of what they cost. Only the pytest layer's roles use this; a session in one process never
needs it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from pytest_skilltrigger.backends.api.rate_limit import FileLimits, RateLimitNotice, limits_known
from pytest_skilltrigger.engine.sampler import RunsAhead
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.prices import Calls

LIMITS_EVERY = 1.0  # seconds between reads of the workers' shared limits


class SessionExchange:
    """One session's side of the exchange between its processes."""

    def __init__(self, session: TriggerSession) -> None:
        self.session = session
        self._announced: set[str] = set()  # the model classes whose limits were said
        self._limits_read = -LIMITS_EVERY  # when the shared limits were last read
        self._told_spent_usd = 0.0  # what the workers were told at their start was spent

    def spent_before_workers(self) -> float:
        """What the session spent before its workers start (the controls, drafts), which
        their shares of the budget leave out; remembered, so the runs made ahead later
        charge them only what came after."""
        self._told_spent_usd = self.session.guard.spent_usd
        return self._told_spent_usd

    def new_limits(self, path: str, at_end: bool = False) -> list[RateLimitNotice]:
        """The rate limits the workers learnt since last asked (they have no terminal), a
        notice each, read from the file they share: at most every :data:`LIMITS_EVERY`
        seconds (asked at every worker's result, and the workers pace under its lock)."""
        now = time.monotonic()
        if now - self._limits_read < LIMITS_EVERY and not at_end:
            return []
        self._limits_read = now
        notices = []
        for cls, limits in limits_known(FileLimits(path)).items():
            if cls not in self._announced:
                self._announced.add(cls)
                notices.append(RateLimitNotice(cls, limits))
        return notices

    def take_worker_result(
        self, context_key: str | None, result: QueryResult, phase: str = "items"
    ) -> None:
        """Take in a result sampled by a worker: its calls count against the session's one
        budget, and its new runs are stored here. A result that joined another caller's
        sampling brings nothing new (that caller's result does); nor do its batch runs,
        counted and stored where the batches were read."""
        if result.shared:
            return
        guard = self.session.guard
        for outcome in result.outcomes:
            if not (outcome.from_store or outcome.batch):  # a batch is counted where run
                guard.add(Calls.of(outcome, phase))
        if context_key and not result.skipped:
            self.session.record(context_key, result.query, result.outcomes, result.sampling)

    def export_runs_ahead(self, made: Sequence[RunsAhead]) -> dict[str, Any]:
        """The runs made ahead here, for the processes that run the items, as JSON values:
        the runs, and what they cost against the budget."""
        return {
            # the workers' shares already left out what they were told at their start
            "spent_usd": self.session.guard.spent_usd - self._told_spent_usd,
            "runs": [item.to_dict() for item in made],
        }

    def import_runs_ahead(self, exported: dict[str, Any], workers: int) -> None:
        """Take the controller's runs made ahead (:meth:`export_runs_ahead`): they resolve the
        items without a call, and this worker's part of what they cost comes off its budget."""
        for item in map(RunsAhead.from_dict, exported["runs"]):
            self.take_runs_ahead(item)
        self.session.guard.charge(float(exported["spent_usd"]) / max(1, workers))

    def take_runs_ahead(self, made: RunsAhead) -> None:
        """Runs made ahead by the controller, to their model's lane only."""
        if self.session.lanes is not None:
            sampler = self.session.lanes.of_model(made.model).sampler
            sampler.take_ahead(made.sampling_key, made.outcomes, made.skipped)
