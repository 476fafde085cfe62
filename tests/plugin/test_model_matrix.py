"""A model matrix (``--trigger-model=a,b``): one item per entry and model, each model's
requests sent to it (counted on the server), reports per model and where the models
disagree side by side."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI, extract_query
from tests.helpers import plugin_args

MODELS = ("claude-opus-5-5", "claude-haiku-4-5")
SHARP = "turn the invoice spreadsheet into a ledger"  # both models take it
SMALL_MISS = "reconcile the quarterly invoices please"  # the small model misses it
NEGATIVE = "write a poem about autumn"


def make_skills(root: Path) -> Path:
    folder = root / "skills"
    for name, entries in (
        ("ledger", [(SHARP, True), (SMALL_MISS, True), (NEGATIVE, False)]),
        ("notes", [("summarise the meeting notes", True)]),
    ):
        (folder / name / "evals").mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: The {name} skill for its work.\n---\n\n# {name}\n"
        )
        data = [{"query": q, "should_trigger": s} for q, s in entries]
        (folder / name / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder


def script(api: FakeMessagesAPI) -> None:
    for model in MODELS:
        api.script(SHARP, ["skill:ledger"], model=model)
        api.script(NEGATIVE, ["text"], model=model)
        api.script("summarise the meeting notes", ["skill:notes"], model=model)
    api.script(SMALL_MISS, ["skill:ledger"], model=MODELS[0])
    api.script(SMALL_MISS, ["text"], model=MODELS[1])


def test_a_two_model_matrix_on_two_skills(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path)
    script(fake_api)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}"), f"--trigger-model={','.join(MODELS)}", "-v"
    )
    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ledger/SKILL.md::ledger?01-reconcile-the-quarterly-invoices-please-"
            f"{MODELS[1]}? FAILED*",
        ]
    )
    # every request went to one of the matrix's models, the same number to each
    sent = Counter(body["model"] for body in fake_api.requests)
    assert set(sent) == set(MODELS) and sent[MODELS[0]] == sent[MODELS[1]]
    report = json.loads(out.read_text())
    assert report["models"] == list(MODELS)
    assert [(s["skill_name"], s["model"]) for s in report["skills"]] == [
        ("ledger", MODELS[0]),
        ("ledger", MODELS[1]),
        ("notes", MODELS[0]),
        ("notes", MODELS[1]),
    ]
    assert sum(s["summary"]["calls"] for s in report["skills"]) == len(fake_api.requests)
    (split,) = report["model_disagreements"]
    assert split["query"] == SMALL_MISS and split["skill"] == "ledger"
    assert split["by_model"][MODELS[0]]["verdict"] == "pass"
    assert split["by_model"][MODELS[1]]["verdict"] == "fail"
    result.stdout.fnmatch_lines(
        [
            f"ledger on {MODELS[1]}: 2 passed, 1 failed*",
            "the models disagree on 1 query:",
            f"  ledger: {SMALL_MISS!r} (should trigger): "
            f"{MODELS[0]} pass */*, {MODELS[1]} fail 0/*",
        ]
    )
    # each model priced at its own rates: the small model's calls cost less
    ledger = [s for s in report["skills"] if s["skill_name"] == "ledger"]
    costs = {s["model"]: s["summary"]["cost_usd"] for s in ledger}
    assert costs[MODELS[1]] < costs[MODELS[0]]


def test_k_selects_one_models_items_and_only_its_requests_are_sent(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path)
    script(fake_api)
    result = pytester.runpytest_subprocess(
        *plugin_args(folder), f"--trigger-model={','.join(MODELS)}", "-k", "haiku"
    )
    result.assert_outcomes(passed=3, failed=1, deselected=4)
    assert {body["model"] for body in fake_api.requests} == {MODELS[1]}
    assert {extract_query(b) for b in fake_api.requests} == {
        SHARP,
        SMALL_MISS,
        NEGATIVE,
        "summarise the meeting notes",
    }


def test_the_store_keeps_each_models_runs_apart(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path)
    script(fake_api)
    store = f"--trigger-store={pytester.path / 'store.sqlite'}"
    pytester.runpytest_subprocess(*plugin_args(folder, store), f"--trigger-model={MODELS[0]}")
    first = len(fake_api.requests)
    # the second model's items find nothing stored under its key; the first's find theirs
    both = f"--trigger-model={','.join(MODELS)}"
    pytester.runpytest_subprocess(*plugin_args(folder, store), both)
    assert {b["model"] for b in fake_api.requests[first:]} == {MODELS[1]}


def test_routing_items_run_on_every_model_of_the_matrix(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The folder's routing eval set: an item per entry and model (the model in the id), each
    model's requests sent to it, and a routing table per model in the terminal and the JSON,
    each with its own verdicts."""
    folder = make_skills(pytester.path)
    (folder / "routing-eval.json").write_text(
        json.dumps(
            [
                {"query": SMALL_MISS, "expected_skill": "ledger"},
                {"query": NEGATIVE, "expected_skill": None},
            ]
        )
    )
    script(fake_api)
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}"), f"--trigger-model={','.join(MODELS)}", "-v"
    )
    item = "*routing-eval.json::routing?00-reconcile-the-quarterly-invoices-please"
    result.stdout.fnmatch_lines([f"{item}-{MODELS[0]}? PASSED*", f"{item}-{MODELS[1]}? FAILED*"])
    routing_bodies = [b for b in fake_api.requests if extract_query(b) == NEGATIVE]
    assert {b["model"] for b in routing_bodies} == set(MODELS)
    report = json.loads(out.read_text())
    tables = {t["model"]: t for t in report["routing"]}
    assert set(tables) == set(MODELS)
    result.stdout.fnmatch_lines([f"routing in * on {MODELS[1]}: routing items 1/2 passed*"])


def test_the_command_line_model_wins_over_an_ini_matrix(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """``trigger_model`` naming several models in the ini file is the matrix; ``--trigger-model``
    on the command line runs one model instead, as any option overrides its ini key. The
    former matrix option, ``--trigger-models`` (ini ``trigger_models``), is read as the one
    option, with a deprecation warning."""
    folder = make_skills(pytester.path)
    pytester.makeini(f"[pytest]\ntrigger_model = {' '.join(MODELS)}\n")
    collected = pytester.runpytest_subprocess(*plugin_args(folder), "--collect-only", "-q")
    assert sum(MODELS[1] in line for line in collected.stdout.lines) == 4  # the matrix
    one = pytester.runpytest_subprocess(
        *plugin_args(folder), "--collect-only", "-q", f"--trigger-model={MODELS[1]}"
    )
    assert "4 tests collected" in one.stdout.str()
    pytester.makeini("[pytest]\n")
    former = pytester.runpytest_subprocess(
        *plugin_args(folder), "--collect-only", "-q", f"--trigger-models={','.join(MODELS)}"
    )
    assert sum(MODELS[1] in line for line in former.stdout.lines) == 4
    former.stdout.fnmatch_lines(
        ["*PytestDeprecationWarning*--trigger-models is now --trigger-model*"]
    )
    assert fake_api.stats["calls"] == 0
