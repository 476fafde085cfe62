"""The routing table of a folder of skills: built from the runs already made, it must add up
to what the server answered, and name whose queries each skill takes."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI, extract_query
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
        *plugin_args(folder, f"--trigger-json={out}", "--trigger-no-early-stop", "-n", "2")
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
    # every row, against the server's own log: the requests it got for each of the row's
    # queries, answered in script order
    asked = Counter(extract_query(body) for body in fake_api.requests)
    for name, scripted in SCRIPTS.items():
        for should in (True, False):
            mine = [(q, outcomes) for q, s, outcomes in scripted if s == should]
            answered = Counter(o for q, outcomes in mine for o in outcomes[: asked[q]])
            assert rows[(name, should)]["chosen"] == dict(answered), (name, should)
            assert rows[(name, should)]["runs"] == sum(asked[q] for q, _ in mine)
    assert rows[("xlsx", True)]["chosen"] == {"skill:pdf": 4, "skill:xlsx": 4, "text": 1}
    assert rows[("xlsx", True)]["queries"] == 3 and rows[("xlsx", True)]["runs"] == 9
    assert [c["text"] for c in table["clashes"]] == [
        "pdf took 4 of 6 runs of 2 xlsx queries",
        "xlsx took 1 of 3 runs of 1 pdf query",
    ]
    # (the folder as the person running pytest reads it: relative to where they are)
    result.stdout.fnmatch_lines(["routing in skills: pdf took 4 of 6 runs of 2 xlsx queries"])
    markdown = summary.read_text()
    assert "| queries of | kind | pdf | xlsx |" in markdown
    assert "| xlsx | should trigger | 4 | 4 |" in markdown


ROUTING = [
    {"query": "sum column b of sales.xlsx", "expected_skill": "xlsx"},
    {"query": "add a pivot table to the workbook", "expected_skill": "xlsx"},
    {"query": "merge these two pdf files", "expected_skill": "pdf"},
    {"query": "what is the capital of peru", "expected_skill": None},
]


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_routing_items_the_gate_and_their_place_in_the_table(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, workers: tuple[str, ...]
) -> None:
    folder = make_folder(pytester.path, fake_api)
    (folder / "evals").mkdir()
    (folder / "evals" / "routing-eval.json").write_text(json.dumps(ROUTING))
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(
            folder,
            f"--trigger-json={out}",
            "--trigger-no-early-stop",
            "-v",
            "--trigger-min-routing-accuracy=0.9",
            *workers,
        )
    )
    # the first routing entry: pdf is chosen in 2 of 3 runs, so xlsx does not reach 0.5;
    # with the routing gate set, that miss is an xfail (the gate decides)
    outcome = {
        line.split("::")[-1].split()[0]: word
        for line in result.outlines
        for word in ("PASSED", "XFAIL", "FAILED")
        if "routing-eval.json::" in line and word in line
    }
    assert outcome == {
        "routing[00-sum-column-b-of-sales-xlsx]": "XFAIL",
        "routing[01-add-a-pivot-table-to-the-workbook]": "PASSED",
        "routing[02-merge-these-two-pdf-files]": "PASSED",
        "routing[03-what-is-the-capital-of-peru]": "PASSED",
    }
    result.stdout.fnmatch_lines(
        [
            "*GATE FAILED routing in *skills: 0.6667 of routing items and should-trigger "
            "queries passed (6/9), below --trigger-min-routing-accuracy 0.9"
        ]
    )
    assert result.ret == 1
    (table,) = json.loads(out.read_text())["routing"]
    items = {i["query"]: i for i in table["items"]}
    assert items["sum column b of sales.xlsx"]["pass"] is False
    assert items["sum column b of sales.xlsx"]["chosen"] == {"skill:pdf": 2, "skill:xlsx": 1}
    assert items["what is the capital of peru"]["pass"] is True
    # 3 of 4 routing items and 3 of 5 should-trigger queries passed
    assert (table["passed"], table["decided"]) == (6, 9)


def test_the_failure_text_says_what_was_chosen(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_folder(pytester.path, fake_api)
    (folder / "routing-eval.json").write_text(json.dumps(ROUTING[:1]))
    result = pytester.runpytest_subprocess(*plugin_args(folder, "--trigger-no-early-stop"))
    result.stdout.fnmatch_lines(
        [
            "*expected 'xlsx' chosen first in at least 0.5 of the runs; over 3 runs the model "
            "chose: skill 'pdf' x2, skill 'xlsx' x1"
        ]
    )


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{"query": "q", "expected_skill": "docx"}],
            "entry [00]: names 'docx', which is no skill here (null, or one of: pdf, xlsx)",
        ),
        (
            [{"query": "q", "expected_skill": "pdf"}, {"query": " q ", "expected_skill": None}],
            "entry [01] repeats the query of entry [00]",
        ),
        ([{"query": "q"}], "entry [00]: has no should_trigger (true or false) or expected_skill"),
        ({"query": "q"}, "holds a single entry"),
        # raw text: the eval sets' own JSON checks
        (
            '[{"query": "q", "expected_skill": "pdf", "query": "r"}]',
            'entry [00]: key "query" appears twice',
        ),
        ("[" * 100_000 + "]" * 100_000, "not usable JSON: nested too deeply"),
        (" ", "the file is empty"),
    ],
)
def test_bad_routing_entries_are_usage_errors_before_any_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, entries: object, message: str
) -> None:
    folder = make_folder(pytester.path, fake_api)
    text = entries if isinstance(entries, str) else json.dumps(entries)
    (folder / "routing-eval.json").write_text(text)
    result = pytester.runpytest_subprocess(*plugin_args(folder))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    escaped = message.replace("[", "[[]")  # fnmatch reads brackets as a set
    result.stderr.fnmatch_lines([f"*routing-eval.json: {escaped}*"])
    assert "Traceback" not in result.stderr.str()
    assert fake_api.stats["calls"] == 0


def test_the_pytest_html_page_shows_the_routing_table_escaped(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_folder(pytester.path, fake_api)
    page = pytester.path / "page.html"
    pytester.runpytest_subprocess(*plugin_args(folder, f"--html={page}", "--trigger-no-early-stop"))
    html = page.read_text()
    assert "Routing in skills<" in html  # as the person who ran pytest reads it
    assert "pdf took 4 of 6 runs of 2 xlsx queries" in html


def test_the_routing_gate_and_table_show_when_only_routing_items_ran(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-k routing`` (or ``--lf`` after a routing failure) runs no trigger item: the gate's
    line, the routing lines and the step summary must still be there, not only the exit
    status."""
    folder = make_folder(pytester.path, fake_api)
    (folder / "routing-eval.json").write_text(json.dumps(ROUTING))
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest_subprocess(
        *plugin_args(
            folder, "--trigger-no-early-stop", "-k", "routing", "--trigger-min-routing-accuracy=0.9"
        )
    )
    result.assert_outcomes(passed=3, xfailed=1, deselected=7)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*skill trigger summary*",
            "routing in skills: routing items 3/4 passed, routing accuracy 0.75 "
            "(3/4 of routing items and should-trigger queries passed), 95% interval 0.30–0.95",
            "*GATE FAILED routing in skills: 0.75 of routing items*",
        ]
    )
    markdown = summary.read_text()
    assert "### Routing in skills" in markdown
    assert "Routing accuracy 0.75: 3/4 of routing items" in markdown
    assert "| sum column b of sales.xlsx | xlsx | skill 'pdf' x2, skill 'xlsx' x1 |" in markdown


