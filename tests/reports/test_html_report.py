"""The optimizer's HTML report: structure, offline-ness, refresh, and hostile input.

Why so much about escaping: queries come from eval files anyone can contribute to, and
descriptions are written by a model; the report is opened in a browser, so any of them
turning into markup would be script injection into the user's machine.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.reports.html_report import render_html

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</td></tr></table>",
    "' onmouseover='x",
    "&amp;",
]


def row(
    query: str,
    should: bool,
    triggers: int,
    runs: int = 3,
    passed: bool | None = True,
    **more: Any,
) -> dict[str, Any]:
    base = {
        "query": query,
        "should_trigger": should,
        "trigger_rate": round(triggers / runs, 4) if runs else 0.0,
        "triggers": triggers,
        "runs": runs,
        "pass": passed,
        "errors": 0,
        "error": None,
        "skipped": None,
        "chosen": {"skill:demo": triggers, "text": runs - triggers} if runs else {},
    }
    base.update(more)
    return base


def make_skill(text: str = "plain") -> dict[str, Any]:
    """Two iterations, 3 train + 2 test queries; every user field carries ``text``."""

    def iteration(n: int, description: str, good: bool) -> dict[str, Any]:
        train = [
            row(f"train one {text}", True, 3, extra={f"cat {text}": f"val {text}"}),
            row(f"train two {text}", False, 2 if not good else 0, passed=good),
            row(
                f"train three {text}",
                True,
                0,
                runs=2,
                passed=None,
                errors=1,
                error=f"boom {text}",
                chosen={f"tool:{text}": 2},
            ),
        ]
        test = [
            row(f"test one {text}", True, 2 if good else 1, passed=good),
            row(f"test two {text}", False, 0, runs=0, passed=None, skipped=f"budget {text}"),
        ]
        return {
            "iteration": n,
            "description": description,
            "train_passed": sum(1 for r in train if r["pass"]),
            "train_failed": sum(1 for r in train if r["pass"] is False),
            "train_total": len(train),
            "test_passed": sum(1 for r in test if r["pass"]),
            "test_total": len(test),
            "train_results": train,
            "test_results": test,
            "status": "evaluated",
            "note": f"note {text}",
        }

    return {
        "skill_name": f"demo {text}",
        "skill_path": f"/skills/{text}/demo",
        "original_description": f"original {text}",
        "best_description": f"better {text}",
        "best_iteration": 2,
        "exit_reason": f"max_iterations (2) {text}",
        "holdout": 0.4,
        "train_size": 3,
        "test_size": 2,
        "interrupted": False,
        "history": [iteration(1, f"original {text}", False), iteration(2, f"better {text}", True)],
    }


class Tags(HTMLParser):
    """Collects start tags with their attributes, and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    def tags_of(self, tag: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag]

    def with_class(self, tag: str, cls: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


def parse(page: str) -> Tags:
    parser = Tags()
    parser.feed(page)
    parser.close()
    return parser


def test_structure_rows_columns_and_best() -> None:
    page = render_html([make_skill()], running=False)
    tags = parse(page)
    body_rows = [a for t, a in tags.tags if t == "tr"]
    assert len(body_rows) == 2 + 2  # two header rows + one per iteration
    assert len(tags.with_class("th", "q")) == 5
    assert len(tags.with_class("th", "train")) == 3
    assert len(tags.with_class("th", "test")) == 2
    assert len(tags.with_class("th", "group-train")) == 1
    assert len(tags.with_class("th", "group-test")) == 1
    assert len(tags.with_class("td", "cell")) == 2 * 5
    assert len(tags.with_class("td", "train")) == 2 * 3
    assert len(tags.with_class("td", "test")) == 2 * 2
    best = tags.with_class("tr", "best")
    assert len(best) == 1
    assert ">best</span>" in page
    # should-trigger vs should-not badges, and the full query in the title
    assert page.count("✓ should trigger") == 3
    assert page.count("✗ should not") == 2
    assert any(
        (a.get("title") or "").startswith("train one plain") for a in tags.with_class("th", "q")
    )
    # scores and rates
    assert '<td class="score">1/3</td>' in page and '<td class="score">2/3</td>' in page
    assert "0.67" in page and "2/3" in page
    # outcomes told apart
    for kind in ("pass", "fail", "error", "skipped"):
        assert tags.with_class("td", kind), kind
    assert "boom plain" in page  # the error message, in the cell's title
    assert "original plain" in page and "better plain" in page
    assert "max_iterations (2) plain" in page


def test_refresh_only_while_running() -> None:
    running = render_html([make_skill()], running=True)
    done = render_html([make_skill()], running=False)
    assert '<meta http-equiv="refresh" content="5">' in running
    assert "refresh" not in done
    assert [a for t, a in parse(done).tags if t == "meta" and "http-equiv" in a] == []


def test_no_external_resources() -> None:
    page = render_html([make_skill()], running=True)
    for needle in ("http://", "https://", "@import", "url("):
        assert needle not in page, needle
    tags = parse(page)
    for tag, attrs in tags.tags:
        assert tag not in ("script", "link", "img", "iframe"), tag
        for key in ("src", "href"):
            assert key not in attrs, (tag, attrs)


def test_missing_keys_and_no_test_set() -> None:
    only_evaluated = {
        "skill_name": "lone",
        "history": [{"iteration": 1, "description": "d", "train_results": [row("q", True, 3)]}],
    }
    interrupted = {"skill_name": "cut", "interrupted": True, "history": []}
    invalid = make_skill()
    invalid["history"].append(
        {"iteration": 3, "description": "x" * 1100, "status": "invalid", "note": "too long"}
    )
    invalid["best_iteration"] = None
    invalid["holdout"] = 0
    page = render_html([only_evaluated, interrupted, invalid, {}], running=False)
    tags = parse(page)
    assert "No iteration has finished yet." in page
    assert ">invalid</span>" in page
    assert not tags.with_class("tr", "best")
    # the invalid row keeps the column count: empty cells, not missing ones
    assert len(tags.with_class("td", "none")) == 5
    assert render_html([], running=True).count("No skill") == 1


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_stay_text(hostile: str) -> None:
    baseline = parse(render_html([make_skill("plain")], running=False, title="plain"))
    page = render_html([make_skill(hostile)], running=False, title=hostile)
    tags = parse(page)
    for tag, attrs in tags.tags:
        assert tag not in ("script", "img", "iframe"), tag
        assert not [k for k in attrs if k.startswith("on")], (tag, attrs)
    for tag in ("tr", "td", "th", "table", "section"):
        assert tags.count(tag) == baseline.count(tag), tag
    assert [t for t, _ in tags.tags] == [t for t, _ in baseline.tags]
    # the value still reaches the reader intact, as text
    assert any(hostile in chunk for chunk in tags.text)
    assert "<script>alert" not in page


def find_chromium() -> str:
    """Debian's Chromium, which ``.ci/run`` installs; a skip with the reason elsewhere."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("Chromium is not installed here (.ci/run installs Debian's chromium)")
    return found


def headless(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def png_size_and_colours(data: bytes) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the pixel data) of a PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_a_real_browser_renders_the_report_with_user_text_as_text(tmp_path: Path) -> None:
    """Chromium, headless and offline: the page renders (a screenshot of the requested size
    with content in it), and in the DOM it builds a hostile skill name is text, not markup."""
    chromium = find_chromium()
    page = tmp_path / "report.html"
    hostile = "<b>x</b><script>alert(1)</script>"
    page.write_text(render_html([make_skill(), make_skill(hostile)], running=False), "utf-8")
    shot = tmp_path / "shot.png"
    headless(chromium, f"--screenshot={shot}", "--window-size=1400,900", page.as_uri())
    width, height, colours = png_size_and_colours(shot.read_bytes())
    assert (width, height) == (1400, 900)
    assert colours > 8  # not a blank page
    dom = headless(chromium, "--dump-dom", page.as_uri()).stdout
    assert "&lt;b&gt;x&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<b>x</b>" not in dom and "<script>alert(1)" not in dom


def routing_table(chosen: dict[str, int]) -> dict[str, Any]:
    """A folder of pdf and sheets whose sheets queries went to ``chosen``, as the JSON and the
    pages get it (``RoutingTable.to_dict``)."""
    from pytest_skilltrigger.reports.routing_table import RoutingRow, RoutingTable

    row = RoutingRow("sheets", True, queries=2, runs=sum(chosen.values()), chosen=chosen)
    return RoutingTable("/skills", ["pdf", "sheets"], [row], []).to_dict()


def test_a_skill_that_is_not_the_folders_is_headed_other_skill() -> None:
    """A built-in competitor of the listing (charts, review) chosen for a folder's queries is
    not one of the project's skills, and its column must not read like one."""
    from pytest_skilltrigger.reports.html_report import routing_section
    from pytest_skilltrigger.reports.routing_table import choice_label

    chosen = {"skill:sheets": 2, "skill:charts": 3, "skill:review": 1, "text": 1, "tool:Bash": 1}
    headings = re.findall(r"<th>(.*?)</th>", routing_section(routing_table(chosen)))
    assert headings == [
        "queries of", "kind", "pdf", "sheets", "other skill charts", "other skill review",
        "plain answer", "tool Bash", "errors", "sheets",  # the last: the row's own heading
    ]  # fmt: skip
    assert choice_label("skill:charts", ["pdf"]) == "other skill charts"
    assert choice_label("skill:pdf", ["pdf"]) == "pdf"
    assert choice_label("skill:charts") == "charts"  # a caller that does not know the folder


def in_folder(text: str = "plain") -> dict[str, Any]:
    """``make_skill`` as a skill of a folder: iteration 2 has the most test passes but takes
    its siblings' queries (refused), so the start is the best; a third candidate won the
    rounds but lost the folder when measured again on fresh runs."""
    skill = make_skill(text)
    for entry in skill["history"]:
        entry["folder_score"] = "5/9"
        entry["skill_scores"] = {f"demo {text}": "2/5", f"sibling {text}": "3/4"}
    skill["best_iteration"] = 1
    skill["refused_for_folder"] = [2]
    skill["confirmation"] = {
        "best_iteration": 1, "on": "test", "lead_holds": True, "folder_holds": False,
        "complete": True, "folder_start_score": "5/8", "folder_best_score": "4/8",
        "verdict": f"lost the folder {text}",
    }  # fmt: skip
    return skill


@pytest.mark.parametrize("hostile", ["plain", *HOSTILE])
def test_a_candidate_refused_for_the_folder_is_marked_and_explained(hostile: str) -> None:
    page = render_html([in_folder(hostile)], running=False)
    tags = parse(page)
    refused = tags.with_class("tr", "refused")
    assert len(refused) == 1 and len(tags.with_class("tr", "best")) == 1
    text = "".join(tags.text)
    assert "refused: takes more of its siblings' queries than it gains" in text
    assert (
        f"Iteration 2 did better on demo {hostile}'s own queries than the best but was "
        "refused: it takes more of its siblings' queries than it gains"
    ) in text
    assert (
        "Not written: measured again on fresh runs, the best (iteration 1) passes fewer of the "
        "folder's queries than the start (4/8 with it, 5/8 with the start), though its lead on "
        "its own queries held: it takes more of its siblings' queries than it gains."
    ) in text
    assert "most test passes among candidates that do not lose the folder" in text
    assert len(tags.with_class("p", "folder-warning")) == 2
    for tag, attrs in tags.tags:
        assert tag not in ("script", "img", "iframe"), tag
        assert not [k for k in attrs if k.startswith("on")], (tag, attrs)


def test_no_folder_line_without_a_folder_or_when_fresh_runs_errored() -> None:
    """A skill alone: a confirmation whose best fell behind has folder_holds false too (the
    folder is then the skill's own queries), but there is no folder to speak of; and errored
    fresh runs judge nothing (an error is never a miss)."""
    alone = make_skill()
    alone["confirmation"] = {"best_iteration": 2, "lead_holds": False, "folder_holds": False,
                             "complete": True}  # fmt: skip
    errored = in_folder()
    errored["refused_for_folder"] = []
    errored["confirmation"]["complete"] = False
    for skill in (alone, errored):
        page = render_html([skill], running=False)
        assert 'class="folder-warning"' not in page
        assert not parse(page).with_class("tr", "refused")


# a query that would be markup, an attribute break-out and an entity, all at once
NASTY = "<script>alert(\"x\")</script> & 'q' \"><img src=x onerror=alert(1)>"


def plain_run(root: Path) -> Any:
    """A plain run's typed report: two skills of one folder; demo's queries are a miss (the
    nasty one, taken by a built-in), a pass, an error and a pass, in eval-file order."""
    from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, Usage
    from pytest_skilltrigger.model.prices import Spend
    from pytest_skilltrigger.reports.routing_table import routing_tables
    from pytest_skilltrigger.reports.session_report import build_report
    from pytest_skilltrigger.reports.summary import SessionResults
    from pytest_skilltrigger.skills.catalog import load_targets

    demo = [(NASTY, True), ("tidy the sheet", True), ("sort the rows", True), ("bake", False)]
    for name, entries in (("demo", demo), ("other", [("read a pdf", True)])):
        (root / name / "evals").mkdir(parents=True)
        description = json.dumps(f"Sheets & <b>tables</b> for {name}")  # JSON is YAML
        skill_md = f"---\nname: {name}\ndescription: {description}\n---\n"
        (root / name / "SKILL.md").write_text(skill_md)
        rows = [{"query": q, "should_trigger": s, "tag": f"tag {q}"} for q, s in entries]
        (root / name / "evals" / "trigger-eval.json").write_text(json.dumps(rows))
    usage = Usage(input_tokens=1000, output_tokens=100)

    def runs(owner: str, *chosen: str) -> tuple[RunOutcome, ...]:
        return tuple(
            RunOutcome("triggered" if c == f"skill:{owner}" else "not_triggered",
                       chosen=c, usage=usage, model="claude-sonnet-5")
            for c in chosen
        )  # fmt: skip

    outcomes = {
        "demo": [
            runs("demo", "skill:charts", "skill:charts", "text"),
            runs("demo", "skill:demo", "skill:demo", "skill:demo"),
            (RunOutcome("error", error="boom <b>&amp;</b>"),),
            runs("demo", "text", "text", "text"),
        ],
        "other": [runs("other", "skill:other", "skill:other")],
    }
    results = SessionResults()
    for target in load_targets([str(root)]):
        mine = outcomes[target.name]
        for entry, these in zip(target.eval_set.entries, mine, strict=True):
            results.add(target, entry.index,
                        QueryResult(entry.query, entry.should_trigger, 3, 0.5, these))  # fmt: skip
    return build_report(
        results, backend="api", model="claude-sonnet-5", runs_per_query=3, threshold=0.5,
        routing=routing_tables(results.ordered()), spending={"items": Spend(12, usage, 0.0331)},
    )  # fmt: skip


def test_a_plain_runs_page_has_every_skills_counts_and_its_queries_failing_first(
    tmp_path: Path,
) -> None:
    from pytest_skilltrigger.reports.html_report import render_results_html

    page = render_results_html(plain_run(tmp_path / "skills"))
    tags = parse(page)
    text = "".join(tags.text)
    # nothing user-supplied became markup, and all of it reached the reader as text
    for tag, attrs in tags.tags:
        assert tag not in ("script", "img", "iframe", "link"), tag
        assert not [k for k in attrs if k.startswith("on") or k in ("src", "href")], attrs
    assert "<script>" not in page and "&lt;script&gt;alert(&quot;x&quot;)" in page
    assert "<b>tables" not in page
    assert "&amp; &#x27;q&#x27; &quot;&gt;&lt;img" in page
    assert NASTY in text and "boom <b>&amp;</b>" in text
    assert f"tag: tag {NASTY}" in [a.get("title") for a in tags.tags_of("td")]  # its extra
    # each skill: its path, the line Claude Code lists, its summary
    assert len(tags.with_class("section", "skill")) == 2
    assert str(tmp_path / "skills" / "demo") in text
    # (the line as the CLI lists it, escaped for the model: shown to the reader as it is)
    assert "- demo: Sheets & &lt;b&gt;tables&lt;/b&gt; for demo" in text
    demo = text[text.index("demo") : text.index("- other: ")]
    assert "Queries passed2/4 (0.50); 1 failed, 1 errors" in demo
    assert "Precision1.00" in demo and "Recall0.50" in demo and "Run accuracy0.67" in demo
    assert "Calls10 (tokens in 9,000, out 900" in demo and "Cost$0.0" in demo
    # the queries: failing ones first (the miss, the error), each group in eval-file order
    numbers = re.findall(r'<td class="num">(\d+)</td>', page)
    assert numbers == ["1", "3", "2", "4", "1"]  # then the other skill's one query
    assert [a["class"] for a in tags.tags_of("tr") if "failing" in (a.get("class") or "")] == [
        "failing fail", "failing error"
    ]  # fmt: skip
    assert "0/3" in demo and "3/3" in demo and "0.00" in demo
    assert "skill:charts ×2, text ×1" in demo  # what was chosen instead
    assert demo.count("✓ should trigger") == 3 and demo.count("✗ should not") == 1
    # then the folder's routing table, where the built-in is not one of the folder's skills
    assert "Routing, as the tests ran" in text and "other skill charts" in text
    assert "Session12 calls, cost $0.033" in text and "Modelclaude-sonnet-5" in text


def test_a_plain_run_without_results_says_so() -> None:
    from pytest_skilltrigger.reports.html_report import render_results_html
    from pytest_skilltrigger.reports.session_report import SessionReport

    page = render_results_html(SessionReport("api", None, 3, 0.5))
    assert "No skill was tested." in page and "<script" not in page
