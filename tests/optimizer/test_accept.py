"""What becomes of SKILL.md after the rounds, decided from their typed outcomes alone."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.optimizer.accept import accept, accept_all
from pytest_skilltrigger.optimizer.racing import Race
from pytest_skilltrigger.optimizer.rounds import Acceptance, Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import paired_gain
from pytest_skilltrigger.skills.catalog import load_targets

SKILL_MD = "---\nname: pdf\n# keep me\ndescription: Merge PDFs.\nlicense: MIT\n---\n\nBody\n"


def result(query: str, should: bool, passed: bool) -> QueryResult:
    triggered = should == passed
    outcome = RunOutcome(
        "triggered" if triggered else "not_triggered", chosen="skill:pdf" if triggered else "text"
    )
    return QueryResult(query, should, FixedRule(10, 0.5), (outcome,) * 10)


def improved_run(tmp_path: Path, holds: bool = True) -> Optimization:
    folder = tmp_path / "pdf"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    queries = [
        ("merge a.pdf and b.pdf", True),
        ("split c.pdf", True),
        ("bake bread", False),
        ("join two PDFs", True),
        ("what is a PDF", False),
    ]
    (folder / "evals" / "trigger-eval.json").write_text(
        json.dumps([{"query": q, "should_trigger": s} for q, s in queries])
    )
    (target,) = load_targets([str(folder)])
    entries = list(target.eval_set.entries)
    run = Optimization(target, 0.4, entries[:3], entries[3:])

    def iteration(n: int, description: str, good: bool) -> Iteration:
        train = [result(e.query, e.should_trigger, True) for e in entries[:3]]
        test = [result(entries[3].query, True, good), result(entries[4].query, False, True)]
        return Iteration(n, description, "evaluated", train, test, became_best=good)

    run.iterations = [iteration(1, "Merge PDFs.", False), iteration(2, "Merge or join PDFs.", True)]
    run.exit_reason = "max_iterations (2)"
    start, best = run.iterations[0].test, run.iterations[1].test
    raced = best if holds else start
    run.acceptance = Acceptance(2, "test", Race(start, raced, paired_gain(start, raced, 0.95)), 2)
    return run


def test_a_winner_confirmed_on_fresh_runs_is_written_changing_only_its_description(
    tmp_path: Path,
) -> None:
    run = improved_run(tmp_path)
    lines: list[str] = []
    assert run.improved and accept(run, lines.append)
    text = (tmp_path / "pdf" / "SKILL.md").read_text()
    assert text == SKILL_MD.replace("Merge PDFs.", "Merge or join PDFs.")
    assert any("wrote the new description" in line for line in lines)


def test_a_lead_that_does_not_hold_on_fresh_runs_writes_nothing(tmp_path: Path) -> None:
    run = improved_run(tmp_path, holds=False)
    lines: list[str] = []
    assert not accept(run, lines.append)
    assert (tmp_path / "pdf" / "SKILL.md").read_text() == SKILL_MD
    assert any("not shown to be better" in line and "unchanged" in line for line in lines)


def test_a_file_edited_during_the_run_is_not_overwritten(tmp_path: Path) -> None:
    run = improved_run(tmp_path)
    edited = SKILL_MD.replace("Body", "Edited by hand")
    (tmp_path / "pdf" / "SKILL.md").write_text(edited)
    lines: list[str] = []
    assert not accept(run, lines.append)
    assert (tmp_path / "pdf" / "SKILL.md").read_text() == edited
    assert any("changed on disk during the run" in line for line in lines)


def test_nothing_is_written_after_an_interrupt(tmp_path: Path) -> None:
    run = improved_run(tmp_path)
    run.interrupted = True
    lines: list[str] = []
    accept_all([run], lines.append)
    assert lines == [] and (tmp_path / "pdf" / "SKILL.md").read_text() == SKILL_MD
