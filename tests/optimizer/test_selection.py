"""Choosing the best iteration: typed iterations, no calls. The rules the rounds' reports and
SKILL.md's rewrite depend on, checked where they are decided."""

from __future__ import annotations

from pathlib import Path

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.skills.catalog import load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry
from tests.helpers import make_skill


def result(should: bool, passes: bool, error: bool = False) -> QueryResult:
    """One query's three runs: passing or failing as asked, or with a run that errored."""
    hit = RunOutcome("triggered", "skill:pdf")
    miss = RunOutcome("not_triggered", "text")
    good, bad = (hit, miss) if should else (miss, hit)
    runs = (good,) * 3 if passes else (bad,) * 3
    if error:
        runs = (*runs[:2], RunOutcome("error", error="500 api_error: boom"))
    return QueryResult("q", should, 3, 0.5, runs)


def optimization(tmp_path: Path) -> Optimization:
    skill = tmp_path / "pdf"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: Merge PDF files.\n---\n")
    (skill / "trigger-eval.json").write_text('[{"query": "merge", "should_trigger": true}]')
    (target,) = load_targets([str(skill)])
    entries = [EvalEntry(i, f"q{i}", i % 2 == 0) for i in range(4)]
    return Optimization(target, 0.5, entries[:2], entries[2:])


def iteration(number: int, test_passes: int, error: bool = False) -> Iteration:
    test = [result(True, test_passes >= 1), result(False, test_passes >= 2, error=error)]
    return Iteration(number, f"description {number}", "evaluated",
                     train=[result(True, True), result(False, False)], test=test)  # fmt: skip


def test_a_candidate_with_an_errored_query_does_not_hide_a_sound_winner(
    tmp_path: Path,
) -> None:
    """Iteration 2 ties iteration 3 on test passes and, being earlier, would be the best;
    but a query of it errored, so its score is not sound, and as the best it would block
    any rewrite (an outage decides nothing). The sound iteration 3, which beats the start,
    is the best instead."""
    run = optimization(tmp_path)
    run.iterations = [iteration(1, 0), iteration(2, 2, error=True), iteration(3, 1)]
    assert run.incomplete(run.iterations[1])
    assert run.best().iteration == 3
    assert run.beats_start


def test_with_every_candidate_errored_the_start_stays_best(tmp_path: Path) -> None:
    run = optimization(tmp_path)
    run.iterations = [iteration(1, 0), iteration(2, 2, error=True)]
    assert run.best().iteration == 1
    assert not run.beats_start


def test_an_outage_never_makes_a_description_look_better(tmp_path: Path) -> None:
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
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
