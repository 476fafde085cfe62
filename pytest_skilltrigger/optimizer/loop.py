"""The improvement loop: propose several candidates from the best so far, screen them, race
the survivor against the best on the same queries, repeat; then race the best against the
start on fresh runs before anything is written.

It keeps the reference tool's numbers and meaning (holdout 0.4, five iterations, seed 42);
what it does differently, so that a gain is seen through the noise of the runs, is in
``docs/explanation/optimizer.md``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.formatting import counted
from pytest_skilltrigger.model.outcome import QueryResult, Usage
from pytest_skilltrigger.model.settings import OptimizerSettings
from pytest_skilltrigger.optimizer.folder import Folder, taken_lines
from pytest_skilltrigger.optimizer.proposer import (
    Attempt,
    Competition,
    PromptInputs,
    Proposal,
    build_prompt,
)
from pytest_skilltrigger.optimizer.racing import Race, Racer
from pytest_skilltrigger.optimizer.record import own_unreachable
from pytest_skilltrigger.optimizer.rounds import Acceptance, Candidate, Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import paired_gain
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry


class Proposer(Protocol):
    def propose(self, prompt: str, count: int = 1, tried: Sequence[str] = ()) -> Proposal: ...


OnIteration = Callable[[Optimization, Iteration], None]


@dataclass(frozen=True)
class RoundsStart:
    """What one skill's rounds start from, beyond the options.

    ``initial`` maps entry index to results already measured for the starting description
    (the items' results): iteration 1 only samples what is missing. ``folder`` holds the
    siblings' queries each description is also measured on; ``competition`` what the
    proposer is told the skill competes with; ``on_iteration`` is told each iteration done.
    """

    initial: Mapping[int, QueryResult] = field(default_factory=dict)
    folder: Folder | None = None
    competition: Competition | None = None
    on_iteration: OnIteration | None = None


def optimize(
    target: Target,
    session: TriggerSession,
    proposer: Proposer,
    options: OptimizerSettings | None = None,
    start: RoundsStart | None = None,
) -> Optimization:
    """Run the improvement rounds for one skill. A KeyboardInterrupt stops the loop, marks
    the run interrupted and returns what was finished."""
    options = options or OptimizerSettings()
    start = start or RoundsStart()
    train, test = split_entries(target.eval_set.entries, options.holdout, options.seed)
    run = Optimization(
        target,
        options.holdout,
        train,
        test,
        folder=start.folder or Folder(),
        confidence=session.plan.rule.confidence,
        accept_on=options.accept_on,
    )
    racer = Racer(session, target, options.race_runs)
    rounds = _Rounds(run, racer, proposer, options, start)
    # iteration 1 reuses the items' results, but samples again what errored or was skipped
    measured = {i: r for i, r in start.initial.items() if r.passed is not None}
    try:
        rounds.iterate(options.max_iterations, measured)
        if run.beats_start and not session.exhausted:
            try:
                run.acceptance = accept_race(racer, run)
            except KeyboardInterrupt:
                run.interrupted = True
                run.exit_reason += "; interrupted while racing the best against the start"
    except KeyboardInterrupt:
        run.interrupted = True
        done = counted(len(run.evaluated()), "evaluated iteration")
        run.exit_reason = f"interrupted (after {done})"
    return run


def accept_race(racer: Racer, run: Optimization) -> Acceptance:
    """The start and the best, sampled afresh and raced: what decides whether SKILL.md is
    rewritten. On every query by default, the held-out ones then a guard the best must not
    lose on (see :class:`Acceptance`); on the held-out ones alone with ``accept_on="test"``;
    on train when nothing is held out."""
    on, own, cross, held = _acceptance_queries(run)
    entries = own + cross
    start, best = run.evaluated()[0], run.best()
    start_results, best_results = racer.measure_all(
        [start.description, best.description],
        entries,
        racer.first_look(),
        independent=True,
        phase="confirmation",
    )
    race = racer.race(
        entries,
        (start.description, start_results),
        (best.description, best_results),
        phase="confirmation",
    )
    acceptance = Acceptance(best.iteration, on, race, len(own))
    if held:
        acceptance.held_out = paired_gain(
            [race.incumbent[i] for i in held],
            [race.challenger[i] for i in held],
            race.gain.confidence,
        )
    if race.verdict == "better":  # with a matrix, the other models must not lose
        acceptance.on_models = tuple(
            (model, _race_on(racer, model, entries, start.description, best.description))
            for model in racer.session.settings.lane_models[1:]
        )
    return acceptance


def _acceptance_queries(
    run: Optimization,
) -> tuple[str, list[EvalEntry], list[EvalEntry], list[int]]:
    """What the acceptance race runs on: its name, the skill's own queries, the folder's,
    and (racing on all) the positions of the held-out ones among them."""
    if not run.test_entries:
        return "train", run.train_entries, [c.entry for c in run.folder.train], []
    if run.accept_on == "test":
        return "test", run.test_entries, [c.entry for c in run.folder.test], []
    own = run.train_entries + run.test_entries
    cross_train = [c.entry for c in run.folder.train]
    cross = cross_train + [c.entry for c in run.folder.test]
    held = [
        *range(len(run.train_entries), len(own)),
        *range(len(own) + len(cross_train), len(own) + len(cross)),
    ]
    return "all", own, cross, held


def _race_on(
    racer: Racer, model: str | None, entries: list[EvalEntry], start: str, best: str
) -> Race:
    """The start and the best raced afresh on another model of the matrix."""
    other = Racer(racer.session, racer.target, racer.race_runs, model=model)
    mine, theirs = other.measure_all(
        [start, best], entries, other.first_look(), independent=True, phase="confirmation"
    )
    return other.race(entries, (start, mine), (best, theirs), phase="confirmation")


class _Rounds:
    """The iterations of one skill's rounds."""

    def __init__(
        self,
        run: Optimization,
        racer: Racer,
        proposer: Proposer,
        options: OptimizerSettings,
        start: RoundsStart,
    ) -> None:
        self.run = run
        self.racer = racer
        self.proposer = proposer
        self.on_iteration = start.on_iteration
        self.candidates = max(1, options.candidates_per_round)
        self.competition = start.competition
        folder = run.folder
        self.cross_train = [c.entry for c in folder.train]
        self.cross_test = [c.entry for c in folder.test]
        # the best's train side as its races extended it (by iteration): an iteration once
        # published keeps the results it was reported with
        self.extended: dict[int, list[QueryResult]] = {}

    def train_side(self, it: Iteration) -> list[QueryResult]:
        """An iteration's train side with every run its races added since."""
        return self.extended.get(it.iteration, it.train_side)

    def iterate(self, max_iterations: int, measured: Mapping[int, QueryResult]) -> None:
        run = self.run
        for number in range(1, max_iterations + 1):
            exhausted = self.racer.session.exhausted
            if number > 1 and exhausted:  # no run can measure a proposal: ask no more
                run.exit_reason = f"stopped before iteration {number}: {exhausted}"
                return
            it = self._start(measured) if number == 1 else self._round(number)
            run.iterations.append(it)
            if self.on_iteration:
                self.on_iteration(run, it)
            best = run.best()
            if all(r.passed for r in self.train_side(best)):
                # its siblings' train queries too: a best that takes them is no end point
                run.exit_reason = f"all_passed (iteration {best.iteration})"
                return
        run.exit_reason = f"max_iterations ({max_iterations})"

    def _start(self, known: Mapping[int, QueryResult]) -> Iteration:
        """Iteration 1: the starting description, on every side (the items' results reused)."""
        started = time.monotonic()
        run = self.run
        description = run.target.description
        own = run.train_entries + run.test_entries
        entries = own + self.cross_train + self.cross_test
        # the items' results stand for the skill's own queries (a sibling's query may share
        # an index with one of them, so only positions within ``own`` look them up)
        reuse = [known.get(e.index) if i < len(own) else None for i, e in enumerate(entries)]
        todo = [e for e, r in zip(entries, reuse, strict=True) if r is None]
        sampled = iter(self.racer.measure(description, todo))
        results = [r if r is not None else next(sampled) for r in reuse]
        sizes = (len(run.train_entries), len(run.test_entries), len(self.cross_train))
        a, b, c = itertools.accumulate(sizes)
        train, test, cross_train, cross_test = results[:a], results[a:b], results[b:c], results[c:]
        usage = sum((r.usage for r in train + test + cross_train + cross_test), Usage())
        return Iteration(
            1,
            description,
            "evaluated",
            train,
            test,
            elapsed=time.monotonic() - started,
            usage=usage,
            cross_train=cross_train,
            cross_test=cross_test,
        )

    def _round(self, number: int) -> Iteration:
        """A round: several proposals from the best so far, screened on train; the survivor
        raced against the best on train, and measured on test for the record."""
        started = time.monotonic()
        run = self.run
        best = run.best()
        tried = [it.description for it in run.iterations if it.description]
        tried += [c.description for it in run.iterations for c in it.candidates]
        proposal = self.proposer.propose(self._prompt(best), self.candidates, tried)
        if not proposal.descriptions:
            return Iteration(
                number,
                "",
                "invalid",
                proposal=proposal,
                elapsed=time.monotonic() - started,
                usage=proposal.usage,
            )
        train_entries = run.train_entries + self.cross_train
        winner, reached = 0, dict[int, int]()
        if len(proposal.descriptions) > 1:
            winner, reached = self.racer.screen(proposal.descriptions, train_entries)
        candidates = [
            Candidate(d, reached.get(i, 0), i == winner)
            for i, d in enumerate(proposal.descriptions)
        ]
        description = proposal.descriptions[winner]
        train_side = self.racer.measure(description, train_entries)
        race = self.racer.race(
            train_entries, (best.description, self.train_side(best)), (description, train_side)
        )
        own = len(run.train_entries)
        self.extended[best.iteration] = race.incumbent
        held_out = self.racer.measure(description, run.test_entries + self.cross_test)
        test, cross_test = held_out[: len(run.test_entries)], held_out[len(run.test_entries) :]
        results = race.challenger + test + cross_test
        return Iteration(
            number,
            description,
            "evaluated",
            race.challenger[:own],
            test,
            proposal,
            time.monotonic() - started,
            sum((r.usage for r in results), proposal.usage),
            race.challenger[own:],
            cross_test,
            candidates,
            race,
            race.verdict == "better",
        )

    def _prompt(self, best: Iteration) -> str:
        """The proposer's prompt, from the best description so far."""
        run = self.run
        target = run.target
        attempts = [Attempt(it.description, tuple(it.train)) for it in run.evaluated()]
        side, own = self.train_side(best), len(run.train_entries)
        return build_prompt(
            PromptInputs(
                target.choice_id,
                target.skill.raw.decode("utf-8", "replace"),
                best.description,
                side[:own],
                attempts,
                when_to_use=target.skill.when_to_use,
                folder_lines=tuple(taken_lines(target.choice_id, run.folder.train, side[own:])),
                count=self.candidates,
                competition=self.competition,
                unreachable=tuple(u.query for u in own_unreachable(run, test_too=False)),
            )
        )
