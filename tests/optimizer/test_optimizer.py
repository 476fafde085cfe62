"""The improvement loop end to end: pytest --trigger-optimize against the local server.

The fake model triggers a skill when the query shares enough words with its description, so a
scripted proposal that names the right intents really does trigger more: selection, the
acceptance rule, the blinded prompt, repairs and the rewrite are all observable.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from pytest_skilltrigger.optimizer.split import split_entries, split_problem
from pytest_skilltrigger.skills.evalset import load_eval_set
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

POSITIVES = [
    "create invoice for client acme with payment terms",
    "send payment reminder for overdue invoice 1042",
    "track which client payments arrived this month",
    "draft invoice lines for consulting hours for client bolt",
    "mark invoice 2231 as paid and record the payment",
]
NEGATIVES = [
    "translate this poem into french",
    "what is the capital of peru",
    "rename variables in my module to snake case",
    "summarise the plot of hamlet",
    "compute fibonacci numbers recursively",
]
START = "Handle billing."
GOOD = (
    "Create invoices for a client, record each payment, track client payments and send "
    "payment reminders for any overdue invoice."
)
BAD = (
    "Translate poems into french, summarise hamlet plot, capital of peru, rename variables "
    "snake case, compute fibonacci numbers recursively."
)

SKILL_MD = (
    "---\r\n"
    "# billing helper, kept by hand\r\n"
    "name: invoices\r\n"
    "description: >-\r\n"
    f"  {START}\r\n"
    "metadata:\r\n"
    "  owner: finance  # the team\r\n"
    "license: MIT\r\n"
    "---\r\n"
    "\r\n"
    "# Invoices\r\n"
    "Body text stays.\r\n"
)


def make_skill(root: Path) -> Path:
    folder = root / "skills" / "invoices"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(SKILL_MD.encode("utf-8"))
    entries = [{"query": q, "should_trigger": True} for q in POSITIVES]
    entries += [{"query": q, "should_trigger": False} for q in NEGATIVES]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(entries, indent=1))
    return folder


def run(pytester: pytest.Pytester, folder: Path, *args: str) -> tuple[pytest.RunResult, dict]:
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}"),
        "--trigger-optimize",
        *args,
    )
    return result, json.loads(out.read_text())


def improve_requests(api: FakeMessagesAPI) -> list[str]:
    texts = []
    for body in api.requests:
        if any(t.get("name") == "Skill" for t in body.get("tools") or []):
            continue
        texts.append(json.dumps(body, ensure_ascii=False))
    return texts


def test_split_matches_the_reference_procedure(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    entries = load_eval_set(folder / "evals" / "trigger-eval.json").entries
    train, test = split_entries(entries, 0.4, 42)
    # the reference: seed the global RNG, shuffle positives then negatives, first part = test
    state = random.getstate()
    try:
        random.seed(42)
        pos = [e for e in entries if e.should_trigger]
        neg = [e for e in entries if not e.should_trigger]
        random.shuffle(pos)
        random.shuffle(neg)
    finally:
        random.setstate(state)
    k_pos, k_neg = max(1, int(len(pos) * 0.4)), max(1, int(len(neg) * 0.4))
    assert test == pos[:k_pos] + neg[:k_neg]
    assert train == pos[k_pos:] + neg[k_neg:]
    assert split_entries(entries, 0.0)[1] == []


def test_improves_from_the_best_and_rewrites_only_the_description(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = [BAD, GOOD]
    result, report = run(pytester, folder, "--trigger-max-iterations", "5")
    skill = report["skills"][0]
    history = skill["history"]
    assert [h["status"] for h in history] == ["evaluated"] * 3
    assert history[1]["train_passed"] < history[0]["train_passed"]  # BAD is worse on train
    assert skill["exit_reason"] == "all_passed (iteration 3)"
    assert skill["best_description"] == GOOD
    assert skill["best_iteration"] == 3
    assert skill["train_size"] == 6 and skill["test_size"] == 4

    # round 3 improved from the start (best by train), not from the worse newest proposal
    prompts = improve_requests(fake_api)
    assert len(prompts) == 2
    second = json.loads(prompts[1])["messages"][0]["content"]
    assert f"<current_description>\n{START}\n</current_description>" in second
    assert "train score" in second and BAD in second  # earlier attempts are shown

    # blinded: no test query ever reaches the proposer
    entries = load_eval_set(folder / "evals" / "trigger-eval.json").entries
    _train, test = split_entries(entries, 0.4, 42)
    for text in prompts:
        for entry in test:
            assert entry.query not in text

    # iteration 1 reused the items' results: the first evaluation made no second set of calls
    new = (folder / "SKILL.md").read_bytes().decode("utf-8")
    old_lines, new_lines = SKILL_MD.split("\r\n"), new.split("\r\n")
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert changed == [4]  # only the description's value line
    front = yaml.safe_load(new.split("---")[1])
    assert front["description"] == GOOD
    assert front["metadata"] == {"owner": "finance"} and front["license"] == "MIT"
    result.stdout.fnmatch_lines(
        ["*invoices iteration 1/5: train * of 6 (*), test * of 4 (*", "*wrote*"]
    )
    # BAD lost its race on train; GOOD won its race, and then its race against the start on
    # fresh runs of every query, without losing on the held-out ones
    assert history[1]["race"]["verdict"] == "worse" and not history[1]["became_best"]
    assert history[2]["race"]["verdict"] == "better" and history[2]["became_best"]
    acceptance = skill["acceptance"]
    assert acceptance["accepted"] is True and acceptance["best_iteration"] == 3
    assert acceptance["on"] == "all" and acceptance["start_score"] == "5/10"
    assert acceptance["best_score"] == "10/10"
    assert acceptance["held_out_gain"]["expected"] > 0
    result.stdout.fnmatch_lines(
        ["*raced against the start on fresh runs (all): gain over the start *: better at 95%*"]
    )


def test_a_lead_won_by_chance_on_test_chooses_nothing(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The candidate beats the start on one test query only because its runs happened to
    trigger. Selection never looks at test: on train it gains nothing, so it is not the best,
    nothing is raced on fresh runs, and SKILL.md stays as it is."""
    folder = make_skill(pytester.path)
    entries = load_eval_set(folder / "evals" / "trigger-eval.json").entries
    _train, test = split_entries(entries, 0.4, 42)
    lucky_query = next(e.query for e in test if e.should_trigger)
    # runs 1-3 (the items, START) miss; 4-6 (the candidate) trigger; every fresh run misses
    fake_api.script(lucky_query, ["text"] * 3 + ["skill:invoices"] * 3 + ["text"] * 6)
    lucky = "Handle billing tasks."  # no more words in common with any query than START
    fake_api.proposals = [lucky]
    result, report = run(
        pytester, folder, "--trigger-max-iterations", "2", "--trigger-no-early-stop"
    )
    skill = report["skills"][0]
    assert [h["test_passed"] for h in skill["history"]] == [2, 3]  # the lucky lead
    assert skill["history"][1]["race"]["verdict"] == "undecided"  # alike on train
    assert skill["best_description"] == START and skill["acceptance"] is None
    assert skill["improved"] is False
    assert (folder / "SKILL.md").read_bytes() == SKILL_MD.encode("utf-8")
    result.stdout.fnmatch_lines(
        [
            "*unchanged: no candidate's gain over the best so far was "
            "positive at 95% on the train queries: kept the start*"
        ]
    )


