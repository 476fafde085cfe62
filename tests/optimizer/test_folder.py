"""Improving one skill of a folder without hurting its siblings (issue #15, point 3).

The fake model chooses among every listed skill by word overlap, so a proposal that names a
sibling's words really does take the sibling's requests: what the candidate does to the folder
is observable on the server's side.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from pytest_skilltrigger.optimizer.folder import ROUTING, folder_of, with_sibling_description
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import find_targets, load_routing_sets, load_targets
from tests.fake_messages_api import FakeMessagesAPI, extract_query, parse_listing
from tests.helpers import plugin_args

SHEETS_POS = [
    "tidy spreadsheet columns",
    "sort spreadsheet rows",
    "merge spreadsheet cells",
    "format spreadsheet totals",
    # no proposal wins these
    "review spreadsheet wording",
    "audit spreadsheet layout",
    "print spreadsheet nicely",
]
SHEETS_NEG = ["write poem about rain", "bake bread loaf"]
# each names four of pdf's words and "spreadsheet": the greedy proposal's five take it
PDF_POS = [
    f"extract spreadsheet tables from invoices documents {word}"
    for word in ("today", "please", "quickly", "again", "first", "carefully", "later", "twice")
]
PDF_NEG = ["translate hamlet into french", "compute fibonacci numbers"]
PDF_DESCRIPTION = "Extract tables from invoices and scanned documents; fill forms in files."
GREEDY = (
    "Tidy, sort, merge and format spreadsheet columns, rows, cells and totals; extract tables "
    "from invoices and documents."
)
MODEST = "Tidy, sort, merge and format spreadsheet columns, rows, cells and totals."


def make_folder(root: Path) -> Path:
    folder = root / "skills"
    for name, description, pos, neg in (
        ("pdf", PDF_DESCRIPTION, PDF_POS, PDF_NEG),
        ("sheets", "Helps with gardening.", SHEETS_POS, SHEETS_NEG),
    ):
        (folder / name / "evals").mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"
        )
        entries = [{"query": q, "should_trigger": True} for q in pos]
        entries += [{"query": q, "should_trigger": False} for q in neg]
        (folder / name / "evals" / "trigger-eval.json").write_text(json.dumps(entries))
    return folder


def run(pytester: pytest.Pytester, folder: Path, *args: str) -> tuple[pytest.RunResult, dict]:
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}"),
        "--trigger-optimize",
        "--trigger-holdout=0.5",
        "--trigger-no-early-stop",
        *args,
    )
    return result, json.loads(out.read_text())


def rounds_page(pytester: pytest.Pytester, skill: str) -> tuple[str, str]:
    """The rounds' page as text, and its section from ``skill``'s heading on."""
    page = html.unescape((pytester.path / "rounds.html").read_text())
    return page, page[page.index(f"<h2>{skill}</h2>") :]


def test_the_folder_gives_siblings_queries_as_negatives_on_their_own_split(
    tmp_path: Path,
) -> None:
    folder = make_folder(tmp_path)
    (folder / "routing-eval.json").write_text(
        json.dumps(
            [
                {"query": "sum the spreadsheet totals column", "expected_skill": "sheets"},
                {"query": "pull the table out of invoice.pdf", "expected_skill": "pdf"},
                {"query": "what is a spreadsheet", "expected_skill": None},
                {
                    "query": "tidy spreadsheet columns",
                    "expected_skill": "sheets",
                },  # own query: once
            ]
        )
    )
    found = find_targets([str(folder)])
    targets = found.targets
    pdf, sheets = targets
    routing = load_routing_sets(found, [str(folder)])
    scope = folder_of(sheets, targets, routing, 0.5, 42)
    pdf_train, pdf_test = split_entries(pdf.eval_set.entries, 0.5, 42)
    sibling = [(c.entry.query, c.entry.should_trigger) for c in scope.test if c.owner == "pdf"]
    assert sibling == [(e.query, False) for e in pdf_test if e.should_trigger]
    assert {c.entry.query for c in scope.train if c.owner == "pdf"} == {
        e.query for e in pdf_train if e.should_trigger
    }
    routed = {
        c.entry.query: c.entry.should_trigger
        for c in scope.train + scope.test
        if c.owner == ROUTING
    }
    assert routed == {
        "sum the spreadsheet totals column": True,
        "pull the table out of invoice.pdf": False,
        "what is a spreadsheet": False,
    }
    indexes = [c.entry.index for c in scope.train + scope.test]
    assert len(set(indexes)) == len(indexes) and min(indexes) > 1000
    assert scope.owners == sorted(["pdf", ROUTING])


def test_an_improved_sibling_is_listed_with_its_new_description(tmp_path: Path) -> None:
    """In the listing, and in the SKILL.md the Claude Code backend installs for it."""
    from pytest_skilltrigger.backends.claude_code.workspace import installed_text
    from pytest_skilltrigger.skills.cli_frontmatter import read_as_cli

    _pdf, sheets = load_targets([str(make_folder(tmp_path))])
    relisted = with_sibling_description(sheets, "pdf", "Read PDFs.")
    (pdf,) = [s for s in relisted.siblings if s.name == "pdf"]
    assert pdf.description == "Read PDFs."
    assert "- pdf: Read PDFs." in [s.line for s in relisted.context().listing()]
    installed = installed_text(pdf, tested=False)
    assert read_as_cli(installed).description == "Read PDFs."
    assert installed.endswith("# pdf\n")  # the rest of the file as it was
    assert with_sibling_description(sheets, "nobody", "x") is sheets


def test_a_winner_that_takes_its_siblings_queries_is_not_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The greedy proposal wins more of sheets' own queries, but takes pdf's: raced against
    the start on the folder's train queries too, it loses, so it is never the best, SKILL.md
    stays as it was, and the reports say why. The proposer is told pdf's train requests as
    near-misses, and never sees pdf's test queries."""
    folder = make_folder(pytester.path)
    original = (folder / "sheets" / "SKILL.md").read_bytes()
    fake_api.proposals = [GREEDY]
    result, report = run(
        pytester, folder, "--trigger-max-iterations=2", "--trigger-report=rounds.html"
    )
    sheets = next(s for s in report["skills"] if s["skill_name"] == "sheets")
    assert [h["test_passed"] for h in sheets["history"]] == [1, 3]  # greedy wins its own
    greedy_race = sheets["history"][1]["race"]
    assert greedy_race["verdict"] == "worse" and greedy_race["expected"] < 0
    assert sheets["best_iteration"] == 1 and sheets["improved"] is False
    assert (folder / "sheets" / "SKILL.md").read_bytes() == original
    result.stdout.fnmatch_lines(
        [
            "*sheets iteration 2/2: train * of * (*), test *; against the best so far -*: kept the "
            "best so far*",
            "*sheets/SKILL.md unchanged: no candidate's gain over the best so far was positive at "
            "95% on the train queries: kept the start",
        ]
    )
    # every iteration records each skill's score and the folder's
    start, greedy = sheets["history"][0], sheets["history"][1]
    assert start["skill_scores"]["pdf"] == "8/8" and greedy["skill_scores"]["pdf"] == "0/8"
    assert start["skill_scores"]["sheets"] == "2/9" and greedy["skill_scores"]["sheets"] == "6/9"
    assert (start["folder_score"], greedy["folder_score"]) == ("10/17", "6/17")
    # the proposal was asked knowing pdf's train requests are pdf's, never pdf's test ones
    prompts = [
        json.dumps(body)
        for body in fake_api.requests
        if not any(t.get("name") == "Skill" for t in body.get("tools") or [])
    ]
    pdf_train, pdf_test = split_entries(
        load_targets([str(folder / "pdf")])[0].eval_set.entries, 0.5, 42
    )
    assert "(belongs to 'pdf')" in prompts[0] and "- pdf: Extract tables" in prompts[0]
    assert any(e.query in prompts[0] for e in pdf_train if e.should_trigger)
    assert not any(e.query in prompt for prompt in prompts for e in pdf_test)
    # the rounds' page shows the folder's scores, what was taken, and the routing table
    page = (pytester.path / "rounds.html").read_text()
    assert ">Folder</th>" in page and "10/17" in page and "pdf 0/8" in page
    assert "for this request of &#39;pdf&#39;" in page  # (escaped as markupsafe does)
    assert "Routing, as the tests ran" in page and "Routing in " in page
    assert "kept the best so far" in html.unescape(page)


