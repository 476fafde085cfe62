"""The end of a session without pytest: inputs checked before any call, the files written,
the gates and the baseline applied, from the typed results gathered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.conclusion.outputs import Outputs
from pytest_skilltrigger.conclusion.session_end import EndOptions, SessionEnd
from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.skills.catalog import load_targets
from pytest_skilltrigger.support.errors import InputError
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill


def result(query: str, should: bool, triggers: int) -> QueryResult:
    outcomes = [RunOutcome("triggered", chosen="skill:pdf-tools")] * triggers
    outcomes += [RunOutcome("not_triggered", chosen="text")] * (3 - triggers)
    return QueryResult(query, should, FixedRule(3, 0.5), tuple(outcomes))


def gathered_end(tmp_path: Path, **kwargs: object) -> SessionEnd:
    folder = make_skill(tmp_path, [("merge a.pdf", True), ("bake bread", False)])
    targets = load_targets([str(folder)])
    settings = Settings(store_path=str(tmp_path / "store.sqlite"))
    end = SessionEnd(targets, [], settings, EndOptions(**kwargs))  # type: ignore[arg-type]
    target = targets[0]
    end.gathered.add_item("n0", target.skill.skill_md, 0, result("merge a.pdf", True, 0))
    end.gathered.add_item("n1", target.skill.skill_md, 1, result("bake bread", False, 0))
    return end


def test_the_report_files_and_the_gate(tmp_path: Path) -> None:
    outputs = Outputs(
        json_path=str(tmp_path / "out.json"),
        report_path=str(tmp_path / "p.html"),
        results_dir=str(tmp_path / "results"),
    )
    end = gathered_end(tmp_path, outputs=outputs, gates=Gates(min_accuracy=0.9))
    end.check_inputs()
    conclusion = end.finish(None, interrupted=False, log=print)
    assert conclusion.report.skills[0].summary.passed == 1
    assert conclusion.gate_failures == [
        "pdf-tools: queries passed 0.5 (1/2, 95% interval 0.09–0.91) is below "
        "--trigger-min-accuracy 0.9"
    ]
    data = json.loads((tmp_path / "out.json").read_text())
    assert [r["pass"] for r in data["skills"][0]["results"]] == [False, True]
    assert "merge a.pdf" in (tmp_path / "p.html").read_text()
    (stamped,) = (tmp_path / "results").iterdir()  # the items' results, without the rounds
    assert sorted(p.name for p in stamped.iterdir()) == ["report.html", "results.json"]
    assert json.loads((stamped / "results.json").read_text()) == data
    lines = [line.text for line in conclusion.terminal_lines()]
    assert lines[0] == "skill trigger summary" and lines[-1].startswith("GATE FAILED pdf-tools")


def settled(query: str, passed: bool, **more: object) -> dict[str, object]:
    return {"query": query, "pass": passed, "decided": True, **more}


def test_one_query_worse_is_not_a_regression_of_the_skill(tmp_path: Path) -> None:
    """A query whose settled verdict went from pass to fail is listed; alone it is no
    regression of the skill (the sign test's p is 0.5), so the gate holds."""
    baseline = tmp_path / "old.json"
    baseline.write_text(
        json.dumps(
            {
                "skills": [
                    {
                        "skill_name": "pdf-tools",
                        "results": [settled("merge a.pdf", True), settled("bake bread", True)],
                    }
                ]
            }
        )
    )
    gates = Gates(baseline_path=str(baseline), fail_on_regression=True)
    end = gathered_end(tmp_path, gates=gates)
    end.check_inputs()
    conclusion = end.finish(None, interrupted=False, log=print)
    assert conclusion.comparison is not None
    assert [(c.query, c.before, c.after) for c in conclusion.comparison.regressions] == [
        ("merge a.pdf", "pass", "fail")
    ]
    assert conclusion.gate_failures == []
    lines = [line.text for line in conclusion.terminal_lines()]
    assert "REGRESSED pdf-tools: 'merge a.pdf' (pass -> fail)" in lines
    assert any(
        line.endswith(
            "old.json: 2 queries of 1 skill(s) compared, 1 regressed, 0 improved, 0 "
            "changed within the noise"
        )
        for line in lines
    )
    assert (
        "pdf-tools: 1 query worse, 0 better against the baseline (sign test p = 0.5): not a "
        "regression at 95%, within the noise of the runs"
    ) in lines


def test_a_baseline_without_changes_says_what_it_read_and_compared(tmp_path: Path) -> None:
    """Nothing changed: one line still says which file was read and what was compared."""
    baseline = tmp_path / "old.json"
    rows = [settled("merge a.pdf", False), settled("bake bread", True), settled("gone", True)]
    baseline.write_text(json.dumps({"skills": [{"skill_name": "pdf-tools", "results": rows}]}))
    end = gathered_end(tmp_path, gates=Gates(baseline_path=str(baseline)))
    end.check_inputs()
    conclusion = end.finish(None, interrupted=False, log=print)
    lines = [line.text for line in conclusion.terminal_lines()]
    assert lines[-1].startswith("baseline ") and lines[-1].endswith(
        "old.json: 2 queries of 1 skill(s) compared, no verdict changed "
        "(1 only in the baseline, not compared)"
    )


def test_a_paired_test_decides_when_a_skill_regressed() -> None:
    from pytest_skilltrigger.reports.analysis import compare, verdicts_of_json

    queries = [f"q{n}" for n in range(8)]
    before = {"skills": [{"skill_name": "s", "results": [settled(q, True) for q in queries]}]}
    # five settled passes now settle as fails: p = 1/32 < 0.05; one goes borderline (noise),
    # one errors (noise), one holds
    after_rows = [settled(q, False) for q in queries[:5]]
    after_rows += [
        {"query": "q5", "pass": False, "decided": False, "borderline": True},
        {"query": "q6", "pass": None, "errors": 1},
        settled("q7", True),
    ]
    after = {"skills": [{"skill_name": "s", "results": after_rows}]}
    comparison = compare(verdicts_of_json(before), verdicts_of_json(after))
    (skill,) = comparison.skills
    assert len(skill.regressed) == 5 and skill.p_value == pytest.approx(1 / 32)
    assert skill.significant and comparison.regressed_skills == [skill]
    assert [(c.query, c.after) for c in comparison.noise] == [("q5", "borderline"), ("q6", "error")]
    assert skill.line(0.95) == (
        "s: regressed against the baseline: 5 queries worse, 0 better (sign test p = 0.0312, "
        "below 0.05)"
    )
    # four worse and one better is chance at 95% (p = 6/32)
    old = [settled(q, n != 7) for n, q in enumerate(queries)]
    new = [settled(q, n not in range(4)) for n, q in enumerate(queries)]
    mixed = compare(
        verdicts_of_json({"skills": [{"skill_name": "s", "results": old}]}),
        verdicts_of_json({"skills": [{"skill_name": "s", "results": new}]}),
    )
    (skill,) = mixed.skills
    assert (len(skill.regressed), len(skill.improved)) == (4, 1)
    assert skill.p_value == pytest.approx(6 / 32) and not skill.significant


@pytest.mark.parametrize(
    "kwargs,problem",
    [
        ({"outputs": "json_is_folder"}, "is a folder"),
        ({"gates": Gates(baseline_path="/nonexistent/old.json")}, "cannot read baseline"),
        ({"optimizer": OptimizerSettings(holdout=0.9)}, "leaves no"),
    ],
)
def test_bad_input_is_refused_before_any_call(tmp_path: Path, kwargs: dict, problem: str) -> None:
    if kwargs.get("outputs") == "json_is_folder":
        kwargs = {"outputs": Outputs(json_path=str(tmp_path))}
    end = gathered_end(tmp_path, **kwargs)
    with pytest.raises(InputError, match=problem):
        end.check_inputs()
    assert not (tmp_path / "store.sqlite").exists()  # nothing made before the inputs hold


def test_a_plain_run_keeps_the_items_results_in_the_results_folder(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these two PDFs into one", True)])
    result = pytester.runpytest(
        f"--trigger-skill-path={folder}",
        "-p",
        "no:cacheprovider",
        "--trigger-cache=off",
        "--trigger-results-dir=results",
    )
    assert result.ret in (0, 1)  # whatever the fake decided, the files say it
    (stamped,) = (pytester.path / "results").iterdir()
    data = json.loads((stamped / "results.json").read_text())
    assert data["skills"][0]["results"][0]["query"] == "merge these two PDFs into one"
    assert "merge these two PDFs into one" in (stamped / "report.html").read_text()
