"""pytest-html integration: the trigger columns, the per-test extras, and escaping.

Why end to end through pytest-html itself: its cells are raw HTML strings, its html extras are
inserted as markup by the page's script, and its row data travels as a JSON blob inside an
attribute. Only a real report shows whether a hostile query stays text all the way through.
"""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.plugin.html import HtmlColumns, extra_html, extra_payload
from tests.fake_messages_api import FakeMessagesAPI

SKILL = "csv-tidy"
DESCRIPTION = "Clean and repair messy CSV files. Use when the user wants a data file tidied."
Q_YES = "please fix the broken delimiters in orders.csv"
Q_NO = "draw a pie chart of market share"
Q_HOSTILE = "<script>alert(1)</script> tidy leads.csv"


class Page(HTMLParser):
    """Start tags with attributes, plus the decoded pytest-html data blob."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.blob: dict[str, Any] = {}
        self.headers: list[str] = []
        self._in_th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.tags.append((tag, found))
        if found.get("data-jsonblob"):
            self.blob = json.loads(found["data-jsonblob"] or "{}")
        if tag == "th":
            self._in_th = True
            self.headers.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "th":
            self._in_th = False

    def handle_data(self, data: str) -> None:
        if self._in_th:
            self.headers[-1] += data


def make_project(pytester: pytest.Pytester, api: FakeMessagesAPI) -> Path:
    api.script(Q_YES, [f"skill:{SKILL}", f"skill:{SKILL}", "text"])
    api.script(Q_NO, ["text", "tool:Bash", "text"])
    api.script(Q_HOSTILE, [f"skill:{SKILL}"])
    folder = pytester.path / "skills" / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {SKILL}\ndescription: {DESCRIPTION}\n---\n# {SKILL}\n\nBody.\n", "utf-8"
    )
    entries = [
        {"query": Q_YES, "should_trigger": True},
        {"query": Q_NO, "should_trigger": False, "category": "<b>near-miss</b>"},
        {"query": Q_HOSTILE, "should_trigger": True},
    ]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(entries), "utf-8")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    # a user's own extra must survive ours
    pytester.makeconftest(
        """
import pytest
from pytest_html import extras

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        report.extras = [*getattr(report, "extras", []), extras.text("mine", name="user-extra")]
    return report
