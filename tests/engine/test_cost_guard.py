"""The cost guard's edge cases found in review: spending counted elsewhere (the xdist
workers') counts against the one budget and under its phase."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import Calls, cost_usd


def test_spending_counted_from_elsewhere_counts_against_the_budget_by_phase() -> None:
    """The controller adds the xdist workers' spending with its number of calls: it counts
    against the one budget and under its phase, and an unknown model's cost is unknown."""
    price = {"input": 3.0, "output": 15.0}
    guard = CostGuard("m", {"m": price}, budget_usd=1.0)
    usage = Usage(input_tokens=100_000, output_tokens=0)  # $0.30 over ten calls
    guard.add(Calls(usage, 10, "items"))
    assert not guard.reserve(0.75) and guard.reserve(0.65)
    assert guard.by_phase["items"].calls == 10 and guard.by_phase["items"].usage == usage
    assert guard.total().cost_usd == pytest.approx(cost_usd(usage, price))
    guard.add(Calls(Usage(10, 1), 1, "improve", model="not-a-listed-model"))
    assert guard.by_phase["improve"].cost_usd is None and guard.total().cost_usd is None


PRICE = {"input": 2.0, "output": 10.0}
MILLION_IN = Usage(input_tokens=1_000_000)  # $2.00 at PRICE


def test_a_call_that_would_end_exactly_at_the_budget_is_made() -> None:
    guard = CostGuard("m", {"m": PRICE}, budget_usd=1.0)
    assert guard.reserve(0.6) and guard.reserve(0.4) and not guard.refused
    assert not guard.reserve(0.01) and guard.refused
    unlimited = CostGuard("m", {"m": PRICE})
    assert unlimited.reserve(1e9) and not unlimited.refused


def test_runs_are_reserved_at_their_size_and_rate() -> None:
    guard = CostGuard("m", {"m": PRICE, "cheap": {"input": 1.0, "output": 1.0}}, budget_usd=10.0)
    assert guard.reserve_runs(lambda: MILLION_IN, runs=3, batch=True) == pytest.approx(3.0)
    assert guard.reserve_runs(lambda: MILLION_IN, model="cheap") == pytest.approx(1.0)
    assert guard.reserve_runs(lambda: MILLION_IN, runs=4) is None  # 4 + 8 > 10
    assert guard.refused

    def broken() -> Usage:
        raise ValueError("no estimate")

    assert CostGuard("m", {"m": PRICE}, budget_usd=1.0).reserve_runs(broken) == 0.0
    assert CostGuard("m", {"m": PRICE}).reserve_runs(lambda: MILLION_IN) == 0.0  # no budget


def test_an_unknown_model_is_budgeted_at_the_fallback_price() -> None:
    from pytest_skilltrigger.model.prices import FALLBACK_PRICE

    guard = CostGuard("unknown-model", {"m": PRICE}, budget_usd=100.0)
    assert guard.estimate_usd(MILLION_IN) == FALLBACK_PRICE["input"]
    assert guard.estimate_usd(MILLION_IN, model="m") == 2.0
    assert guard.reserve_runs(lambda: MILLION_IN) == FALLBACK_PRICE["input"]


def test_settling_replaces_the_reservation_by_the_cost() -> None:
    guard = CostGuard("m", {"m": PRICE}, budget_usd=3.0)
    held = guard.reserve_runs(lambda: MILLION_IN)  # $2 held
    assert held == 2.0 and not guard.reserve(1.5)
    guard.settle(held, Calls(Usage(input_tokens=500_000), 1, "items"))  # cost $1
    assert guard.spent_usd == pytest.approx(1.0) and guard.reserve(1.9)
    guard.settle(5.0, Calls(Usage(), 0, "items"))  # a larger release never makes room below zero
    assert guard.reserve(2.0) and not guard.reserve(0.01)
    spend = guard.by_phase["items"]
    assert spend.calls == 1 and spend.cost_usd == pytest.approx(1.0)


def test_batch_calls_cost_half_and_are_counted_apart() -> None:
    guard = CostGuard("m", {"m": PRICE}, budget_usd=10.0)
    guard.settle(0.0, Calls(MILLION_IN, 4, "items", batch=True))
    guard.add(Calls(MILLION_IN, 2, "rounds"))
    items, rounds = guard.by_phase["items"], guard.by_phase["rounds"]
    assert (items.calls, items.batch_calls, items.cost_usd) == (4, 4, 1.0)
    assert (rounds.calls, rounds.batch_calls, rounds.cost_usd) == (2, 0, 2.0)
    assert guard.spent_usd == pytest.approx(3.0) and guard.total().calls == 6


def test_what_another_process_spent_counts_against_the_budget_only() -> None:
    guard = CostGuard("m", {"m": PRICE}, budget_usd=1.0)
    guard.charge(0.9)
    assert guard.by_phase == {} and guard.spent_usd == pytest.approx(0.9)
    assert not guard.reserve(0.2) and guard.reserve(0.1)


def test_the_budget_reason_names_the_budget() -> None:
    from pytest_skilltrigger.engine.cost_guard import budget_reached
    from pytest_skilltrigger.model.outcome import BUDGET_REACHED

    assert budget_reached(0.25) == f"{BUDGET_REACHED} of $0.25 reached; no new calls"
