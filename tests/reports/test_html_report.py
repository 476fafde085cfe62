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

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.optimizer.folder import CrossEntry, Folder
from pytest_skilltrigger.optimizer.proposer import Proposal
from pytest_skilltrigger.optimizer.racing import Race
from pytest_skilltrigger.optimizer.record import freeze
from pytest_skilltrigger.optimizer.rounds import Acceptance, Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import paired_gain
from pytest_skilltrigger.reports.rounds_view import rounds_outputs
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet
from pytest_skilltrigger.skills.skill import Skill

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "</td></tr></table>",
    "' onmouseover='x",
    "&amp;",
]


def result(
    query: str,
    should: bool,
    triggers: int,
    runs: int = 3,
    *,
    error: str | None = None,
    skipped: str | None = None,
    chosen: str | None = None,
) -> QueryResult:
    """A query's result: ``triggers`` of ``runs`` (what else was chosen: ``chosen``, else a
    plain answer), plus an errored run or a skip."""
    outcomes = [RunOutcome("triggered", chosen="skill:demo") for _ in range(triggers)]
    outcomes += [RunOutcome("not_triggered", chosen=chosen or "text")] * (runs - triggers)
    if error is not None:
        outcomes.append(RunOutcome("error", error=error))
    return QueryResult(query, should, FixedRule(3, 0.5), tuple(outcomes), skipped=skipped)


def demo_id(text: str) -> str:
    """The id of the skill :func:`target` makes: its folder's name, ``demo <text>`` (a slash
    cannot be part of a folder's name, so it is one that looks alike)."""
    return f"demo {text}".replace("/", "\u2215")


def target(text: str, queries: list[tuple[str, bool]], description: str) -> Target:
    """A skill in a folder named ``demo <text>`` whose eval set holds ``queries``."""
    entries = tuple(
        EvalEntry(i, q, s, {f"cat {text}": f"val {text}"} if i == 0 else {})
        for i, (q, s) in enumerate(queries)
    )
    folder = f"/skills/x/{demo_id(text)}"
    skill = Skill(f"demo {text}", description, folder, f"{folder}/SKILL.md", {}, "", (), b"")
    return Target(skill, EvalSet(f"{folder}/evals/trigger-eval.json", entries), description, (), ())


def make_run(text: str = "plain") -> Optimization:
    """Two iterations, 3 train + 2 test queries; every user field carries ``text``."""
    queries = [
        (f"train one {text}", True),
        (f"train two {text}", False),
        (f"train three {text}", True),
        (f"test one {text}", True),
        (f"test two {text}", False),
    ]
    skill = target(text, queries, f"original {text}")
    entries = skill.eval_set.entries

    def iteration(n: int, description: str, good: bool) -> Iteration:
        train = [
            result(f"train one {text}", True, 3),
            result(f"train two {text}", False, 2 if not good else 0),
            result(
                f"train three {text}", True, 0, runs=2, error=f"boom {text}", chosen=f"tool:{text}"
            ),
        ]
        test = [
            result(f"test one {text}", True, 2 if good else 1),
            result(f"test two {text}", False, 0, runs=0, skipped=f"budget {text}"),
        ]
        proposal = None
        if n > 1:
            proposal = Proposal("prompt", "answer", [description], problems=[f"note {text}"])
        return Iteration(n, description, "evaluated", train, test, proposal, became_best=good)

    run = Optimization(skill, 0.4, list(entries[:3]), list(entries[3:]))
    run.iterations = [iteration(1, f"original {text}", False), iteration(2, f"better {text}", True)]
    run.exit_reason = f"max_iterations (2) {text}"
    return run


