"""The session's cost guard: every call counted and priced by phase, within the budget.

The prices and the arithmetic of a cost are value types (:mod:`pytest_skilltrigger.model.prices`);
this is the one mutable counter a session keeps, shared by the sampler's threads and the
message batches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from pytest_skilltrigger.model.outcome import BUDGET_REACHED, Usage
from pytest_skilltrigger.model.prices import (
    FALLBACK_PRICE,
    Calls,
    Price,
    Spend,
    cost_usd,
    format_usd,
    maybe_cost_usd,
    price_of,
    rate_of,
    total_of,
)


class CostGuard:
    """Counts what a session spends, by phase, and keeps it within the budget.

    Before a call the sampler reserves its estimated cost (from the request's size, see
    ``TriggerBackend.estimate``), and a call is refused when what was spent, what is reserved
    and this estimate together would pass the budget: the estimate of what was sent never
    exceeds it, from the first call on. Once the call returns its reservation is replaced by
    its actual cost. ``budget_usd=None`` never refuses. A model missing from the price table
    is budgeted at :data:`FALLBACK_PRICE`, and its spend reported as unknown.
    """

    def __init__(
        self,
        model: str | None,
        prices: dict[str, Price] | None = None,
        budget_usd: float | None = None,
    ) -> None:
        self.model = model
        self.prices = prices
        self.budget_usd = budget_usd
        self.spent_usd = 0.0  # at budgeting prices (the fallback for unknown models)
        self.by_phase: dict[str, Spend] = {}
        self._reserved = 0.0
        self.refused = False  # a call was refused: the budget is spent for this session
        self._lock = threading.Lock()

    def price(self, model: str | None = None) -> Price | None:
        return price_of(model or self.model, self.prices)

    def estimate_usd(self, usage: Usage, model: str | None = None) -> float:
        """What a call of this size would cost, at budgeting prices."""
        return cost_usd(usage, self.price(model) or FALLBACK_PRICE)

    def reserve(self, estimate_usd: float) -> bool:
        """Reserve room for one call of this estimated cost; False when the budget does not
        allow it."""
        with self._lock:
            if self.budget_usd is not None and (
                self.spent_usd + self._reserved + estimate_usd > self.budget_usd
            ):
                self.refused = True
                return False
            self._reserved += estimate_usd
            return True

    def reserve_runs(
        self,
        estimate: Callable[[], Usage],
        runs: int = 1,
        batch: bool = False,
        model: str | None = None,
    ) -> float | None:
        """Reserve room for ``runs`` runs of the size ``estimate`` gives (at the batch rate
        for batch runs): the amount reserved, 0 without a budget, None when refused. An
        estimate that fails reserves the output alone: the run itself will say what is
        wrong with its request."""
        if self.budget_usd is None:
            return 0.0
        try:
            usage = estimate()
        except Exception:
            usage = Usage()
        cost = cost_usd(usage, self.price(model) or FALLBACK_PRICE) * rate_of(batch) * runs
        return cost if self.reserve(cost) else None

    def charge(self, usd: float) -> None:
        """Count against the budget what another process spent for this one (the xdist
        controller's batches): reported where it was spent, so not under a phase here."""
        with self._lock:
            self.spent_usd += usd

    def settle(self, reserved: float, calls: Calls) -> None:
        """Replace a reservation by the actual cost of a call (or of a run's calls)."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - reserved)
        self.add(calls)

    def add(self, calls: Calls) -> None:
        """Count calls (made here, or by an xdist worker) under their phase and the budget;
        batch calls at the batch rate."""
        price = self.price(calls.model)
        usage, count = calls.usage, calls.requests
        with self._lock:
            self.spent_usd += cost_usd(usage, price or FALLBACK_PRICE, count) * rate_of(calls.batch)
            spend = self.by_phase.setdefault(calls.phase, Spend())
            spend.add(calls, maybe_cost_usd(usage, price, calls.batch, count))

    def total(self) -> Spend:
        with self._lock:
            return total_of(self.by_phase.values())


def budget_reached(budget_usd: float | None) -> str:
    """Why a query is skipped once the budget cannot fund its next call."""
    return f"{BUDGET_REACHED} of {format_usd(budget_usd)} reached; no new calls"
