"""The typed rounds: which iteration is the best, when SKILL.md may be rewritten, and why not.
Typed iterations, no calls: the rules the reports and the rewrite depend on, where they are
decided."""

from __future__ import annotations

from pathlib import Path

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.verdict import SequentialRule
from pytest_skilltrigger.optimizer.accept import unchanged_reason
from pytest_skilltrigger.optimizer.racing import Race
from pytest_skilltrigger.optimizer.rounds import Acceptance, Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import paired_gain
from pytest_skilltrigger.skills.catalog import load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry


def result(should: bool, passes: bool, error: bool = False, runs: int = 5) -> QueryResult:
    """One query's runs: settled passing or failing as asked, or with a run that errored."""
    hit = RunOutcome("triggered", "skill:pdf")
    miss = RunOutcome("not_triggered", "text")
    good, bad = (hit, miss) if should else (miss, hit)
    outcomes = (good if passes else bad,) * runs
    if error:
        outcomes = (*outcomes[:2], RunOutcome("error", error="500 api_error: boom"))
    return QueryResult("q", should, SequentialRule(), outcomes)


def optimization(tmp_path: Path) -> Optimization:
    skill = tmp_path / "pdf"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: pdf\ndescription: Merge PDF files.\n---\n")
    (skill / "trigger-eval.json").write_text('[{"query": "merge", "should_trigger": true}]')
    (target,) = load_targets([str(skill)])
    entries = [EvalEntry(i, f"q{i}", i % 2 == 0) for i in range(4)]
    return Optimization(target, 0.5, entries[:2], entries[2:])


def iteration(number: int, train_passes: int, won: bool = False, error: bool = False) -> Iteration:
    train = [result(True, train_passes >= 1), result(False, train_passes >= 2, error=error)]
    return Iteration(
        number,
        f"description {number}",
        "evaluated",
        train=train,
        test=[result(True, True), result(False, True)],
        became_best=won,
    )


def test_the_best_is_the_latest_that_won_its_race(tmp_path: Path) -> None:
    run = optimization(tmp_path)
    run.iterations = [
        iteration(1, 0),
        iteration(2, 1, won=True),
        iteration(3, 2),
        iteration(4, 2, won=True),
        Iteration(5, "", "invalid"),
    ]
    assert run.best().iteration == 4 and run.beats_start
    # an iteration that scored better but did not win its race is not the best
    run.iterations[3].became_best = False
    assert run.best().iteration == 2
    run.iterations[1].became_best = False
    assert run.best().iteration == 1 and not run.beats_start
    assert "kept the start" in unchanged_reason(run)


def test_only_a_complete_race_won_on_fresh_runs_writes(tmp_path: Path) -> None:
    run = optimization(tmp_path)
    run.iterations = [iteration(1, 0), iteration(2, 2, won=True)]
    start = [result(True, False, runs=10), result(False, True, runs=10)]
    best = [result(True, True, runs=10), result(False, True, runs=10)]
    race = Race(start, best, paired_gain(start, best, 0.95))
    run.acceptance = Acceptance(2, "test", race, own=2)
    assert race.verdict == "better" and run.improved
    # the same lead with an errored fresh run confirms nothing: an outage decides nothing
    broken = [best[0], result(False, True, error=True)]
    run.acceptance = Acceptance(
        2, "test", Race(start, broken, paired_gain(start, broken, 0.95)), own=2
    )
    assert not run.improved and "errored or were skipped" in unchanged_reason(run)


def test_an_outage_never_makes_a_description_look_better() -> None:
    """A challenger whose only difference is an errored query has no gain to show: the pair
    is unsettled, so it stays within chance."""
    incumbent = [result(True, True), result(False, False)]
    challenger = [result(True, True), result(False, True, error=True)]
    gain = paired_gain(incumbent, challenger, 0.95)
    assert gain.verdict == "undecided"


def test_the_exit_reason_reads_as_a_sentence_and_keeps_the_references_form() -> None:
    from pytest_skilltrigger.optimizer.rounds import exit_sentence

    assert (
        exit_sentence("max_iterations (5)")
        == "stopped after 5 iterations (--trigger-max-iterations)"
    )
    assert exit_sentence("all_passed (iteration 3)") == "every train query passed at iteration 3"
    assert exit_sentence("stopped before iteration 2: cost budget") == (
        "stopped before iteration 2: cost budget"
    )


def test_a_race_where_no_query_differs_says_so() -> None:
    """Scores of 5.0 and 6.0 may both settle every query on the same side: the race has no
    pair to weigh, and says that rather than '+0.0 (+0 to +0 at 95%, P(better) 0.00)'."""
    from pytest_skilltrigger.optimizer.scoring import Gain

    assert Gain(0.0, (0, 0), 0.0, 0.0, 0, 0.95).text() == (
        "no query differs (both settle every one on the same side)"
    )
    assert Gain(1.5, (-1, 3), 0.74, 0.1, 4, 0.95).text() == "+1.5 (-1 to +3 at 95%, P(better) 0.74)"
