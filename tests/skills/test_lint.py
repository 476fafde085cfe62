"""The eval sets' lint, one rule at a time on sets written the way real ones are, and the
session around it: warnings with the file and line, errors for CI, the JSON, no call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.skills.evalset import load_eval_set
from pytest_skilltrigger.skills.lint import LintedSkill, lint_sets
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

GOOD = [
    {"query": "convert this invoice scan into an editable spreadsheet", "should_trigger": True},
    {"query": "what is the weather like in Lisbon in May", "should_trigger": False},
]


def findings(tmp_path: Path, rows: list[dict[str, Any]], names: tuple[str, ...] = ("csv-tidy",)):
    path = tmp_path / f"{names[0]}.json"
    path.write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    skill = LintedSkill(names, load_eval_set(path), str(tmp_path))
    return lint_sets([skill])


def test_a_clean_set_has_no_finding(tmp_path: Path) -> None:
    assert findings(tmp_path, GOOD) == []


def test_a_query_naming_the_skill_leaks_the_answer(tmp_path: Path) -> None:
    rows = [*GOOD, {"query": "use csv-tidy on leads.csv please", "should_trigger": True}]
    (found,) = findings(tmp_path, rows)
    assert found.rule == "leak" and found.line == 4 and "csv-tidy" in found.message


def test_an_ordinary_word_or_phrase_is_no_leak(tmp_path: Path) -> None:
    rows = [*GOOD, {"query": "write the release notes for v2", "should_trigger": True}]
    assert findings(tmp_path, rows, ("release-notes",)) == []
    assert (
        findings(tmp_path, [*GOOD, {"query": "merge pdf files", "should_trigger": True}], ("pdf",))
        == []
    )


@pytest.mark.parametrize(
    "query",
    [
        "use the pdf skill to merge these",
        "Run the PDF skill on both files",
        "pdf skill: merge a.pdf and b.pdf",
        "merge them with the skill called pdf",
        "merge these with /pdf",
        "do it with $pdf please",
        "the pdf's skill should merge these",
    ],
)
def test_a_name_written_as_the_skill_is_a_leak_whatever_its_shape(
    tmp_path: Path, query: str
) -> None:
    """A one-word name is a domain word (``merge pdf files`` is no leak) until the query
    writes it as the skill: ``the pdf skill``, ``pdf skill``, ``/pdf``, ``$pdf``."""
    (found,) = findings(tmp_path, [*GOOD, {"query": query, "should_trigger": True}], ("pdf",))
    assert found.rule == "leak" and "'pdf'" in found.message


def test_near_duplicates_and_a_query_on_both_sides(tmp_path: Path) -> None:
    rows = [
        *GOOD,
        {
            "query": "Convert this invoice scan into an editable spreadsheet!",
            "should_trigger": True,
        },
        {"query": "what is the weather like in  Lisbon in May?", "should_trigger": True},
    ]
    rules = [(f.rule, f.line) for f in findings(tmp_path, rows)]
    assert rules == [("near-duplicate", 4), ("both-sides", 5)]


def test_a_slash_command_measures_nothing(tmp_path: Path) -> None:
    rows = [*GOOD, {"query": "/csv-tidy leads.csv", "should_trigger": True}]
    assert "slash-command" in {f.rule for f in findings(tmp_path, rows)}


def test_a_very_long_query(tmp_path: Path) -> None:
    rows = [*GOOD, {"query": "tidy this table: " + "a,b,c\n" * 900, "should_trigger": True}]
    assert [f.rule for f in findings(tmp_path, rows)] == ["long-query"]


def test_a_one_sided_set(tmp_path: Path) -> None:
    rows = [GOOD[0], {"query": "clean the header row of sales.csv", "should_trigger": True}]
    (found,) = findings(tmp_path, rows)
    assert found.rule == "one-sided" and found.line is None and "should-not" in found.message


def test_a_split_with_an_empty_side(tmp_path: Path) -> None:
    path = tmp_path / "set.json"
    path.write_text(json.dumps(GOOD))
    skill = LintedSkill(("csv-tidy",), load_eval_set(path), str(tmp_path))
    (found,) = lint_sets([skill], split=lambda entries: "the test side has no positive")
    assert found.rule == "split"


def test_two_skills_of_a_folder_expecting_one_query(tmp_path: Path) -> None:
    shared = {"query": "plot monthly signups from this csv", "should_trigger": True}
    sets = []
    for name in ("csv-tidy", "chart-maker"):
        path = tmp_path / f"{name}.json"
        own = [{"query": f"a request only {name} answers", "should_trigger": True}, GOOD[1]]
        path.write_text(json.dumps([*own, shared]))
        sets.append(LintedSkill((name,), load_eval_set(path), "skills"))
    (found,) = [f for f in lint_sets(sets) if f.rule == "routing-clash"]
    assert "csv-tidy" in found.message and found.path.endswith("chart-maker.json")


def make_project(root: Path, rows: list[dict[str, Any]]) -> Path:
    folder = root / "skills" / "csv-tidy"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: csv-tidy\ndescription: Tidy CSV files.\n---\nx\n")
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(rows, indent=1))
    return folder.parent


def test_the_session_warns_lists_and_errors_for_ci(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    rows = [*GOOD, {"query": "run csv-tidy on leads.csv", "should_trigger": True}]
    skills = make_project(pytester.path, rows)
    out = pytester.path / "out.json"
    warned = pytester.runpytest_subprocess(*plugin_args(skills, f"--trigger-json={out}"))
    warned.stdout.fnmatch_lines(
        ["*trigger-eval.json*line 11: entry [[]02[]] names the skill*[[]leak[]]*"]
    )
    warned.stdout.fnmatch_lines(
        [
            "*the eval sets' lint found 1 problem(s):*",
            "*trigger-eval.json:11: entry [[]02[]]*[[]leak[]]",
        ]
    )
    assert [f["rule"] for f in json.loads(out.read_text())["lint"]] == ["leak"]
    calls = fake_api.stats["calls"]
    stopped = pytester.runpytest_subprocess(*plugin_args(skills, "--trigger-lint=error"))
    assert stopped.ret == pytest.ExitCode.USAGE_ERROR
    stopped.stderr.fnmatch_lines(
        ["*trigger-eval.json:11: entry [[]02[]] names the skill*[[]leak[]]*"]
    )
    assert fake_api.stats["calls"] == calls  # no call
    evals = skills / "csv-tidy" / "evals" / "trigger-eval.json"
    rows = json.loads(evals.read_text())
    rows += [
        {"query": "use the csv-tidy skill on these", "should_trigger": True},
        {"query": "/csv-tidy clean leads.csv", "should_trigger": True},
    ]
    evals.write_text(json.dumps(rows, indent=1))
    every = pytester.runpytest_subprocess(*plugin_args(skills, "--trigger-lint=error"))
    (line,) = [x for x in every.stderr.lines if x.startswith("ERROR:")]
    assert line.count("[leak]") == 3 and "[slash-command]" in line  # every finding, one line
    quiet = pytester.runpytest_subprocess(*plugin_args(skills, "--trigger-lint=off"))
    assert "[leak]" not in quiet.stdout.str()