def test_no_rewrite_when_nothing_beats_the_start(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = [BAD]
    result, report = run(pytester, folder, "--trigger-max-iterations", "2")
    skill = report["skills"][0]
    assert skill["exit_reason"] == "max_iterations (2)"
    assert skill["best_description"] == START and skill["improved"] is False
    assert skill["acceptance"] is None  # nothing to race on fresh runs: no extra calls
    assert (folder / "SKILL.md").read_bytes() == SKILL_MD.encode("utf-8")
    result.stdout.fnmatch_lines(["*unchanged: no candidate's gain over the best so far*"])
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_invalid_proposals_are_repaired_once_then_dropped(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = ["x" * 1100, GOOD]
    _result, report = run(pytester, folder, "--trigger-max-iterations", "2")
    history = report["skills"][0]["history"]
    assert history[1]["status"] == "evaluated" and history[1]["description"] == GOOD
    assert len(improve_requests(fake_api)) == 2  # the proposal and its one repair
    assert "1024" in json.loads(improve_requests(fake_api)[1])["messages"][0]["content"]

    fake_api.requests.clear()
    (folder / "SKILL.md").write_bytes(SKILL_MD.encode("utf-8"))
    fake_api.proposals = ["use <b>this</b>", "still <not> valid"]
    _result, report = run(pytester, folder, "--trigger-max-iterations", "2")
    skill = report["skills"][0]
    assert skill["history"][1]["status"] == "invalid"
    assert "<" in skill["history"][1]["note"] or "dropped" in skill["history"][1]["note"]
    assert skill["best_description"] == START
    assert (folder / "SKILL.md").read_bytes() == SKILL_MD.encode("utf-8")


def test_same_outcome_under_xdist(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = [BAD, GOOD]
    _r, plain = run(pytester, folder)
    (folder / "SKILL.md").write_bytes(SKILL_MD.encode("utf-8"))
    fake_api.proposals = [BAD, GOOD]
    _r, dist = run(pytester, folder, "-n", "2")

    def stable(report: dict) -> list:
        skill = report["skills"][0]
        return [
            skill["best_description"],
            skill["exit_reason"],
            [(h["description"], h["train_passed"], h["test_passed"]) for h in skill["history"]],
            [(r["query"], r["pass"]) for r in skill["results"]],
        ]

    assert stable(plain) == stable(dist)
    assert yaml.safe_load((folder / "SKILL.md").read_text().split("---")[1])["description"] == GOOD


def test_reports_and_results_folder(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = [GOOD]
    page = pytester.path / "report.html"
    results = pytester.path / "results"
    _r, report = run(
        pytester, folder, f"--trigger-report={page}", f"--trigger-results-dir={results}"
    )
    html = page.read_text()
    assert GOOD in html and "http-equiv" not in html  # finished: no auto-refresh
    assert "Acceptance" in html and "better at 95%" in html and "<svg" in html
    (stamp,) = list(results.iterdir())
    assert json.loads((stamp / "results.json").read_text())["skills"][0]["best_description"] == GOOD
    iteration = stamp / "invoices" / "iteration-2"
    assert GOOD in (iteration / "description.txt").read_text()
    assert "<new_description>" in (iteration / "prompt.txt").read_text()
    counts = json.loads((iteration / "counts.json").read_text())
    assert counts["description_chars"] == [len(GOOD)]
    keys = {
        "exit_reason",
        "original_description",
        "best_description",
        "best_score",
        "best_train_score",
        "best_test_score",
        "final_description",
        "iterations_run",
        "holdout",
        "train_size",
        "test_size",
        "history",
    }
    assert keys <= set(report["skills"][0])
    entry_keys = {
        "iteration",
        "description",
        "train_passed",
        "train_failed",
        "train_total",
        "train_results",
        "test_passed",
        "test_failed",
        "test_total",
        "test_results",
        "passed",
        "failed",
        "total",
        "results",
    }
    assert entry_keys <= set(report["skills"][0]["history"][0])


def test_iteration_one_reuses_the_items_results(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}",
        "-p",
        "no:cacheprovider",
        "--trigger-cache",
        "off",
        "--trigger-confidence=off",
    )
    items_only = fake_api.stats["trigger_calls"]
    _result, report = run(
        pytester, folder, "--trigger-max-iterations", "1", "--trigger-cache", "off"
    )
    assert fake_api.stats["trigger_calls"] == 2 * items_only  # no second evaluation
    assert report["skills"][0]["history"][0]["train_total"] == 6


def test_under_xdist_the_budget_left_after_the_items_still_funds_the_rounds(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The workers' spending is counted on the controller with its calls, so the estimate of
    the next call stays the average call, not the whole of the items' spending."""
    folder = make_skill(pytester.path)
    _r, items_only = run(pytester, folder, "--trigger-max-iterations", "1", "-n", "2")
    items_cost = items_only["skills"][0]["summary"]["cost_usd"]
    fake_api.proposals = [GOOD]
    budget = f"{items_cost * 12:.8f}"  # the rounds cost several times what the items did
    _r, report = run(
        pytester,
        folder,
        "--trigger-max-iterations",
        "2",
        "-n",
        "2",
        "--trigger-concurrency",
        "2",
        "--trigger-budget-usd",
        budget,
    )
    second = report["skills"][0]["history"][1]
    rows = second["train_results"] + second["test_results"]
    assert second["status"] == "evaluated"
    assert [r["query"] for r in rows if r["skipped"]] == []
    assert report["skills"][0]["best_description"] == GOOD


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_totals_count_every_call_of_the_session_by_phase(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, workers: tuple[str, ...]
) -> None:
    """The JSON totals and the terminal's session line cover the items, the rounds' trigger
    runs, the proposals and the confirmation runs, and equal what the server saw."""
    folder = make_skill(pytester.path)
    fake_api.proposals = [BAD, GOOD]
    result, report = run(pytester, folder, *workers)
    totals = report["totals"]
    phases = totals["by_phase"]
    assert set(phases) == {"items", "rounds", "improve", "confirmation"}
    assert phases["improve"]["calls"] == fake_api.stats["improve_calls"] == 2
    trigger = sum(phases[p]["calls"] for p in ("items", "rounds", "confirmation"))
    assert trigger == fake_api.stats["trigger_calls"]
    assert totals["calls"] == fake_api.stats["calls"]
    assert report["skills"][0]["summary"]["covers"] == "items"
    assert report["skills"][0]["summary"]["calls"] == phases["items"]["calls"]
    parts = sum(p["cost_usd"] for p in phases.values())
    assert totals["cost_usd"] == pytest.approx(parts, abs=1e-5)
    result.stdout.fnmatch_lines([f"session total: {totals['calls']} calls, ~$*(items *"])


def test_a_split_needs_both_kinds_on_both_sides(tmp_path: Path) -> None:
    folder = make_skill(tmp_path)
    entries = load_eval_set(folder / "evals" / "trigger-eval.json").entries
    assert split_problem(entries, 0.4) is None
    assert "no should-trigger and no should-not-trigger query in the test set" in (
        split_problem(entries, 0.0) or ""
    )
    one_positive = [e for e in entries if not e.should_trigger] + [entries[0]]
    assert "no should-trigger query in the train set" in (split_problem(one_positive, 0.4) or "")


@pytest.mark.parametrize("holdout", ["0"])
def test_a_holdout_that_leaves_a_side_without_both_kinds_is_a_usage_error(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, holdout: str
) -> None:
    folder = make_skill(pytester.path)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}"),
        "--trigger-optimize",
        "--trigger-holdout",
        holdout,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*trigger-eval.json: --trigger-holdout {holdout} leaves no *query*"]
    )
    assert "Traceback" not in result.stderr.str()
    assert fake_api.stats["calls"] == 0 and not out.exists()


def test_a_repeated_proposal_is_never_measured_again_and_the_repeat_is_named(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Iteration 3's answer repeats iteration 2's description (in other case and spacing):
    it is not measured again; the improve model is asked once more with the repeat named,
    and the terminal and the JSON say what happened."""
    folder = make_skill(pytester.path)
    better = "Create an invoice for a client."  # takes some of the queries, not all
    fake_api.proposals = [better, "  " + better.upper().replace(" ", "   "), better]
    result, report = run(pytester, folder, "--trigger-max-iterations=3", "--trigger-candidates=1")
    history = report["skills"][0]["history"]
    described = [h.get("description") for h in history]
    assert described.count(better) == 1, described  # measured once, in iteration 2
    asked = improve_requests(fake_api)
    assert len(asked) == 3  # iteration 2's proposal; iteration 3's, and its one repair
    assert "repeats a description already tried" in json.loads(asked[2])["messages"][0]["content"]
    assert history[2]["status"] == "invalid"
    assert history[2]["note"].startswith(
        "asked once more, because the answer repeated a description already tried"
    )
    result.stdout.fnmatch_lines(["*iteration 3/3: asked once more, because the answer repeated*"])


def test_with_a_model_matrix_the_best_may_lose_on_no_model(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The rounds run on the first model; before SKILL.md is written the best is raced
    against the start afresh on every other model too. GOOD wins on the first model and loses
    on a model that decides the other way round: SKILL.md is kept, and the JSON says where the
    best lost."""
    folder = make_skill(pytester.path)
    fake_api.proposals = [GOOD]
    fake_api.contrary_models = {"claude-haiku-4-5"}
    _result, report = run(
        pytester,
        folder,
        "--trigger-max-iterations",
        "2",
        "--trigger-model=claude-opus-5-5,claude-haiku-4-5",
    )
    (skill,) = [s for s in report["skills"] if s["model"] == "claude-opus-5-5"]
    acceptance = skill["acceptance"]
    assert acceptance["gain"]["verdict"] == "better"
    assert acceptance["models"]["claude-haiku-4-5"]["verdict"] == "worse"
    assert acceptance["accepted"] is False
    assert "worse on claude-haiku-4-5" in acceptance["verdict"]
    assert (folder / "SKILL.md").read_bytes().decode("utf-8") == SKILL_MD  # untouched
    # the other model's race was sent to it: the server saw confirmation runs on both models
    models = {
        b["model"]
        for b in fake_api.requests
        if any(t.get("name") == "Skill" for t in b.get("tools") or [])
    }
    assert models == {"claude-opus-5-5", "claude-haiku-4-5"}


def test_with_a_model_matrix_a_best_that_loses_nowhere_is_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    fake_api.proposals = [GOOD]
    _result, report = run(
        pytester,
        folder,
        "--trigger-max-iterations",
        "2",
        "--trigger-model=claude-opus-5-5,claude-haiku-4-5",
    )
    (skill,) = [s for s in report["skills"] if s["model"] == "claude-opus-5-5"]
    assert skill["acceptance"]["accepted"] is True
    assert skill["acceptance"]["models"]["claude-haiku-4-5"]["verdict"] != "worse"
    assert GOOD in (folder / "SKILL.md").read_text(encoding="utf-8")


def test_the_reference_rule_races_on_the_held_out_queries_alone(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """--trigger-accept-on=test: the fresh race runs on the 4 held-out queries only (the server sees
    no fresh run of a train query after the rounds), as the reference decides."""
    folder = make_skill(pytester.path)
    fake_api.proposals = [GOOD]
    result, report = run(
        pytester, folder, "--trigger-max-iterations", "2", "--trigger-accept-on=test"
    )
    acceptance = report["skills"][0]["acceptance"]
    assert acceptance["on"] == "test" and acceptance["start_score"] == "2/4"
    assert acceptance["held_out_gain"] is None
    assert acceptance["best_score"] == report["skills"][0]["best_test_score"]
    result.stdout.fnmatch_lines(["*raced against the start on fresh runs (test): *"])


def test_a_best_that_loses_on_the_held_out_queries_is_not_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Racing on all queries, the held-out ones are a guard. The start names the two held-out
    requests (drafting consulting lines, overdue reminders); the proposal names the three train
    ones instead. It wins the rounds and the race on all queries (+3 on train, -2 held out),
    and is not written: it loses on the held-out queries."""
    folder = make_skill(pytester.path)
    held_out_start = "Draft consulting hours lines and send overdue reminders."
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace(START, held_out_start))
    before = skill_md.read_bytes()
    fake_api.proposals = [
        "Track payments arrived this month; mark paid and record the payment; acme terms."
    ]
    _result, report = run(pytester, folder, "--trigger-max-iterations", "2")
    acceptance = report["skills"][0]["acceptance"]
    assert acceptance["on"] == "all"
    assert acceptance["gain"]["verdict"] == "better", acceptance["gain"]
    assert acceptance["held_out_gain"]["verdict"] == "worse", acceptance["held_out_gain"]
    assert acceptance["accepted"] is False
    assert "worse on the held-out queries" in acceptance["verdict"]
    assert skill_md.read_bytes() == before
