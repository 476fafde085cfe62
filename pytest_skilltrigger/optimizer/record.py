"""What the improvement rounds found, frozen as every report reads it.

The loop works on mutable rounds (:mod:`.rounds`); when a round ends the optimizer freezes
what it found into a :class:`RoundRecord` (its scores, each skill's counts in a folder, the
lines the candidate gets wrong, the race and its sentence), and each time the rounds are
published into a :class:`RoundsRecord`. Figures are computed once, here; the renderers (the
terminal, the JSON, the HTML page, the round files) only format these values, the way
Hypothesis's statistics are computed into a snapshot that a describer formats.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_skilltrigger.model.outcome import QueryResult, Usage, format_score
from pytest_skilltrigger.optimizer.folder import skill_scores, taken_lines
from pytest_skilltrigger.optimizer.proposer import Proposal
from pytest_skilltrigger.optimizer.rounds import Acceptance, Candidate, Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import Gain, Score
from pytest_skilltrigger.optimizer.unreachable import Unreachable, unreachable
from pytest_skilltrigger.skills.evalset import EvalEntry

NOT_MEASURED = "—"


@dataclass(frozen=True)
class RaceRecord:
    """A round's race against the best so far, on train: the paired gain, the runs it
    added, whether the round became the best, and the sentence every report shows."""

    gain: Gain
    extra_runs: int
    became_best: bool
    sentence: str


@dataclass(frozen=True)
class FolderRecord:
    """What a candidate does to its folder: passed and total per skill (its own queries,
    and each sibling's and the routing set's it should leave alone), in all, and the lines
    it gets wrong among the folder's queries."""

    skill_scores: tuple[tuple[str, int, int], ...]
    passed: int
    total: int
    taken: tuple[str, ...]


@dataclass(frozen=True)
class RoundRecord:
    """One round as the reports read it (:func:`freeze_round`)."""

    iteration: int
    description: str
    status: str  # "evaluated" | "invalid" | "interrupted"
    note: str | None
    elapsed: float
    usage: Usage
    proposal: Proposal | None
    candidates: tuple[Candidate, ...]
    # the candidates beside the survivor, each a line (none when the round had one)
    candidate_lines: tuple[str, ...]
    train: tuple[QueryResult, ...]
    test: tuple[QueryResult, ...]
    cross_train: tuple[QueryResult, ...]
    cross_test: tuple[QueryResult, ...]
    train_score: Score | None  # own and the folder's train queries (None: not measured)
    test_score: Score | None
    train_text: str
    test_text: str
    race: RaceRecord | None
    race_text: str  # the race's sentence, "the start" for the first round, or ""
    folder: FolderRecord | None

    @property
    def evaluated(self) -> bool:
        return self.status == "evaluated"


@dataclass(frozen=True)
class AcceptanceRecord:
    """The fresh race of the best against the start that decides the rewrite."""

    acceptance: Acceptance
    verdict: str
    start_score: str  # the skill's own raced queries, "k/n"
    best_score: str
    folder_start_score: str  # with the folder's
    folder_best_score: str


@dataclass(frozen=True)
class RoundsRecord:
    """One skill's improvement rounds as the reports read them (:func:`freeze`)."""

    name: str
    skill_path: str
    listed_as: str
    original: str
    best_description: str
    best_iteration: int | None
    final_description: str
    best_score: str | None  # the reference scripts' "k/n" (test, else train)
    best_train_score: str | None
    best_test_score: str | None
    exit_reason: str  # the reference scripts' form ("max_iterations (5)")
    exit_text: str  # in words
    interrupted: bool
    improved: bool
    holdout: float
    confidence: float
    train_entries: tuple[EvalEntry, ...]
    test_entries: tuple[EvalEntry, ...]
    folder_train: tuple[EvalEntry, ...]  # the folder's queries (their extra names the owner)
    folder_test: tuple[EvalEntry, ...]
    sizes: str  # the queries of each side, in words
    acceptance: AcceptanceRecord | None
    acceptance_text: str | None  # what decided the rewrite, in words (None: nothing did)
    rounds: tuple[RoundRecord, ...]
    # the queries no round got right the same way (see :mod:`.unreachable`)
    unreachable: tuple[Unreachable, ...] = ()

    @property
    def running(self) -> bool:
        return not self.exit_reason


