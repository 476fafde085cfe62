"""The improvement loop: evaluate, propose from the best so far, repeat; pick the best on test.

It keeps the reference tool's numbers and meaning (holdout 0.4, five iterations, seed 42, best
by test passes) and fixes its defects: iteration 1 reuses results already measured, each round
improves from the best description so far by train score (a worse proposal cannot poison the
next round), invalid proposals are repaired once and otherwise dropped, and errors are never
counted as misses.

Picking the best of several candidates by a handful of test queries overstates the winner:
with a few runs per query, borderline queries flip by chance, and the candidate that got the
lucky flips wins. So a winner that beats the start is measured again, together with the
start, on fresh runs of the same queries (see :mod:`.confirmation`); it counts as an
improvement, and SKILL.md is rewritten, only when its lead holds on that re-measurement. The
re-measured scores are reported beside the selection scores. In a folder of skills, each
candidate is also measured on its siblings' queries (see :mod:`.folder`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import QueryResult, Usage, passed
from pytest_skilltrigger.optimizer.confirmation import confirm
from pytest_skilltrigger.optimizer.folder import Folder, taken_lines
from pytest_skilltrigger.optimizer.proposer import Attempt, Proposal, build_prompt
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry


class Proposer(Protocol):
    def propose(self, prompt: str) -> Proposal: ...


OnIteration = Callable[[Optimization, Iteration], None]


def optimize(
    target: Target,
    session: TriggerSession,
    proposer: Proposer,
    *,
    holdout: float = 0.4,
    max_iterations: int = 5,
    seed: int = 42,
    initial: Mapping[int, QueryResult] | None = None,
    on_iteration: OnIteration | None = None,
    folder: Folder | None = None,
) -> Optimization:
    """Run the improvement rounds for one skill.

    ``initial`` maps entry index to results already measured for the starting description
    (the items' results): iteration 1 only evaluates what is missing. A KeyboardInterrupt
    stops the loop, marks the run interrupted and returns what was finished. ``folder`` holds
    the siblings' queries each candidate is also measured on (see :mod:`.folder`).
    """
    train, test = split_entries(target.eval_set.entries, holdout, seed)
    run = Optimization(target, holdout, train, test, folder=folder or Folder())
    rounds = _Rounds(run, session, proposer, on_iteration)
    # iteration 1 reuses the items' results, but samples again what errored or was skipped
    measured = {i: r for i, r in (initial or {}).items() if r.passed is not None}
    try:
        rounds.iterate(max_iterations, measured)
        if run.beats_start and not session.halted:
            try:
                run.confirmation = confirm(session, run)
            except KeyboardInterrupt:
                run.interrupted = True
                run.exit_reason += "; interrupted while measuring the best again"
    except KeyboardInterrupt:
        run.interrupted = True
        run.exit_reason = f"interrupted (after {len(run.evaluated())} evaluated iterations)"
    return run


class _Rounds:
    """The iterations of one skill's rounds: propose from the best so far, measure, repeat."""

    def __init__(self, run: Optimization, session: TriggerSession, proposer: Proposer,
                 on_iteration: OnIteration | None) -> None:  # fmt: skip
        self.run = run
        self.session = session
        self.proposer = proposer
        self.on_iteration = on_iteration
        folder = run.folder
        # the entries every candidate is measured on: its own, then the folder's
        self.sides = (
            run.train_entries, run.test_entries,
            [c.entry for c in folder.train], [c.entry for c in folder.test],
        )  # fmt: skip

    def iterate(self, max_iterations: int, measured: Mapping[int, QueryResult]) -> None:
        run = self.run
        for number in range(1, max_iterations + 1):
            if number > 1 and self.session.halted:  # no run can measure a proposal: ask no more
                run.exit_reason = f"stopped before iteration {number}: {self.session.halted}"
                return
            it = self._iteration(number, measured if number == 1 else {})
            run.iterations.append(it)
            if self.on_iteration:
                self.on_iteration(run, it)
            if it.evaluated and passed(it.train + it.cross_train) == len(it.train) + len(
                it.cross_train
            ):
                # its siblings' train queries too: a winner that takes them is no end point
                run.exit_reason = f"all_passed (iteration {number})"
                return
        run.exit_reason = f"max_iterations ({max_iterations})"

    def _iteration(self, number: int, known: Mapping[int, QueryResult]) -> Iteration:
        """One round: the start's description, or a proposal; measured unless dropped."""
        started = time.monotonic()
        proposal = None
        description = self.run.target.description
        if number > 1:
            proposal = self.proposer.propose(self._prompt())
            if proposal.description is None:
                return Iteration(number, "", "invalid", proposal=proposal,
                                 elapsed=time.monotonic() - started, usage=proposal.usage)
            description = proposal.description
        entries = [e for side in self.sides for e in side]
        results = _evaluate(self.session, self.run.target, description, entries, known)
        own_train, own_test, cross_train, cross_test = _cut(results, self.sides)
        usage = sum((r.usage for r in results), proposal.usage if proposal else Usage())
        return Iteration(
            number, description, "evaluated", train=own_train, test=own_test,
            proposal=proposal, elapsed=time.monotonic() - started, usage=usage,
            cross_train=cross_train, cross_test=cross_test,
        )  # fmt: skip

    def _prompt(self) -> str:
        """The proposer's prompt, from the best description so far by train score."""
        run = self.run
        target = run.target
        base = run.best_for_proposing()
        attempts = [Attempt(it.description, tuple(it.train)) for it in run.evaluated()]
        return build_prompt(
            target.name,
            target.skill.raw.decode("utf-8", "replace"),
            base.description,
            base.train,
            attempts,
            when_to_use=target.skill.when_to_use,
            folder_lines=taken_lines(target.name, run.folder.train, base.cross_train),
        )


def _cut(results: list[QueryResult], sides: tuple[list[EvalEntry], ...]) -> list[list[QueryResult]]:
    """Results of entries sampled together, cut back into their sides."""
    out, at = [], 0
    for side in sides:
        out.append(results[at : at + len(side)])
        at += len(side)
    return out


def _evaluate(
    session: TriggerSession,
    target: Target,
    description: str,
    entries: list[EvalEntry],
    known: Mapping[int, QueryResult],
) -> list[QueryResult]:
    """Results for every entry, in order: known ones reused, the rest sampled concurrently."""
    context = target.context(description)
    plan = replace(session.plan, phase="rounds")
    # with --trigger-batch the round's runs are made as message batches first (one a wave)
    session.run_batches([(context, e, plan) for e in entries if e.index not in known])
    futures = {
        e.index: session.submit(context, e, plan) for e in entries if e.index not in known
    }
    return [known[e.index] if e.index in known else futures[e.index].result() for e in entries]