def test_routing_items_stop_early_with_the_verdicts_of_every_run(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Exact early stopping holds for routing items: the verdicts are those of all runs, a
    named entry stops once the expected skill's share is settled, and so does a null entry
    once the folder's skills together (a run that chose any of them counts) cannot reach the
    threshold."""
    folder = make_folder(pytester.path, fake_api)
    (folder / "routing-eval.json").write_text(json.dumps(ROUTING))
    verdicts, asked = [], []
    for early in ((), ("--trigger-no-early-stop",)):
        for rows in SCRIPTS.values():  # the scripts from their start
            for query, _should, outcomes in rows:
                fake_api.script(query, outcomes)
        fake_api.requests.clear()
        out = pytester.path / "out.json"
        pytester.runpytest_subprocess(
            *plugin_args(
                folder, f"--trigger-json={out}", "-k", "routing", "--trigger-cache=off", *early
            )
        )
        (table,) = json.loads(out.read_text())["routing"]
        verdicts.append({i["query"]: i["pass"] for i in table["items"]})
        asked.append(Counter(extract_query(body) for body in fake_api.requests))
    assert verdicts[0] == verdicts[1]
    assert verdicts[0]["sum column b of sales.xlsx"] is False
    full, early_runs = asked[1], asked[0]
    assert all(full[e["query"]] == 3 for e in ROUTING)
    # xlsx, xlsx: two runs settle "at least half"; pdf, pdf: xlsx cannot reach it
    assert early_runs["add a pivot table to the workbook"] == 2
    assert early_runs["sum column b of sales.xlsx"] == 2
    assert early_runs["what is the capital of peru"] == 2


def test_a_plain_run_writes_its_trigger_report_page_with_the_routing_table(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Without --trigger-optimize, --trigger-report is the items' page: each skill's
    summary and queries, and the folder's table (it used to be silently ignored)."""
    folder = make_folder(pytester.path, fake_api)
    page = pytester.path / "out" / "page.html"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-report={page}", "--trigger-no-early-stop")
    )
    assert result.ret == 1
    html = page.read_text()
    assert "Routing in skills<" in html  # as the person who ran pytest reads it
    assert "pdf took 4 of 6 runs of 2 xlsx queries" in html
    assert "sum column b of sales.xlsx" in html and "merge these two pdf files" in html
    assert "<script" not in html


def test_a_trigger_report_that_cannot_be_written_is_a_usage_error_also_in_a_plain_run(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_folder(pytester.path, fake_api)
    blocker = pytester.path / "blocker"
    blocker.write_text("a file, not a folder")
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-report={blocker}/page.html")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{blocker}/page.html: cannot be created*(--trigger-report)*"])
    assert fake_api.stats["calls"] == 0


def test_a_sibling_left_out_of_the_run_is_headed_as_the_folders_skill(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With only xlsx's items selected (-k), pdf is still a skill of the folder: the model
    choosing it for an xlsx query heads a 'pdf' column, never 'other skill pdf' (the label
    for a built-in the folder does not hold)."""
    folder = make_folder(pytester.path, fake_api)
    (folder / "routing-eval.json").write_text(json.dumps(ROUTING[:2]))
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = pytester.path / "out.json"
    pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}", "--trigger-no-early-stop", "-k", "xlsx")
    )
    (table,) = json.loads(out.read_text())["routing"]
    assert table["skills"] == ["xlsx"] and table["folder_skills"] == ["pdf", "xlsx"]
    markdown = summary.read_text()
    assert "| queries of | kind | xlsx | pdf |" in markdown
    assert "other skill" not in markdown