def test_a_modest_winner_is_written_and_the_next_skill_sees_it(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A winner that leaves its siblings' queries alone is written; skills are improved in
    turn, so a skill optimised after it is measured with the new description listed."""
    folder = make_folder(pytester.path)
    (folder / "zeta" / "evals").mkdir(parents=True)
    (folder / "zeta" / "SKILL.md").write_text("---\nname: zeta\ndescription: Hiking maps.\n---\n")
    entries = [{"query": q, "should_trigger": True} for q in ("plan hiking maps", "draw trails")]
    entries += [{"query": q, "should_trigger": False} for q in ("boil water", "read poem aloud")]
    (folder / "zeta" / "evals" / "trigger-eval.json").write_text(json.dumps(entries))
    fake_api.proposals = [MODEST, "Plan hiking maps and draw trails."]
    result, report = run(pytester, folder, "--trigger-max-iterations=2")
    sheets = next(s for s in report["skills"] if s["skill_name"] == "sheets")
    assert sheets["improved"] is True, result.stdout.str()
    assert MODEST in (folder / "sheets" / "SKILL.md").read_text()
    # zeta came after sheets: its rounds listed sheets under the new description
    zeta_queries = {e["query"] for e in entries}
    listings = [
        dict(parse_listing(body))
        for body in fake_api.requests
        if any(t.get("name") == "Skill" for t in body.get("tools") or [])
        and extract_query(body) in zeta_queries
    ]
    assert any(listing.get("sheets", "").startswith(MODEST[:40]) for listing in listings)


def test_a_folder_safe_candidate_wins_over_a_greedy_one(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Both proposals win the same sheets queries; only the modest one leaves pdf's alone,
    so it alone wins its race, and its race against the start on fresh runs of the folder's
    test queries too: it is written."""
    folder = make_folder(pytester.path)
    fake_api.proposals = [GREEDY, MODEST]
    result, report = run(pytester, folder, "--trigger-max-iterations=3")
    sheets = next(s for s in report["skills"] if s["skill_name"] == "sheets")
    assert [h["became_best"] for h in sheets["history"]] == [False, False, True]
    assert sheets["best_iteration"] == 3
    acceptance = sheets["acceptance"]
    assert acceptance["accepted"] and acceptance["gain"]["verdict"] == "better", acceptance
    assert sheets["improved"] is True, result.stdout.str()
    assert MODEST in (folder / "sheets" / "SKILL.md").read_text()


def test_a_gain_on_its_own_queries_that_the_folder_pays_for_is_no_gain() -> None:
    """The acceptance race counts the folder's queries with the skill's own: the winner gains
    one of its own and takes two of its siblings', so its gain over the start is negative."""
    from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
    from pytest_skilltrigger.model.verdict import FixedRule
    from pytest_skilltrigger.optimizer.racing import Race
    from pytest_skilltrigger.optimizer.rounds import Acceptance
    from pytest_skilltrigger.optimizer.scoring import paired_gain

    def result(query: str, should: bool, hit: bool) -> QueryResult:
        status = "triggered" if hit else "not_triggered"
        outcome = RunOutcome(status, chosen="skill:sheets" if hit else "skill:pdf")
        return QueryResult(query, should, FixedRule(10, 0.5), (outcome,) * 10)

    start = [
        result("tidy", True, False),
        result("pdf a", False, False),
        result("pdf b", False, False),
    ]
    best = [result("tidy", True, True), result("pdf a", False, True), result("pdf b", False, True)]
    acceptance = Acceptance(2, "test", Race(start, best, paired_gain(start, best, 0.95)), own=1)
    assert acceptance.race.gain.expected == pytest.approx(-1, abs=0.01)
    assert not acceptance.accepted
    assert "worse than the start" in acceptance.verdict()


# wins one more of sheets' own test queries than MODEST ("review spreadsheet wording"), and
# every pdf query with it
GREEDIER = (
    "Tidy, sort, merge, review and format spreadsheet columns, rows, cells, wording and "
    "totals; extract tables from invoices and documents."
)


def test_a_greedier_candidate_loses_its_race_and_the_modest_one_is_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The greedier proposal passes more of sheets' own test queries than the modest one, but
    takes pdf's: it loses its race on train, the modest one wins and is written, and both the
    terminal and the rounds' page say why the row with more test passes is not the best."""
    folder = make_folder(pytester.path)
    fake_api.proposals = [GREEDIER, MODEST]
    result, report = run(
        pytester, folder, "--trigger-max-iterations=3", "--trigger-report=rounds.html"
    )
    sheets = next(s for s in report["skills"] if s["skill_name"] == "sheets")
    assert [h["test_passed"] for h in sheets["history"]] == [1, 4, 3]
    assert [h["became_best"] for h in sheets["history"]] == [False, False, True]
    assert sheets["best_iteration"] == 3 and sheets["improved"] is True, result.stdout.str()
    assert MODEST in (folder / "sheets" / "SKILL.md").read_text()
    result.stdout.fnmatch_lines(
        [
            "*sheets iteration 2/3: *: kept the best so far*",
            "*sheets iteration 3/3: *: new best*",
            f"  wrote the new description to *{folder.name}/sheets/SKILL.md",
        ]
    )
    _page, section = rounds_page(pytester, "sheets")
    rows = re.findall(
        r'<tr class="([^"]*)"><td class="num">(?:<span[^>]*>[^<]*</span><br>)*'
        r"(\d+)</td>",
        section,
    )
    marks = {int(number): set(classes.split()) - {"evaluated"} for classes, number in rows}
    assert marks == {1: set(), 2: set(), 3: {"best"}}
    assert "kept the best so far" in section and "new best" in section
    assert "the model chose 'sheets' for this request of 'pdf'" in section


def test_a_winner_whose_folder_loses_on_fresh_runs_is_not_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The modest proposal wins its race on train (it leaves pdf's queries alone there); on
    fresh runs of the test queries it takes three of pdf's. Its own queries gain two, the
    folder's lose three: raced against the start on them all, the gain is negative, SKILL.md is
    left byte for byte, and the terminal, the JSON and the rounds' page say so (no extra runs
    for the race: --trigger-race-runs=0).

    The fake's scripts cycle per query whatever is listed, so the fresh runs of the winner
    are told apart by their place in each query's sequence: pdf's items (3 runs, which sheets'
    iteration 1 reads, the listing being the same), sheets' iteration 2 (3), the start's fresh
    runs (2: the race's first look stops once two runs agree), then the winner's (2). One
    request at a time (--trigger-concurrency=1) keeps that order: the start's runs are queued
    before the winner's."""
    folder = make_folder(pytester.path)
    original = (folder / "sheets" / "SKILL.md").read_bytes()
    _pdf_train, pdf_test = split_entries(
        load_targets([str(folder / "pdf")])[0].eval_set.entries, 0.5, 42
    )
    taken = [e.query for e in pdf_test if e.should_trigger][:3]
    for query in taken:
        fake_api.script(query, ["skill:pdf"] * 8 + ["skill:sheets"] * 2)
    fake_api.proposals = [MODEST]
    # the rule of the reference: the race on the held-out queries alone
    result, report = run(
        pytester,
        folder,
        "--trigger-max-iterations=2",
        "--trigger-concurrency=1",
        "--trigger-report=rounds.html",
        "--trigger-race-runs=0",
        "--trigger-accept-on=test",
    )
    sent = [extract_query(b) for b in fake_api.requests if b.get("tools")]
    assert all(sent.count(q) == 10 for q in taken), [sent.count(q) for q in taken]
    sheets = next(s for s in report["skills"] if s["skill_name"] == "sheets")
    # the rounds: the winner gains on its own queries and leaves pdf's alone
    assert [h["test_passed"] for h in sheets["history"]] == [1, 3]
    assert sheets["best_iteration"] == 2 and sheets["history"][1]["became_best"]
    acceptance = sheets["acceptance"]
    assert acceptance["best_iteration"] == 2 and acceptance["complete"] is True
    assert (acceptance["start_score"], acceptance["best_score"]) == ("1/4", "3/4")
    assert (acceptance["folder_start_score"], acceptance["folder_best_score"]) == ("5/8", "4/8")
    assert acceptance["gain"]["expected"] < 0 and not acceptance["accepted"]
    assert sheets["improved"] is False
    assert (folder / "sheets" / "SKILL.md").read_bytes() == original
    result.stdout.fnmatch_lines(
        [
            "*sheets/SKILL.md unchanged: on fresh runs of the test queries the best's gain over "
            "the start -*",
        ]
    )
    _page, section = rounds_page(pytester, "sheets")
    assert "iteration 2 raced against the start on fresh runs (test): gain over the start -" in (
        section
    )
    assert "SKILL.md unchanged" in section
    assert "refused: takes more" not in section  # nothing was refused in the rounds


@pytest.mark.parametrize("store", ["off", "use"])
def test_the_start_iteration_repeats_no_request_the_items_made(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, store: str
) -> None:
    """Iteration 1 measures each skill's start on its own queries, its siblings' and the
    routing set's: every one of those requests was made by the items already (the listing is
    the same), and their runs are read for the skill being improved. Counted on the server:
    with one iteration (no proposal) the rounds send nothing, with or without a store."""
    folder = make_folder(pytester.path)
    routing = [
        {"query": PDF_POS[0], "expected_skill": "pdf"},
        {"query": "plant tomato seeds in spring", "expected_skill": None},
    ]
    (folder / "routing-eval.json").write_text(json.dumps(routing))
    cache = (
        ["--trigger-cache=off"]
        if store == "off"
        else [f"--trigger-store={pytester.path / 'store.sqlite'}"]
    )
    result, report = run(pytester, folder, "--trigger-max-iterations=1", *cache)
    phases = report["totals"]["by_phase"]
    items = phases["items"]["calls"]
    assert items > 0 and "rounds" not in phases, result.stdout.str()
    sent = [
        body
        for body in fake_api.requests
        if any(t.get("name") == "Skill" for t in body.get("tools") or [])
    ]
    assert len(sent) == items == fake_api.stats["trigger_calls"]
    for skill in report["skills"]:
        start = skill["history"][0]
        assert start["skill_scores"] and start["folder_score"]  # the folder was measured
