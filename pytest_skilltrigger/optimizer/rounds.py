"""The improvement rounds of one skill, typed: each iteration's candidates, the one that went on
to race the best so far, and the fresh race that decides whether SKILL.md is rewritten.

The loop (:mod:`.loop`) fills these as it goes; the reports read the frozen records
:mod:`.record` makes of them, never these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pytest_skilltrigger.model.outcome import QueryResult, Usage
from pytest_skilltrigger.optimizer.folder import Folder
from pytest_skilltrigger.optimizer.proposer import Proposal
from pytest_skilltrigger.optimizer.racing import Race
from pytest_skilltrigger.optimizer.scoring import Gain, Score, score
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry


@dataclass(frozen=True)
class Candidate:
    """One proposal of a round: its description and how far successive halving took it (the
    runs per query it was screened with; the round's survivor has ``survived``)."""

    description: str
    screened_runs: int = 0
    survived: bool = False


@dataclass
class Iteration:
    """One round: the description measured (the start, or the round's surviving candidate),
    its train and test results, its race against the best so far, and how it was proposed."""

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
    candidates: list[Candidate] = field(default_factory=list)
    race: Race | None = None  # against the best so far, on train
    became_best: bool = False  # the race found it better: later rounds improve from it

    @property
    def evaluated(self) -> bool:
        return self.status == "evaluated"

    @property
    def train_side(self) -> list[QueryResult]:
        """What selection compares: its own train queries and the folder's."""
        return self.train + self.cross_train

    @property
    def test_side(self) -> list[QueryResult]:
        return self.test + self.cross_test

    def train_score(self, confidence: float) -> Score:
        """Its score on its train side (computed each time: the record of a round that
        ended keeps it, see :mod:`.record`)."""
        return score(self.train_side, confidence)

    def test_score(self, confidence: float) -> Score:
        return score(self.test_side, confidence)

    @property
    def note(self) -> str | None:
        """What happened to this round's proposal when it was not simply taken: failed,
        dropped, or repaired (a repeat of a description already tried is never measured
        again: the improve model is asked once for a different one, the repeat named)."""
        proposal = self.proposal
        if proposal is None:
            return None
        if proposal.error:
            return "proposal failed: " + proposal.error
        notes = []
        if proposal.repaired:
            notes.append(
                "asked once more, because the answer "
                + "; ".join(p.replace("repeats", "repeated", 1) for p in proposal.repaired)
            )
        if proposal.problems:
            verb = "dropped" if not proposal.descriptions else "partly dropped"
            notes.append(f"proposal {verb}: " + "; ".join(proposal.problems))
        return "; ".join(notes) or None


@dataclass
class Acceptance:
    """The start and the best raced again on fresh runs of the held-out queries (train when
    there are none): SKILL.md is written only when the best's gain is positive at the
    confidence."""

    best_iteration: int
    on: str  # "test" | "train"
    race: Race
    own: int  # how many of the raced queries are the skill's own (the rest are the folder's)
    # with a model matrix: the same race on each other model, where the best must not lose
    on_models: tuple[tuple[str | None, Race], ...] = ()
    # racing on all queries: the paired gain on the held-out ones alone, which may not be
    # "worse" (a description fitted to the train queries at their cost is not written)
    held_out: Gain | None = None

    def _unsettled(self) -> int:
        """Fresh samplings of every race (this model's and the matrix's others) that errored
        or were skipped."""
        races = [self.race, *(race for _, race in self.on_models)]
        return sum(
            1 for race in races for r in race.incumbent + race.challenger if r.passed is None
        )

    @property
    def complete(self) -> bool:
        return self._unsettled() == 0

    @property
    def loses_on(self) -> list[str]:
        """The other models of a matrix on which the best is worse than the start."""
        return [str(model) for model, race in self.on_models if race.verdict == "worse"]

    @property
    def queries(self) -> str:
        """Which queries the race ran on, in words."""
        return {
            "all": "every query (the held-out ones a guard)",
            "test": "the test queries",
            "train": "the train queries",
        }.get(self.on, self.on)

    @property
    def loses_held_out(self) -> bool:
        return self.held_out is not None and self.held_out.verdict == "worse"

    @property
    def accepted(self) -> bool:
        return (
            self.complete
            and self.race.verdict == "better"
            and not self.loses_on
            and not self.loses_held_out
        )

    def verdict(self) -> str:
        """One line for people: the gain with its interval, and what it means."""
        missing = self._unsettled()
        if missing:
            return f"not confirmed: {missing} of the fresh samplings errored or were skipped"
        gain = self.race.gain
        text = f"gain over the start {gain.text()}"
        if gain.verdict == "better" and self.loses_held_out:
            return f"{text}: better, but worse on the held-out queries"
        if gain.verdict == "better" and self.loses_on:
            return f"{text}: better, but worse on {', '.join(self.loses_on)}"
        if gain.verdict == "better":
            return f"{text}: better at {gain.confidence:.0%}"
        if gain.verdict == "worse":
            return f"{text}: worse than the start"
        return f"{text}: not shown to be better (the difference is within chance)"


_EXIT_FORMS = (
    (
        re.compile(r"^max_iterations \((\d+)\)"),
        "stopped after {0} iterations (--trigger-max-iterations)",
    ),
    (re.compile(r"^all_passed \(iteration (\d+)\)"), "every train query passed at iteration {0}"),
)


def exit_sentence(reason: str) -> str:
    """The reference scripts' exit reason (``max_iterations (5)``, ``all_passed (iteration
    3)``) as a sentence; any other reason is one already."""
    for pattern, sentence in _EXIT_FORMS:
        found = pattern.match(reason)
        if found:
            return sentence.format(*found.groups()) + reason[found.end() :]
    return reason


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
    acceptance: Acceptance | None = None
    folder: Folder = field(default_factory=Folder)
    # siblings listed with the new descriptions they won earlier in this session
    relisted: tuple[str, ...] = ()
    confidence: float = 0.95
    accept_on: str = "all"  # what the acceptance race runs on (see Acceptance)

    @property
    def exit_text(self) -> str:
        """Why the rounds ended, in words (``exit_reason`` keeps the reference scripts' form,
        ``max_iterations (5)``, for the JSON)."""
        return exit_sentence(self.exit_reason) or ("interrupted" if self.interrupted else "—")

    def evaluated(self) -> list[Iteration]:
        return [it for it in self.iterations if it.evaluated]

    @property
    def start(self) -> Iteration | None:
        """The starting description's iteration, once evaluated."""
        evaluated = self.evaluated()
        return evaluated[0] if evaluated else None

    def best(self) -> Iteration:
        """The best so far: the latest iteration that won its race against the one before it
        (the start when none did). Selection is on train; the test side is never used."""
        evaluated = self.evaluated()
        winners = [it for it in evaluated if it.became_best]
        return winners[-1] if winners else evaluated[0]

    @property
    def improved(self) -> bool:
        """True when the best is not the start, and on fresh held-out runs its gain over the
        start is positive at the confidence."""
        return self.acceptance is not None and self.acceptance.accepted

    @property
    def beats_start(self) -> bool:
        """Whether selection found a better description than the start (before the fresh
        race on the held-out queries decides)."""
        evaluated = self.evaluated()
        return bool(evaluated) and not self.interrupted and self.best() is not evaluated[0]

    @staticmethod
    def incomplete(it: Iteration) -> bool:
        """True when a query of this iteration, its own or the folder's, errored or was
        skipped (no verdict): an outage must not decide for or against a candidate."""
        return any(r.passed is None for r in it.train_side + it.test_side)
