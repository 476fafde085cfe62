"""The cost budget under xdist found in review: one budget for the session, however many
workers spend it."""

from __future__ import annotations

import json

import pytest

from pytest_skilltrigger.engine.exchange import SessionExchange
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.plugin.xdist import SPENT_KEY, share_of
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill, plugin_args


def test_budget_is_per_session_under_xdist(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    entries = [(f"merge PDF documents batch {i}", True) for i in range(12)]
    folder = make_skill(pytester.path, entries)
    common = plugin_args(
        folder, "--trigger-no-early-stop", "--trigger-concurrency", "1", "--trigger-json=out.json"
    )
    pytester.runpytest_subprocess(*common, "--trigger-runs", "1")
    per_call = json.loads((pytester.path / "out.json").read_text())["skills"][0]["summary"]
    budget = per_call["cost_usd"] / 12 * 4.5  # room for about four calls in the session
    result = pytester.runpytest_subprocess(
        *common, "--trigger-runs", "1", "-n", "3", "--trigger-budget-usd", f"{budget:.8f}"
    )
    spent = json.loads((pytester.path / "out.json").read_text())["skills"][0]["summary"]
    assert spent["cost_usd"] <= budget * 1.01  # three workers, one budget
    assert spent["skipped"] >= 4 and spent["calls"] <= 8
    result.stdout.fnmatch_lines(["*cost budget*was reached*queries were skipped*"])


def test_a_workers_share_is_of_the_budget_the_controller_left() -> None:
    """What the controller spent before the workers started (controls, drafts) crosses in
    their input, and each worker's part is of what is left."""
    share = share_of({"workerid": "gw1", "workercount": 2, SPENT_KEY: 0.25})
    assert share.part_of_budget(1.0) == 0.375
    assert share_of({"workerid": "gw1", "workercount": 2}).part_of_budget(1.0) == 0.5
    assert share_of({"workerid": "gw0", "workercount": 2, SPENT_KEY: 2.0}).part_of_budget(1.0) == 0


def test_runs_made_ahead_charge_the_workers_only_what_came_after_their_start() -> None:
    """The controls' spend is left out of the workers' shares when they start; the runs
    made ahead later charge them what those runs cost, not the controls again."""
    session = TriggerSession(Settings(cache_mode="off"))
    try:
        exchange = SessionExchange(session)
        session.guard.charge(0.25)  # the controls
        assert exchange.spent_before_workers() == 0.25
        session.guard.charge(0.5)  # the batches made ahead
        assert exchange.export_runs_ahead([])["spent_usd"] == 0.5
    finally:
        session.close()
