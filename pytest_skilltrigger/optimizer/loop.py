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
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import QueryResult, Usage, format_score, passed
from pytest_skilltrigger.optimizer.confirmation import Confirmation, confirm
from pytest_skilltrigger.optimizer.folder import Folder, skill_scores, taken_lines
from pytest_skilltrigger.optimizer.proposer import Attempt, Proposal, build_prompt
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry


class Proposer(Protocol):
    def propose(self, prompt: str) -> Proposal: ...


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

    def to_dict(self) -> dict[str, Any]:
        """The reference history entry, plus our status and proposal notes."""
        train_rows = [r.summary_row() for r in self.train]
        test_rows = [r.summary_row() for r in self.test]
        train_passed, test_passed = passed(self.train), passed(self.test)
        entry: dict[str, Any] = {
            "iteration": self.iteration,
            "description": self.description,
            "status": self.status,
            "train_passed": train_passed,
            "train_failed": len(self.train) - train_passed,
            "train_total": len(self.train),
            "train_results": train_rows,
            "test_passed": test_passed,
            "test_failed": len(self.test) - test_passed,
            "test_total": len(self.test),
            "test_results": test_rows,
            "passed": train_passed,
            "failed": len(self.train) - train_passed,
            "total": len(self.train),
            "results": train_rows,
            "elapsed_seconds": round(self.elapsed, 3),
            **self.usage.to_dict(),
        }
        if self.note is not None:
            entry["note"] = self.note
        return entry

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
    """The whole run for one skill; ``to_dict`` gives the reference keys."""

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

    def to_dict(self) -> dict[str, Any]:
        evaluated = self.evaluated()
        best = self.best() if evaluated else None
        last = evaluated[-1] if evaluated else None

        return {
            "exit_reason": self.exit_reason,
            "original_description": self.target.description,
            "best_description": best.description if best else self.target.description,
            "best_iteration": best.iteration if best else None,
            "best_score": (
                format_score(best.test if self.test_entries else best.train) if best else None
            ),
            "best_train_score": format_score(best.train) if best else None,
            "best_test_score": format_score(best.test) if best else None,
            "final_description": last.description if last else self.target.description,
            "iterations_run": len(self.iterations),
            "holdout": self.holdout,
            "train_size": len(self.train_entries),
            "test_size": len(self.test_entries),
            "improved": self.improved,
            "confirmation": self.confirmation.to_dict() if self.confirmation else None,
            "refused_for_folder": self.refused_for_folder(),
            "interrupted": self.interrupted,
            "history": [self._history_entry(it) for it in self.iterations],
        }

    def _history_entry(self, it: Iteration) -> dict[str, Any]:
        """An iteration's entry; in a folder of skills also each skill's score (the
        siblings': their queries this candidate leaves alone) and the folder's."""
        entry = it.to_dict()
        if self.folder and it.evaluated:
            name, cross = self.target.name, self.folder.train + self.folder.test
            cross_results = it.cross_train + it.cross_test
            scores = skill_scores(name, it.train + it.test, cross, cross_results)
            entry["skill_scores"] = {skill: f"{p}/{t}" for skill, (p, t) in scores.items()}
            done, total = (sum(v[i] for v in scores.values()) for i in (0, 1))
            entry["folder_score"] = f"{done}/{total}"
            entry["folder_taken"] = taken_lines(name, cross, cross_results)
        return entry


def optimize(
    target: Target,
    session: TriggerSession,
    proposer: Proposer,
    *,
    holdout: float = 0.4,
    max_iterations: int = 5,
    seed: int = 42,
    initial: Mapping[int, QueryResult] | None = None,
    on_iteration: Callable[[Optimization, Iteration], None] | None = None,
    folder: Folder | None = None,
) -> Optimization:
    """Run the improvement rounds for one skill.

    ``initial`` maps entry index to results already measured for the starting description
    (the items' results): iteration 1 only evaluates what is missing. A KeyboardInterrupt
    stops the loop, marks the run interrupted and returns what was finished. ``folder`` holds
    the siblings' queries each candidate is also measured on (see :mod:`.folder`).
    """
    train, test = split_entries(target.eval_set.entries, holdout, seed)
    folder = folder or Folder()
    run = Optimization(target, holdout, train, test, folder=folder)
    cross_train = [c.entry for c in folder.train]
    cross_test = [c.entry for c in folder.test]
    description = target.description
    proposal: Proposal | None = None
    # iteration 1 reuses the items' results, but samples again what errored or was skipped
    measured = {i: r for i, r in (initial or {}).items() if r.passed is not None}
    try:
        for number in range(1, max_iterations + 1):
            started = time.monotonic()
            if number > 1 and session.halted:  # no run can measure a proposal: ask no more
                run.exit_reason = f"stopped before iteration {number}: {session.halted}"
                break
            if number > 1:
                base = run.best_for_proposing()
                attempts = [Attempt(it.description, tuple(it.train)) for it in run.evaluated()]
                prompt = build_prompt(
                    target.name,
                    target.skill.raw.decode("utf-8", "replace"),
                    base.description,
                    base.train,
                    attempts,
                    when_to_use=target.skill.when_to_use,
                    folder_lines=taken_lines(target.name, folder.train, base.cross_train),
                )
                proposal = proposer.propose(prompt)
                if proposal.description is None:
                    it = Iteration(number, "", "invalid", proposal=proposal,
                                   elapsed=time.monotonic() - started, usage=proposal.usage)
                    run.iterations.append(it)
                    if on_iteration:
                        on_iteration(run, it)
                    continue
                description = proposal.description
            known = measured if number == 1 else {}
            sides = (train, test, cross_train, cross_test)
            results = _evaluate(session, target, description, [e for s in sides for e in s],
                                known)  # fmt: skip
            own_train, own_test, c_train, c_test = _cut(results, sides)
            it = Iteration(
                number,
                description,
                "evaluated",
                train=own_train,
                test=own_test,
                proposal=proposal,
                elapsed=time.monotonic() - started,
                usage=sum((r.usage for r in results), proposal.usage if proposal else Usage()),
                cross_train=c_train,
                cross_test=c_test,
            )
            run.iterations.append(it)
            if on_iteration:
                on_iteration(run, it)
            if passed(it.train + it.cross_train) == len(it.train) + len(it.cross_train):
                # its siblings' train queries too: a winner that takes them is no end point
                run.exit_reason = f"all_passed (iteration {number})"
                break
        else:
            run.exit_reason = f"max_iterations ({max_iterations})"
        if run.beats_start and not session.halted:
            try:
                run.confirmation = confirm(session, run)
            except KeyboardInterrupt:
                run.interrupted = True
                run.exit_reason += "; interrupted while measuring the best again"
                return run
    except KeyboardInterrupt:
        run.interrupted = True
        run.exit_reason = f"interrupted (after {len(run.evaluated())} evaluated iterations)"
    return run


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
