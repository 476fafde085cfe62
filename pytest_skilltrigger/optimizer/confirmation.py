"""Measuring a winner again before it may replace the start.

Picking the best of several candidates by a handful of test queries overstates the winner:
with a few runs per query, borderline queries flip by chance, and the candidate that got the
lucky flips wins. So the start and the winner are measured again on fresh runs of the queries
that chose the winner (stored runs are not reused), with the folder's queries when the skill
has siblings: the winner may replace the start only when its lead holds and the folder does
not lose more than the skill gains.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_skilltrigger.model.outcome import QueryResult, format_score, passed

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.optimizer.rounds import Optimization


@dataclass
class Confirmation:
    """The start and the winner measured again on fresh runs of the queries that chose the
    winner (test, or train when there is no test set)."""

    best_iteration: int
    on: str  # "test" | "train"
    start: list[QueryResult]
    best: list[QueryResult]
    # the folder's queries on the same side (none for a skill alone in its folder)
    start_cross: list[QueryResult] = field(default_factory=list)
    best_cross: list[QueryResult] = field(default_factory=list)

    def _all(self) -> list[QueryResult]:
        return self.folder_start + self.folder_best

    @property
    def folder_start(self) -> list[QueryResult]:
        """The start's results on the skill's own queries and the folder's."""
        return self.start + self.start_cross

    @property
    def folder_best(self) -> list[QueryResult]:
        """The winner's results on the skill's own queries and the folder's."""
        return self.best + self.best_cross

    @property
    def complete(self) -> bool:
        return all(r.passed is not None for r in self._all())

    @property
    def lead_holds(self) -> bool:
        """The winner's lead over the start on the skill's own queries survives."""
        return self.complete and passed(self.best) > passed(self.start)

    @property
    def folder_holds(self) -> bool:
        """The folder does not lose more than the skill gains: counted over the skill's own
        queries and its siblings' (and the routing set's), the winner passes at least as
        many as the start."""
        return passed(self.folder_best) >= passed(self.folder_start)

    @property
    def holds(self) -> bool:
        """The winner may replace the start: its lead holds and the folder does not lose."""
        return self.lead_holds and self.folder_holds

    @property
    def missing(self) -> int:
        """Queries of the re-measurement without a verdict (errored or skipped)."""
        return sum(1 for r in self._all() if r.passed is None)

    def verdict(self) -> str:
        """One line for people: the scores, and whether the lead holds."""
        if not self.complete:
            return (
                f"not confirmed: {self.missing} of the fresh samplings errored or were skipped"
            )
        scores = (
            f"best {format_score(self.best)}, start {format_score(self.start)}"
        )
        if not self.lead_holds:
            return f"{scores}: the lead does not hold"
        if not self.folder_holds:
            return (
                f"{scores}: the lead holds, but it takes more of its siblings' queries than it "
                f"gains (folder {format_score(self.folder_start)} -> "
                f"{format_score(self.folder_best)})"
            )
        if self.start_cross:
            folder = format_score(self.folder_best)
            return f"{scores}: the lead holds, and the folder does not lose (folder {folder})"
        return f"{scores}: the lead holds"


def confirm(session: TriggerSession, run: Optimization) -> Confirmation:
    """Measure the start and the best again, on fresh runs, on the set that chose the best."""
    on = "test" if run.test_entries else "train"
    own = run.test_entries or run.train_entries
    cross = [c.entry for c in (run.folder.test if run.test_entries else run.folder.train)]
    entries = own + cross
    start, best = run.evaluated()[0], run.best()
    plan = replace(session.plan, fresh=True, phase="confirmation")

    def submit(description: str) -> list[Future[QueryResult]]:
        context = run.target.context(description)
        return [session.submit(context, e, plan) for e in entries]

    # with --trigger-batch both measurements go in the same batches
    session.run_batches(
        [(run.target.context(d), e, plan) for d in (start.description, best.description)
         for e in entries]
    )  # fmt: skip
    start_futures, best_futures = submit(start.description), submit(best.description)
    start_all = [f.result() for f in start_futures]
    best_all = [f.result() for f in best_futures]
    n = len(own)
    return Confirmation(best.iteration, on, start_all[:n], best_all[:n], start_all[n:],
                        best_all[n:])  # fmt: skip