def render_html(
    runs: list[Optimization],
    *,
    running: bool,
    title: str = "Skill trigger report",
) -> str:
    for run in runs:  # a run goes on until its exit reason is set
        run.exit_reason = "" if running else (run.exit_reason or "max_iterations (2)")
    return rounds_outputs([freeze(r, {}) for r in runs], title=title).page


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
    """An iteration a row, a query a row of the grid with a cell per iteration (so the grid
    grows downwards, not off the side of the screen), and a chart of the rounds."""
    page = render_html([make_run()], running=False)
    tags = parse(page)
    iters = page[page.index('<table class="iters">') : page.index('<table class="grid">')]
    assert iters.count("<tr") == 1 + 2  # the header row + one per iteration
    grid = page[page.index('<table class="grid">') :]
    assert grid.count("<tr") == 1 + 5  # the header row + one per query
    assert len(tags.with_class("td", "cell")) == 5 * 2
    assert len(tags.with_class("td", "train")) == 3 * 2 + 3  # cells, and the query cells
    assert len(tags.with_class("td", "test")) == 2 * 2 + 2
    best = tags.with_class("tr", "best")
    assert len(best) == 1
    assert ">best</span>" in page
    # should-trigger vs should-not badges, one per query, and the query's kind in its title
    assert page.count("✓ should trigger") == 3
    assert page.count("✗ should not") == 2
    assert any("set: train" in (a.get("title") or "") for a in tags.with_class("td", "query"))
    # scores with intervals (expected queries right), and rates with theirs
    assert " of 3 (" in page and " of 2 (" in page
    assert "0.67" in page and "2/3" in page and "95% interval" in page
    # outcomes told apart
    for kind in ("pass", "fail", "error", "skipped"):
        assert tags.with_class("td", kind), kind
    assert "boom plain" in page  # the error message, in the cell's title
    assert "original plain" in page and "better plain" in page
    assert "stopped after 2 iterations (--trigger-max-iterations) plain" in page
    # the chart: a train and a test point per measured iteration, no script in it
    assert len(tags.tags_of("svg")) == 1 and len(tags.tags_of("circle")) == 2 * 2


def test_refresh_only_while_running() -> None:
    running = render_html([make_run()], running=True)
    done = render_html([make_run()], running=False)
    assert '<meta http-equiv="refresh" content="5">' in running
    assert "refresh" not in done
    assert [a for t, a in parse(done).tags if t == "meta" and "http-equiv" in a] == []


def test_no_external_resources() -> None:
    page = render_html([make_run()], running=True)
    for needle in ("http://", "https://", "@import", "url("):
        assert needle not in page, needle
    tags = parse(page)
    for tag, attrs in tags.tags:
        assert tag not in ("script", "link", "img", "iframe"), tag
        assert "src" not in attrs, (tag, attrs)
        # links only within the page (the table of contents): nothing is fetched
        assert (attrs.get("href") or "#").startswith("#"), (tag, attrs)


def test_unfinished_invalid_and_interrupted_rounds() -> None:
    """A skill measured once, one interrupted before any iteration, one whose only proposal
    was dropped: each says what it has, and a dropped row keeps the column count."""
    lone = make_run("lone")
    lone.iterations = lone.iterations[:1]
    lone.holdout = 0
    cut = make_run("cut")
    cut.iterations, cut.interrupted = [], True
    invalid = make_run("invalid")
    dropped = Proposal("p", "a", [], problems=["too long"])
    invalid.iterations = [Iteration(3, "x" * 1100, "invalid", proposal=dropped)]
    page = render_html([lone, cut, invalid], running=False)
    tags = parse(page)
    assert "No iteration has finished yet." in page
    assert ">invalid</span>" in page and "proposal dropped: too long" in page
    assert len(tags.with_class("tr", "best")) == 1  # the lone measured iteration; none else
    # the invalid row keeps the column count: empty cells, not missing ones
    assert len(tags.with_class("td", "none")) == 5
    assert render_html([], running=True).count("No skill") == 1


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_strings_stay_text(hostile: str) -> None:
    baseline = parse(render_html([make_run("plain")], running=False, title="plain"))
    page = render_html([make_run(hostile)], running=False, title=hostile)
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
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
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
    page.write_text(render_html([make_run(), make_run(hostile)], running=False), "utf-8")
    shot = tmp_path / "shot.png"
    headless(chromium, f"--screenshot={shot}", "--window-size=1400,900", page.as_uri())
    width, height, colours = png_size_and_colours(shot.read_bytes())
    assert (width, height) == (1400, 900)
    assert colours > 8  # not a blank page
    dom = headless(chromium, "--dump-dom", page.as_uri()).stdout
    assert "&lt;b&gt;x&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert "<b>x</b>" not in dom and "<script>alert(1)" not in dom


def routing_table(chosen: dict[str, int]) -> Any:
    """A folder of pdf and sheets whose sheets queries went to ``chosen``."""
    from pytest_skilltrigger.reports.routing_table import RoutingRow, RoutingTable

    row = RoutingRow("sheets", True, queries=2, runs=sum(chosen.values()), chosen=chosen)
    return RoutingTable("/skills", ["pdf", "sheets"], [row], [])


