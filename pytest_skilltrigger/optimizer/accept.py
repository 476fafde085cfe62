"""What becomes of SKILL.md once the rounds are over, decided from their typed outcomes.

A skill's file is rewritten only when the best description beat the start on test and kept
its lead when both were measured again on fresh runs. Only the description's value changes
(see :mod:`pytest_skilltrigger.skills.rewrite`), and never when the file changed on disk during
the run. Nothing is written after an interrupted run: every SKILL.md is then as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_skilltrigger.model.outcome import format_score
from pytest_skilltrigger.optimizer.rounds import Optimization
from pytest_skilltrigger.skills.rewrite import FileChangedError, write_description
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
            log(f"{run.target.name}: measured with the new description of {', '.join(stale)}, "
                "which was not written: its results assume a listing not on disk")  # fmt: skip
        if not accept(run, log) and run.improved:
            unwritten.add(run.target.name)


def _unchanged_reason(run: Optimization) -> str:
    start = run.start
    best = run.best() if run.evaluated() else None
    confirmation = run.confirmation
    if start is not None and best is not None and (
        run.incomplete(start) or run.incomplete(best)
    ):
        return "some queries errored or were skipped, so the comparison is not sound"
    if confirmation is not None and not confirmation.complete:
        return "some fresh runs errored or were skipped, so the lead is not confirmed"
    if confirmation is not None and confirmation.lead_holds:
        return (
            "the best won on its own queries but takes more of its siblings' queries than it "
            f"gains (the folder's queries on fresh runs: "
            f"{format_score(confirmation.folder_start)} with the start, "
            f"{format_score(confirmation.folder_best)} with the best)"
        )
    if confirmation is not None:
        return (
            "the best's lead came from chance: it did not hold on fresh runs "
            "(paste it by hand if you still want it)"
        )
    refused = run.refused_for_folder()
    if refused:
        return _refused_text(refused)
    return "nothing beat the starting description"


def _refused_text(refused: list[int]) -> str:
    """Which candidates the folder kept from being the best, and why."""
    numbers = ", ".join(str(n) for n in refused)
    return (
        f"the candidates that did best on its own queries (iteration {numbers}) take more "
        "of its siblings' queries than they gain"
    )


def accept(run: Optimization, log: Callable[[str], None]) -> bool:
    """Print before/after for one skill and rewrite its SKILL.md when the best won; whether
    it was rewritten."""
    target = run.target
    log(f"{target.name}: {run.exit_reason}")
    log(f"  before: {target.description}")
    start = run.start
    if start is None:  # nothing was measured: there is nothing to write
        log(f"  {target.skill.skill_md} unchanged: {_unchanged_reason(run)}")
        return False
    best = run.best()
    log(f"    train {format_score(start.train)}, test {format_score(start.test)}")
    log(f"  best (iteration {best.iteration}): {best.description}")
    log(f"    train {format_score(best.train)}, test {format_score(best.test)}")
    if run.confirmation is not None:
        log(
            f"    measured again on fresh runs ({run.confirmation.on}): "
            f"{run.confirmation.verdict()}"
        )
        # another candidate won, so the reason below (or the write) never names the ones
        # that did better on its own queries but lose the folder: say so here
        refused = run.refused_for_folder()
        if refused:
            log(f"  refused for the folder: {_refused_text(refused)}")
    if not run.improved:
        log(f"  {target.skill.skill_md} unchanged: {_unchanged_reason(run)}")
        return False
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