"""
    )
    return folder.parent


def run_report(
    pytester: pytest.Pytester, api: FakeMessagesAPI, *more: str, subprocess: bool = False
) -> Page:
    """Run the project with a pytest-html report (in a child process with ``subprocess``)."""
    skills = make_project(pytester, api)
    runpytest = pytester.runpytest_subprocess if subprocess else pytester.runpytest
    result = runpytest(
        "-p",
        "no:cacheprovider",
        "test_plain.py",
        f"--trigger-skill-path={skills}",
        "--html",
        "report.html",
        "--self-contained-html",
        "--trigger-no-early-stop",
        *more,
    )
    result.assert_outcomes(passed=4)
    text = (pytester.path / "report.html").read_text("utf-8")
    assert "<script>alert" not in text
    page = Page()
    page.feed(text)
    page.close()
    page.raw = text  # type: ignore[attr-defined]
    return page


def rows_by_name(page: Page) -> dict[str, dict[str, Any]]:
    """Test name -> its (call) row data from the pytest-html blob."""
    out = {}
    for nodeid, entries in page.blob["tests"].items():
        out[nodeid.rsplit("::", 1)[-1]] = entries[-1]
    return out


def by_index(rows: dict[str, dict[str, Any]], index: int) -> dict[str, Any]:
    """The row of the eval entry at ``index`` (ids are ``<skill>[<index>-<slug>]``)."""
    return next(v for k, v in rows.items() if k.startswith(f"{SKILL}[{index:02d}-"))


def cell(row: dict[str, Any], cls: str) -> str:
    for html_cell in row["resultsTableRow"]:
        if f'class="{cls}"' in html_cell:
            return html_cell.split(">", 1)[1].rsplit("</td>", 1)[0]
    raise AssertionError(f"no {cls} cell in {row['resultsTableRow']}")


def test_columns_extras_and_escaping(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    page = run_report(pytester, fake_api)
    headers = [h.strip() for h in page.headers]
    assert headers[:4] == ["Result", "Test", "Trigger rate", "Triggers/runs"]

    rows = rows_by_name(page)
    yes, no, hostile = (by_index(rows, i) for i in range(3))
    plain = rows["test_plain"]
    # column order in each row: result, test, rate, triggers/runs
    assert 'class="col-triggerRate"' in yes["resultsTableRow"][2]
    assert cell(yes, "col-triggerRate") == "0.67"
    assert cell(yes, "col-triggerRuns") == "2/3"
    assert cell(no, "col-triggerRate") == "0.00"
    assert cell(no, "col-triggerRuns") == "0/3"
    assert cell(hostile, "col-triggerRate") == "1.00"
    assert cell(plain, "col-triggerRate") == ""
    assert cell(plain, "col-triggerRuns") == ""
    assert len(plain["resultsTableRow"]) == len(yes["resultsTableRow"])
    assert yes["triggerRate"] == "0.67"  # sortable column data

    # extras: the html table (with the JSON in it, readable), and the user's own extra kept
    formats = [e["format_type"] for e in yes["extras"]]
    assert formats.count("html") == 1 and formats.count("json") == 0
    assert "user-extra" in [e["name"] for e in yes["extras"]]
    assert plain["extras"] == [e for e in plain["extras"] if e["name"] == "user-extra"]
    html_extra = next(e["content"] for e in yes["extras"] if e["format_type"] == "html")
    assert "skill 'csv-tidy' x2, a plain answer x1" in html.unescape(html_extra)
    assert "should trigger" in html_extra and Q_YES in html_extra
    assert "0.67 (2/3 runs" in html_extra
    no_extra = next(e["content"] for e in no["extras"] if e["format_type"] == "html")
    assert "&lt;b&gt;near-miss&lt;/b&gt;" in no_extra and "<b>" not in no_extra
    folded = no_extra.split("<pre>", 1)[1].split("</pre>", 1)[0]
    payload = json.loads(html.unescape(folded))
    assert payload["query"] == Q_NO and payload["should_trigger"] is False
    assert payload["chosen"] == {"text": 2, "tool:Bash": 1}
    assert (payload["triggers"], payload["runs"], payload["trigger_rate"]) == (0, 3, 0.0)

    # the hostile query: escaped in the extra, never markup anywhere in the page
    hostile_extra = next(e["content"] for e in hostile["extras"] if e["format_type"] == "html")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile_extra
    assert "<script>" not in hostile_extra
    # pytest-html's own template has img/onclick; nothing of ours may add to them
    values = [
        f"{k}={v}" for _, attrs in page.tags for k, v in attrs.items() if k != "data-jsonblob"
    ]
    assert not [v for v in values if "alert" in v or v.startswith(("onerror", "onmouseover"))]
    inner = Page()  # what pytest-html's script will insert as markup
    inner.feed(hostile_extra)
    assert {t for t, _ in inner.tags} == {"table", "tr", "th", "td", "details", "summary", "pre"}
    scripts = [t for t, _ in page.tags if t == "script"]
    assert len(scripts) == page.raw.count("<script>")  # type: ignore[attr-defined]


def test_with_xdist(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    """Reports from workers carry user_properties as lists: the row hook must accept them."""
    page = run_report(pytester, fake_api, "-n", "2", subprocess=True)
    rows = rows_by_name(page)
    yes = by_index(rows, 0)
    assert cell(yes, "col-triggerRuns") == "2/3"
    assert any(e["format_type"] == "html" for e in yes["extras"])


def test_row_hook_unit(tmp_path: Path) -> None:
    """Cells stay aligned for any report (trigger item or not), and values are escaped."""
    from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
    from pytest_skilltrigger.model.verdict import FixedRule
    from pytest_skilltrigger.skills.catalog import load_targets

    skill = tmp_path / "s"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: s\ndescription: Does s things.\n---\nbody\n")
    (skill / "trigger-eval.json").write_text('[{"query": "q <i>", "should_trigger": true}]')
    target = load_targets([str(skill)])[0]
    result = QueryResult(
        "q <i>",
        True,
        FixedRule(2, 0.5),
        (RunOutcome("triggered", chosen="skill:s"), RunOutcome("not_triggered", chosen="text")),
    )

    class Report:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    hooks = HtmlColumns(lambda nodeid: (target, result) if nodeid == "item" else None)
    header = ["<th>Result</th>", "<th>Test</th>", "<th>Duration</th>", "<th>Links</th>"]
    hooks.pytest_html_results_table_header(header)
    assert len(header) == 7 and "Trigger rate" in header[2] and "Triggers/runs" in header[3]
    assert "Interval" in header[4]
    cells = ["<td>r</td>", "<td>t</td>", "<td>d</td>", "<td>l</td>"]
    hooks.pytest_html_results_table_row(Report("item"), cells)
    assert cells[2] == '<td class="col-triggerRate">0.50</td>'
    assert cells[3] == '<td class="col-triggerRuns">1/2</td>'
    assert cells[4] == '<td class="col-triggerInterval">0.09–0.91</td>'
    other = ["<td>r</td>", "<td>t</td>", "<td>d</td>", "<td>l</td>"]
    hooks.pytest_html_results_table_row(Report("other"), other)
    assert len(other) == 7 and other[2] == '<td class="col-triggerRate"></td>'
    assert "&lt;i&gt;" in extra_html(extra_payload(target, 0, result))
