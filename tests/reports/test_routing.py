"""The routing table of a folder of skills: built from the runs already made, it must add up
to what the server answered, and name whose queries each skill takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

SCRIPTS = {
    "xlsx": [
        ("sum column b of sales.xlsx", True, ["skill:pdf", "skill:pdf", "skill:xlsx"]),
        ("add a pivot table to the workbook", True, ["skill:xlsx"] * 3),
        ("chart the totals in budget.xlsx", True, ["skill:pdf", "text", "skill:pdf"]),
        ("what is the capital of peru", False, ["text"] * 3),
    ],
    "pdf": [
        ("merge these two pdf files", True, ["skill:pdf"] * 3),
        ("split the report into pages", True, ["skill:xlsx", "skill:pdf", "skill:pdf"]),
        ("run the unit tests", False, ["tool:Bash"] * 3),
    ],
}


def make_folder(root: Path, api: FakeMessagesAPI) -> Path:
    folder = root / "skills"
    for name, rows in SCRIPTS.items():
        (folder / name / "evals").mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Work with {name} files.\n---\n# {name}\n"
        )
        data = [{"query": q, "should_trigger": s} for q, s, _ in rows]
        (folder / name / "evals" / "trigger-eval.json").write_text(json.dumps(data))
        for query, _should, outcomes in rows:
            api.script(query, outcomes)
    return folder


def test_the_table_adds_up_to_the_servers_answers_and_names_the_clashes(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_folder(pytester.path, fake_api)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}", "--no-early-stop", "-n", "2")
    )
    assert result.ret == 1  # some queries were taken by the sibling
    (table,) = json.loads(out.read_text())["routing"]
    assert table["folder"] == str(folder) and table["skills"] == ["pdf", "xlsx"]
    assert table["columns"][:2] == ["skill:pdf", "skill:xlsx"]
    # every run the server answered is in exactly one cell
    totals: dict[str, int] = {}
    for row in table["rows"]:
        for choice, count in row["chosen"].items():
            totals[choice] = totals.get(choice, 0) + count
    assert totals == fake_api.stats["decisions"]
    rows = {(r["skill"], r["should_trigger"]): r for r in table["rows"]}
    assert rows[("xlsx", True)]["chosen"] == {"skill:pdf": 4, "skill:xlsx": 4, "text": 1}
    assert rows[("xlsx", True)]["queries"] == 3 and rows[("xlsx", True)]["runs"] == 9
    assert [c["text"] for c in table["clashes"]] == [
        "pdf took 4 of 6 runs of 2 xlsx queries",
        "xlsx took 1 of 3 runs of 1 pdf query",
    ]
    result.stdout.fnmatch_lines([f"routing in {folder}: pdf took 4 of 6 runs of 2 xlsx queries"])
    markdown = summary.read_text()
    assert "| queries of | kind | pdf | xlsx |" in markdown
    assert "| xlsx | should trigger | 4 | 4 |" in markdown
