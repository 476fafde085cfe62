"""Where a sampling's runs come from: live streams or message batches, behind one interface.

The sampler decides how many runs a query needs next (the verdict rule's waves) and asks a
:class:`RunSource` for them; it never knows which source it has. :class:`.live.LiveRuns` makes
each run as a live request on a pool of threads; :class:`.batches.BatchRuns` gathers the runs
asked for into waves of message batches. Both count every call against the cost guard and
hand each run back to the sampling that asked for it.
"""

from __future__ import annotations

import threading
from typing import Protocol

from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome
from pytest_skilltrigger.model.plan import SamplingPlan


class RunJob(Protocol):
    """A sampling as a run source sees it: what to ask, and where its runs go.

    Every run asked for ends exactly once, with :meth:`take` (a run, or a failed one) or
    :meth:`drop` (not made).
    """

    context: TriggerContext
    query: str
    context_key: str  # what new runs are stored under
    plan: SamplingPlan

    @property
    def runs_made(self) -> int:
        """The runs it has so far (a live source serves the furthest sampling first)."""
        ...

    @property
    def skipped(self) -> str | None:
        """Why the sampling takes no further run (the budget), if it does not."""
        ...

    def take(self, outcome: RunOutcome) -> None:
        """A run was made (or failed: an error outcome)."""
        ...

    def drop(self, reason: str | None = None) -> None:
        """A run was not made: with a reason the sampling is skipped (the budget); without
        one it asks again for the runs it still needs (a batch answer worth another try)."""
        ...


class RunSource(Protocol):
    """Makes the runs samplings ask for."""

    def request(self, job: RunJob, runs: int) -> None:
        """Make ``runs`` more runs of ``job``; each ends with its ``take`` or ``drop``."""
        ...


class Stop:
    """Why a lane makes no further call (bad credentials, an unknown model, a batch deadline
    that passed), once something says so; the first reason stands."""

    def __init__(self) -> None:
        self._reason: str | None = None
        self._lock = threading.Lock()

    @property
    def reason(self) -> str | None:
        return self._reason

    def set(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    def error(self) -> RunOutcome:
        """The outcome of a run asked for after the stop: an error, and no call."""
        return RunOutcome("error", error=self._reason, fatal=True, requests=0)
