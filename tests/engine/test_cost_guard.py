"""The cost guard's edge cases found in review: spending counted elsewhere (the xdist
workers') counts against the one budget and under its phase."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import cost_usd


def test_spending_counted_from_elsewhere_counts_against_the_budget_by_phase() -> None:
    """The controller adds the xdist workers' spending with its number of calls: it counts
    against the one budget and under its phase, and an unknown model's cost is unknown."""
    price = {"input": 3.0, "output": 15.0}
    guard = CostGuard("m", {"m": price}, budget_usd=1.0)
    usage = Usage(input_tokens=100_000, output_tokens=0)  # $0.30 over ten calls
    guard.add(usage, 10, "items")
    assert not guard.reserve(0.75) and guard.reserve(0.65)
    assert guard.by_phase["items"].calls == 10 and guard.by_phase["items"].usage == usage
    assert guard.total().cost_usd == pytest.approx(cost_usd(usage, price))
    guard.add(Usage(10, 1), 1, "improve", model="not-a-listed-model")
    assert guard.by_phase["improve"].cost_usd is None and guard.total().cost_usd is None
