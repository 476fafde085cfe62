"""An outage found in review: errored runs never make a description look better (a run that
lost its positives to errors is not beaten by a candidate that merely did not error)."""

from __future__ import annotations

from pathlib import Path

from pytest_skilltrigger.engine.outcome import RunOutcome
from tests.helpers import make_skill


def test_an_outage_never_makes_a_description_look_better(tmp_path: Path) -> None:
    from pytest_skilltrigger.engine.outcome import QueryResult
    from pytest_skilltrigger.optimizer.loop import Iteration, Optimization
    from pytest_skilltrigger.skills.catalog import load_targets

    folder = make_skill(tmp_path, [("merge these PDF documents", True), ("write a poem", False)])
    (target,) = load_targets([str(folder)])
    entries = list(target.eval_set.entries)

    def result(entry, status: str) -> QueryResult:
        outcome = RunOutcome(
            status,
            chosen=None if status == "error" else "text",  # type: ignore[arg-type]
            error="529 overloaded" if status == "error" else None,
        )
        return QueryResult(entry.query, entry.should_trigger, 1, 0.5, (outcome,))

    run = Optimization(target, 0.0, entries, [])
    # the start lost its positive to an outage; the candidate merely did not error
    run.iterations.append(
        Iteration(
            1,
            "start",
            "evaluated",
            train=[result(entries[0], "error"), result(entries[1], "not_triggered")],
        )
    )
    run.iterations.append(
        Iteration(
            2,
            "candidate",
            "evaluated",
            train=[result(entries[0], "triggered"), result(entries[1], "not_triggered")],
        )
    )
    assert run.best().iteration == 2
    assert run.improved is False