def test_a_skill_that_is_not_the_folders_is_headed_other_skill() -> None:
    """A built-in competitor of the listing (charts, review) chosen for a folder's queries is
    not one of the project's skills, and its column must not read like one."""
    from pytest_skilltrigger.reports.html_pages import render_routing_section
    from pytest_skilltrigger.reports.routing_table import choice_label

    chosen = {"skill:sheets": 2, "skill:charts": 3, "skill:review": 1, "text": 1, "tool:Bash": 1}
    headings = re.findall(r"<th>(.*?)</th>", render_routing_section(routing_table(chosen)))
    assert headings == [
        "queries of",
        "kind",
        "pdf",
        "sheets",
        "other skill charts",
        "other skill review",
        "a plain answer",
        "tool Bash",
        "errors",
        "sheets",  # the last: the row's own heading
    ]
    assert choice_label("skill:charts", ["pdf"]) == "other skill charts"
    assert choice_label("skill:pdf", ["pdf"]) == "pdf"
    assert choice_label("skill:charts") == "charts"  # a caller that does not know the folder


def in_folder(text: str = "plain") -> Optimization:
    """A skill of a folder, measured whole: a greedy iteration 2 takes its sibling's queries
    and loses its race on train; the start stays the best."""
    queries = [
        (f"train one {text}", True),
        (f"train two {text}", False),
        (f"test one {text}", True),
        (f"test two {text}", False),
    ]
    skill = target(text, queries, f"original {text}")
    entries = skill.eval_set.entries
    sibling = [
        CrossEntry(
            EvalEntry(1_000_000 + i, f"sibling {i} {text}", False, {"owner": f"sibling {text}"}),
            f"sibling {text}",
        )
        for i in range(4)
    ]
    folder = Folder(tuple(sibling[:2]), tuple(sibling[2:]))
    run = Optimization(skill, 0.4, list(entries[:2]), list(entries[2:]), folder=folder)

    def iteration(n: int, taken: int) -> Iteration:
        train = [result(q, s, 3 if s else 0) for q, s in queries[:2]]
        test = [result(q, s, 3 if s else 0) for q, s in queries[2:]]
        cross = [result(c.entry.query, False, 3 if i < taken else 0) for i, c in enumerate(sibling)]
        return Iteration(
            n,
            f"{'original' if n == 1 else 'greedy'} {text}",
            "evaluated",
            train,
            test,
            cross_train=cross[:2],
            cross_test=cross[2:],
        )

    start, greedy = iteration(1, 0), iteration(2, 4)
    greedy.race = Race(
        start.train_side, greedy.train_side, paired_gain(start.train_side, greedy.train_side, 0.95)
    )
    run.iterations = [start, greedy]
    run.exit_reason = f"max_iterations (2) {text}"
    return run


@pytest.mark.parametrize("hostile", ["plain", *HOSTILE])
def test_a_folder_candidate_that_takes_its_siblings_queries_says_so(hostile: str) -> None:
    page = render_html([in_folder(hostile)], running=False)
    tags = parse(page)
    text = "".join(tags.text)
    assert len(tags.with_class("tr", "best")) == 1  # the start
    assert "kept the best so far" in text and "Folder" in text
    owner, me = f"sibling {hostile}", demo_id(hostile)
    assert f"the model chose {me!r} for this request of {owner!r}" in text
    assert f"sibling {hostile}'s" in text  # the grid names whose query a folder row is
    assert "no candidate beat the start on train: SKILL.md unchanged" in text
    for tag, attrs in tags.tags:
        assert tag not in ("script", "img", "iframe"), tag
        assert not [k for k in attrs if k.startswith("on")], (tag, attrs)


def test_the_acceptance_race_is_on_the_page() -> None:
    run = make_run()
    start = [result("test one plain", True, 0, runs=10), result("test two plain", False, 0)]
    best = [result("test one plain", True, 10, runs=10), result("test two plain", False, 0)]
    run.acceptance = Acceptance(2, "test", Race(start, best, paired_gain(start, best, 0.95)), 2)
    text = "".join(parse(render_html([run], running=False)).text)
    assert "iteration 2 raced against the start on fresh runs (test): gain over the start" in text
    assert "better at 95%; accepted for SKILL.md" in text


