"""What becomes of SKILL.md once the rounds are over, decided from their typed outcomes.

A skill's file is rewritten only when the best description, raced against the start on fresh
runs (of every query, its own and the folder's, with the held-out ones a guard it may not lose
on; of the held-out ones alone with ``--trigger-accept-on=test``), gains on it at the
confidence, and loses on no other model of a matrix. Only the description's value changes (see
:mod:`pytest_skilltrigger.skills.rewrite`), and never when the file changed on disk during the
run. Nothing is written after an interrupted run: every SKILL.md is then as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_skilltrigger.optimizer.rounds import Optimization
from pytest_skilltrigger.skills.write_back import FileChangedError, write_description
from pytest_skilltrigger.support.errors import InputError


def accept_all(runs: Iterable[Optimization], log: Callable[[str], None]) -> None:
    """Report every skill's before/after and write the descriptions that won."""
    runs = list(runs)
    if any(run.interrupted for run in runs):
        return
    unwritten: set[str] = set()  # improved, but the file could not be rewritten
    for run in runs:
        stale = sorted(set(run.relisted) & unwritten)
        if stale:
            log(
                f"{run.target.name}: measured with the new description of {', '.join(stale)}, "
                "which was not written: its results assume a listing not on disk"
            )
        if not accept(run, log) and run.improved:
            unwritten.add(run.target.name)


def unchanged_reason(run: Optimization) -> str:
    """Why SKILL.md stays as it is, in one clause."""
    start = run.start
    if start is None:
        return "nothing was measured"
    if run.incomplete(start):
        return "some of the start's queries errored or were skipped, so no comparison is sound"
    if not run.beats_start and all(r.passed for r in start.train_side):
        return "the start already passes every train query, the folder's included"
    if not run.beats_start:
        return (
            f"no candidate's gain over the best so far was positive at {run.confidence:.0%} "
            "on the train queries: kept the start"
        )
    acceptance = run.acceptance
    if acceptance is None:
        return "the best was not raced against the start on fresh runs"
    if not acceptance.complete:
        return "some fresh runs errored or were skipped, so the gain is not confirmed"
    return (
        f"on fresh runs of {acceptance.queries} the best's {acceptance.verdict()} "
        "(paste it by hand if you still want it)"
    )


def accept(run: Optimization, log: Callable[[str], None]) -> bool:
    """Print before/after for one skill and rewrite its SKILL.md when the best won; whether
    it was rewritten."""
    target = run.target
    log(f"{target.name}: {run.exit_text}")
    log(f"  before: {target.description}")
    start = run.start
    if start is None:  # nothing was measured: there is nothing to write
        log(f"  {target.skill.skill_md} unchanged: {unchanged_reason(run)}")
        return False
    confidence = run.confidence
    log(
        f"    train {start.train_score(confidence).text()}, "
        f"test {start.test_score(confidence).text()} (expected queries right)"
    )
    if run.beats_start:
        best = run.best()
        log(f"  best (iteration {best.iteration}): {best.description}")
        log(
            f"    train {best.train_score(confidence).text()}, "
            f"test {best.test_score(confidence).text()}"
        )
        if run.acceptance is not None:
            log(
                f"    raced against the start on fresh runs ({run.acceptance.on}): "
                f"{run.acceptance.verdict()}"
            )
    if not run.improved:
        log(f"  {target.skill.skill_md} unchanged: {unchanged_reason(run)}")
        return False
    best = run.best()
    try:
        write_description(target.skill.skill_md, best.description, target.skill.raw)
    except FileChangedError:
        log(
            f"  {target.skill.skill_md} changed on disk during the run: not overwritten; "
            "paste the best description by hand"
        )
        return False
    except InputError as exc:
        log(f"  not written: {exc}")
        return False
    log(f"  wrote the new description to {target.skill.skill_md}")
    return True
