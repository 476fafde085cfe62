"""The improvement rounds of one skill, typed: each iteration's description and results, and
the choice of the best among them.

The loop (:mod:`.loop`) fills these; the reports read them as they are, and only the JSON
writer (:mod:`pytest_skilltrigger.reports.json_report`) turns them into the reference
scripts' format.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_skilltrigger.model.outcome import QueryResult, Usage, passed
from pytest_skilltrigger.optimizer.confirmation import Confirmation
from pytest_skilltrigger.optimizer.folder import Folder
from pytest_skilltrigger.optimizer.proposer import Proposal
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry


@dataclass
class Iteration:
    """One round: a description, its train and test results, and how it was proposed."""

    iteration: int
    description: str
    status: str  # "evaluated" | "invalid" | "interrupted"
    train: list[QueryResult] = field(default_factory=list)
    test: list[QueryResult] = field(default_factory=list)
    proposal: Proposal | None = None
    elapsed: float = 0.0
    usage: Usage = field(default_factory=Usage)
    # the folder's queries (see optimizer.folder), on the train and test sides
    cross_train: list[QueryResult] = field(default_factory=list)
    cross_test: list[QueryResult] = field(default_factory=list)

    @property
    def evaluated(self) -> bool:
        return self.status == "evaluated"

    @property
    def note(self) -> str | None:
        """Why the proposal of this round was dropped or failed, if it was."""
        if self.proposal is not None and self.proposal.error:
            return "proposal failed: " + self.proposal.error
        if self.proposal is not None and self.proposal.problems:
            return "proposal dropped: " + "; ".join(self.proposal.problems)
        return None


@dataclass
class Optimization:
    """The whole run for one skill (the JSON writer gives it the reference keys)."""

    target: Target
    holdout: float
    train_entries: list[EvalEntry]
    test_entries: list[EvalEntry]
    iterations: list[Iteration] = field(default_factory=list)
    exit_reason: str = ""
    interrupted: bool = False
    confirmation: Confirmation | None = None
    folder: Folder = field(default_factory=Folder)
    # siblings listed with the new descriptions they won earlier in this session
    relisted: tuple[str, ...] = ()

    def evaluated(self) -> list[Iteration]:
        return [it for it in self.iterations if it.evaluated]

    @property
    def start(self) -> Iteration | None:
        """The starting description's iteration, once evaluated."""
        evaluated = self.evaluated()
        return evaluated[0] if evaluated else None

    def best_for_proposing(self) -> Iteration:
        """Most train passes; ties go to the newer iteration."""
        return max(self.evaluated(), key=lambda it: (passed(it.train), it.iteration))

    def best(self) -> Iteration:
        """Most test passes, then most passes of the folder's test queries, then most train
        passes, then the earlier iteration; among the candidates that do not lose the folder
        more than they gain (:meth:`folder_loses`) and, where any is, those measured whole:
        a candidate with an errored query has no sound score, and as the best it would keep
        a sound winner from being written (:attr:`beats_start` refuses it)."""
        evaluated = self.evaluated()
        eligible = [it for it in evaluated if not self.folder_loses(it)] or evaluated
        eligible = [it for it in eligible if not self.incomplete(it)] or eligible
        return max(
            eligible,
            key=lambda it: (passed(it.test), passed(self._folder_side(it)), passed(it.train),
                            -it.iteration),
        )  # fmt: skip

    def _folder_side(self, it: Iteration) -> list[QueryResult]:
        """The queries a candidate is accepted on, its own and the folder's: the test side,
        or train when there is no test set."""
        if self.test_entries:
            return it.test + it.cross_test
        return it.train + it.cross_train

    def folder_loses(self, it: Iteration) -> bool:
        """True when, counted over its own queries and its siblings' (on the side that
        decides), the candidate passes fewer than the start: what it gains it takes from its
        siblings and more. Such a candidate is never the best. Not judged when either has a
        query without a verdict: an error is never a miss (nor is such a candidate written)."""
        start = self.start
        if not self.folder or start is None or self.incomplete(it) or self.incomplete(start):
            return False
        return passed(self._folder_side(it)) < passed(self._folder_side(start))

    def refused_for_folder(self) -> list[int]:
        """Candidates that would have been the best on the skill's own queries but lose the
        folder (:meth:`folder_loses`)."""
        if not self.evaluated():
            return []
        best = self.best()
        own = self._own_side
        return [
            it.iteration
            for it in self.evaluated()
            if self.folder_loses(it) and passed(own(it)) > passed(own(best))
        ]

    def _own_side(self, it: Iteration) -> list[QueryResult]:
        return it.test if self.test_entries else it.train

    @property
    def improved(self) -> bool:
        """True when the best beats the start on test (on train when there is no test set),
        and its lead held when both were measured again on fresh runs."""
        return (
            self.beats_start
            and self.confirmation is not None
            and self.confirmation.best_iteration == self.best().iteration
            and self.confirmation.holds
        )

    @property
    def beats_start(self) -> bool:
        """True when the selection itself says the best beats the start (before re-checking)."""
        evaluated = self.evaluated()
        if not evaluated or self.interrupted:
            return False
        start, best = evaluated[0], self.best()
        if self.incomplete(start) or self.incomplete(best):
            return False  # an outage must never be what makes a description look better
        if self.test_entries:
            return passed(best.test) > passed(start.test)
        return passed(best.train) > passed(start.train)

    @staticmethod
    def incomplete(it: Iteration) -> bool:
        """True when a query of this iteration, its own or the folder's, errored or was
        skipped (no verdict): an outage must not decide for or against a candidate."""
        return any(
            r.passed is None for r in it.train + it.test + it.cross_train + it.cross_test
        )
