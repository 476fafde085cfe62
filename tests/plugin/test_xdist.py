"""The plugin under pytest-xdist: same verdicts, same JSON, one writer, runs stored once.

Workers are fresh processes (``runpytest_subprocess``) that load the plugin from its entry
point and inherit the fake API's environment from the ``fake_api`` fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import no_store, reference_rule
from tests.plugin.test_items import _sdk_warmed_up, entry, make_skill  # noqa: F401

# token counts depend on the fake's prompt-cache state and response shapes, cost on tokens
VOLATILE_SUMMARY_KEYS = {
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cost_usd",
}

ALPHA = [
    ("alpha: split the merged cells in budget.csv", True, ["skill:alpha-skill"]),
    ("alpha: what does csv stand for", False, ["text"]),
    ("alpha: tidy the date column please", True, ["skill:alpha-skill", "text"]),  # 2/3
    ("alpha: draw me a chart", False, ["skill:alpha-skill"]),  # wrong trigger
    ("alpha: merge two csv files", True, ["tool:Bash"]),  # missed
]
BETA = [
    ("beta: write release notes for v2", True, ["skill:beta-skill"]),
    ("beta: squash my commits", False, ["tool:Bash"]),
    ("beta: changelog since last tag", True, ["skill:alpha-skill"]),  # sibling chosen
]


@pytest.fixture(autouse=True)
def _not_inside_an_outer_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs are plain or controllers even when this suite itself runs under -n."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def build(pytester: pytest.Pytester, api: FakeMessagesAPI) -> Path:
    root = pytester.path / "skills"
    make_skill(
        root,
        "alpha-skill",
        [entry(q, s, note=f"n{i}") for i, (q, s, _) in enumerate(ALPHA)],
        "Alpha tidies csv files and dates.",
    )
    make_skill(root, "beta-skill", [entry(q, s) for q, s, _ in BETA], "Beta writes release notes.")
    script(api)
    return root


def script(api: FakeMessagesAPI) -> None:
    """(Re)start every query's scripted cycle so each run sees the same outcomes."""
    for query, _should, outcomes in ALPHA + BETA:
        api.script(query, outcomes)


def run_args(root: Path, *more: str) -> tuple[str, ...]:
    """Command-line arguments of one run of the skills under ``root``."""
    return (
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={root}",
        *no_store(more),
        *reference_rule(more),
        *more,
    )


def stable(report: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(report))
    for skill in out["skills"]:
        for key in VOLATILE_SUMMARY_KEYS:
            skill["summary"].pop(key, None)
    for spend in [out["totals"], *out["totals"]["by_phase"].values()]:
        for key in VOLATILE_SUMMARY_KEYS:  # the calls stay: the same on both sides
            spend.pop(key, None)
    return out


WRITER_LOG_CONFTEST = """
import os
import sys

import pytest_skilltrigger.conclusion.outputs as outputs

_original = outputs.write_json
_configs = []


def _logged(path, report):
    # the process's role from its config (the environment may come from an outer xdist run)
    role = "worker" if hasattr(_configs[-1], "workerinput") else "controller"
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "writers.log"), "a") as f:
        f.write(role + "\\n")
    _original(path, report)


def _users():
    # every module of the plugin holding the writer (imported by name or looked up late)
    return [m for name, m in list(sys.modules.items())
            if name.startswith("pytest_skilltrigger") and getattr(m, "write_json", None)
            in (_original, _logged)]


def pytest_configure(config):
    _configs.append(config)
    for module in _users():
        module.write_json = _logged


def pytest_unconfigure(config):
    for module in _users():  # in-process runs share the modules with later tests
        module.write_json = _original
"""


def test_xdist_gives_the_same_verdicts_json_and_store_as_a_plain_run(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    root = build(pytester, fake_api)
    pytester.makeconftest(WRITER_LOG_CONFTEST)
    log = pytester.path / "writers.log"
    plain_json = pytester.path / "plain.json"
    plain = pytester.runpytest(
        *run_args(root, "--trigger-cache", "off", f"--trigger-json={plain_json}")
    )
    plain.assert_outcomes(passed=5, failed=3)
    plain_calls = fake_api.stats["trigger_calls"]
    assert log.read_text().splitlines() == ["controller"]
    log.unlink()

    script(fake_api)
    store = tmp_path / "store.sqlite"
    dist_json = pytester.path / "dist.json"
    dist = pytester.runpytest_subprocess(
        "-n", "2", *run_args(root, f"--trigger-store={store}", f"--trigger-json={dist_json}")
    )
    dist.assert_outcomes(passed=5, failed=3)
    assert "INTERNALERROR" not in dist.stdout.str() + dist.stderr.str()
    assert fake_api.stats["trigger_calls"] == 2 * plain_calls
    # the JSON is written once, by the controller, and equals the plain run's
    assert log.read_text().splitlines() == ["controller"]
    plain_report = json.loads(plain_json.read_text(encoding="utf-8"))
    dist_report = json.loads(dist_json.read_text(encoding="utf-8"))
    assert [s["skill_name"] for s in dist_report["skills"]] == ["alpha-skill", "beta-skill"]
    assert [r["query"] for r in dist_report["skills"][0]["results"]] == [q for q, _, _ in ALPHA]
    assert stable(dist_report) == stable(plain_report)
    # the runs the workers made were stored by the controller: a rerun makes no call
    log.unlink()
    script(fake_api)
    again_json = pytester.path / "again.json"
    again = pytester.runpytest(
        *run_args(root, f"--trigger-store={store}", f"--trigger-json={again_json}")
    )
    again.assert_outcomes(passed=5, failed=3)
    assert fake_api.stats["trigger_calls"] == 2 * plain_calls
    again_report = json.loads(again_json.read_text(encoding="utf-8"))
    for before, after in zip(dist_report["skills"], again_report["skills"], strict=True):
        assert after["results"] == before["results"]
        assert after["summary"]["calls"] == 0


def test_xdist_wrong_key_stops_the_session(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    root = build(pytester, fake_api)
    result = pytester.runpytest_subprocess("-n", "2", *run_args(root))
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    # at most the first item of each worker errors; the rest never runs
    assert 1 <= outcomes.get("errors", outcomes.get("error", 0)) <= 2
    assert "invalid x-api-key" in out


def test_the_concurrency_set_is_the_whole_sessions_under_xdist(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """``--trigger-concurrency 4`` with ``-n 2`` keeps at most 4 requests in flight at the
    server, not 4 per worker."""
    with FakeMessagesAPI(latency=0.3) as api, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_BASE_URL", api.url)
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        root = pytester.path / "skills"
        queries = [(f"alpha tidy batch {i} csv file", True) for i in range(16)]
        description = "Alpha: tidy any batch of csv files."
        make_skill(root, "alpha-skill", [entry(q, s) for q, s in queries], description)
        result = pytester.runpytest_subprocess(
            "-n", "2", *run_args(root, "--trigger-concurrency=4", "--trigger-no-early-stop")
        )
        result.assert_outcomes(passed=16)
        assert 2 <= api.stats["in_flight_max"] <= 4