# a query that would be markup, an attribute break-out and an entity, all at once
NASTY = '<script>alert("x")</script> & \'q\' "><img src=x onerror=alert(1)>'


def plain_run(root: Path) -> Any:
    """A plain run's typed report: two skills of one folder; demo's queries are a miss (the
    nasty one, taken by a built-in), a pass, an error and a pass, in eval-file order."""
    from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, Usage
    from pytest_skilltrigger.model.prices import Spend
    from pytest_skilltrigger.reports.routing_table import routing_tables
    from pytest_skilltrigger.reports.session_report import ReportContext, build_report
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
            RunOutcome(
                "triggered" if c == f"skill:{owner}" else "not_triggered",
                chosen=c,
                usage=usage,
                model="claude-sonnet-5",
            )
            for c in chosen
        )

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
            rule = FixedRule(3, 0.5)
            results.add(
                target, entry.index, QueryResult(entry.query, entry.should_trigger, rule, these)
            )
    context = ReportContext(
        backend="api",
        model="claude-sonnet-5",
        routing=routing_tables(results.ordered()),
        spending={"items": Spend(12, usage, 0.0331)},
    )
    return build_report(results, context)


def test_a_plain_runs_page_has_every_skills_counts_and_its_queries_failing_first(
    tmp_path: Path,
) -> None:
    from pytest_skilltrigger.reports.html_pages import render_results_page

    page = render_results_page(plain_run(tmp_path / "skills"))
    tags = parse(page)
    text = "".join(tags.text)
    # nothing user-supplied became markup, and all of it reached the reader as text
    for tag, attrs in tags.tags:
        assert tag not in ("script", "img", "iframe", "link"), tag
        assert not [k for k in attrs if k.startswith("on") or k in ("src", "href")], attrs
    # (Jinja2 escapes quotes as &#34; and &#39;, as markupsafe does)
    assert "<script>" not in page and "&lt;script&gt;alert(&#34;x&#34;)" in page
    assert "<b>tables" not in page
    assert "&amp; &#39;q&#39; &#34;&gt;&lt;img" in page
    assert NASTY in text and "boom <b>&amp;</b>" in text
    assert f"tag: tag {NASTY}" in [a.get("title") for a in tags.tags_of("td")]  # its extra
    # each skill: its path, the line Claude Code lists, its summary
    assert len(tags.with_class("section", "skill")) == 2
    assert str(tmp_path / "skills" / "demo") in text
    # (the line as the CLI lists it, escaped for the model: shown to the reader as it is)
    assert "- demo: Sheets & &lt;b&gt;tables&lt;/b&gt; for demo" in text
    demo = text[text.index("demo") : text.index("- other: ")]
    assert "Queries passed2/4 (0.50), 95% interval 0.15–0.85; 1 failed, 1 errors" in demo
    assert "Precision1.00" in demo and "Recall0.50" in demo and "Run accuracy0.67" in demo
    assert "Calls10 (tokens in 9,000, out 900" in demo and "Cost$0.0" in demo
    # the queries: failing ones first (the miss, the error), each group in eval-file order
    numbers = re.findall(r'<td class="num">(\d+)</td>', page)
    assert numbers == ["1", "3", "2", "4", "1"]  # then the other skill's one query
    assert [a["class"] for a in tags.tags_of("tr") if "failing" in (a.get("class") or "")] == [
        "failing fail",
        "failing error",
    ]
    assert "0/3" in demo and "3/3" in demo and "0.00" in demo
    assert "skill 'charts' x2, a plain answer x1" in demo  # what was chosen instead
    assert demo.count("✓ should trigger") == 3 and demo.count("✗ should not") == 1
    # then the folder's routing table, where the built-in is not one of the folder's skills
    assert "Routing, as the tests ran" in text and "other skill charts" in text
    assert "Session12 calls, cost $0.033" in text and "Modelclaude-sonnet-5" in text


def test_a_plain_run_without_results_says_so() -> None:
    from pytest_skilltrigger.reports.html_pages import render_results_page
    from pytest_skilltrigger.reports.session_report import SessionReport

    page = render_results_page(SessionReport("api", None, 3, 0.5))
    assert "No skill was tested." in page and "<script" not in page