def freeze_round(run: Optimization, it: Iteration) -> RoundRecord:
    """A round's record, its figures computed once."""
    c = run.confidence
    train = test = None
    race = None
    race_text = ""
    if it.evaluated:
        train, test = it.train_score(c), it.test_score(c)
        if it.race is not None:
            outcome = "new best" if it.became_best else "kept the best so far"
            race_text = f"{it.race.gain.text()}: {outcome}"
            race = RaceRecord(it.race.gain, it.race.extra_runs, it.became_best, race_text)
        elif it.iteration == 1:
            race_text = "the start"
    return RoundRecord(
        iteration=it.iteration,
        description=it.description,
        status=it.status,
        note=it.note,
        elapsed=it.elapsed,
        usage=it.usage,
        proposal=it.proposal,
        candidates=tuple(it.candidates),
        candidate_lines=tuple(_candidate(c) for c in it.candidates)
        if len(it.candidates) > 1
        else (),
        train=tuple(it.train),
        test=tuple(it.test),
        cross_train=tuple(it.cross_train),
        cross_test=tuple(it.cross_test),
        train_score=train,
        test_score=test,
        train_text=train.text() if train is not None else NOT_MEASURED,
        test_text=test.text() if test is not None else NOT_MEASURED,
        race=race,
        race_text=race_text,
        folder=_folder(run, it) if run.folder and it.evaluated else None,
    )


def _candidate(candidate: Candidate) -> str:
    if candidate.survived:
        return f"survived the screening: {candidate.description}"
    return f"dropped after {candidate.screened_runs} run(s) a query: {candidate.description}"


def _folder(run: Optimization, it: Iteration) -> FolderRecord:
    name, cross = run.target.name, run.folder.train + run.folder.test
    cross_results = it.cross_train + it.cross_test
    scores = skill_scores(name, it.train + it.test, cross, cross_results)
    return FolderRecord(
        skill_scores=tuple((skill, p, t) for skill, (p, t) in scores.items()),
        passed=sum(p for p, _t in scores.values()),
        total=sum(t for _p, t in scores.values()),
        taken=tuple(taken_lines(run.target.choice_id, cross, cross_results)),
    )


def freeze(run: Optimization, rounds: dict[int, RoundRecord]) -> RoundsRecord:
    """The rounds' record: each round's from ``rounds`` (frozen as it ended, by its
    number), the others frozen now."""
    evaluated = run.evaluated()
    best = run.best() if evaluated else None
    last = evaluated[-1] if evaluated else None
    original = run.target.description
    return RoundsRecord(
        name=run.target.name,
        skill_path=run.target.skill.path,
        listed_as=run.target.context().tested.line,
        original=original,
        best_description=best.description if best else original,
        best_iteration=best.iteration if best else None,
        final_description=last.description if last else original,
        best_score=format_score(best.test if run.test_entries else best.train) if best else None,
        best_train_score=format_score(best.train) if best else None,
        best_test_score=format_score(best.test) if best else None,
        exit_reason=run.exit_reason,
        exit_text=run.exit_text,
        interrupted=run.interrupted,
        improved=run.improved,
        holdout=run.holdout,
        confidence=run.confidence,
        train_entries=tuple(run.train_entries),
        test_entries=tuple(run.test_entries),
        folder_train=tuple(x.entry for x in run.folder.train),
        folder_test=tuple(x.entry for x in run.folder.test),
        sizes=_sizes(run),
        acceptance=_acceptance(run.acceptance) if run.acceptance else None,
        acceptance_text=_acceptance_text(run),
        rounds=tuple(rounds.get(it.iteration) or freeze_round(run, it) for it in run.iterations),
        unreachable=own_unreachable(run),
    )


def own_unreachable(run: Optimization, *, test_too: bool = True) -> tuple[Unreachable, ...]:
    """The skill's own queries no evaluated round got right: train and test for the
    reports; train alone for the proposer, which never sees a test query."""
    train, test = len(run.train_entries), len(run.test_entries) if test_too else 0
    return unreachable([(*it.train[:train], *it.test[:test]) for it in run.evaluated()])


def _sizes(run: Optimization) -> str:
    sizes = f"train {len(run.train_entries)}, test {len(run.test_entries)}"
    sizes += f" (holdout {run.holdout:g})"
    if not run.test_entries and not run.holdout:
        sizes += " — no test set: acceptance is on the queries the improver saw"
    if run.folder:
        sizes += f"; the folder's: train {len(run.folder.train)}, test {len(run.folder.test)}"
    return sizes


def _acceptance(acceptance: Acceptance) -> AcceptanceRecord:
    race, own = acceptance.race, acceptance.own
    return AcceptanceRecord(
        acceptance,
        acceptance.verdict(),
        start_score=format_score(race.incumbent[:own]),
        best_score=format_score(race.challenger[:own]),
        folder_start_score=format_score(race.incumbent),
        folder_best_score=format_score(race.challenger),
    )


def _acceptance_text(run: Optimization) -> str | None:
    if run.acceptance is not None:
        a = run.acceptance
        written = "accepted for SKILL.md" if run.improved else "SKILL.md unchanged"
        return (
            f"iteration {a.best_iteration} raced against the start on fresh runs ({a.on}): "
            f"{a.verdict()}; {written}"
        )
    if run.evaluated() and not run.beats_start and not run.interrupted:
        return "no candidate beat the start on train: SKILL.md unchanged"
    return None
