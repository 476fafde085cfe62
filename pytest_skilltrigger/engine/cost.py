"""Token prices and the session's cost guard.

Prices are US dollars per million tokens, from the public price list at the time of writing;
they are estimates for budgeting, not a bill. Cache writes cost 1.25x the input price and cache
reads 0.1x. Override or extend the table with a JSON file (``--trigger-prices``):
``{"model-id": {"input": 2.0, "output": 10.0}}``.
"""

from __future__ import annotations

import json
import threading

from pytest_skilltrigger.engine.outcome import Usage
from pytest_skilltrigger.support.errors import InputError

PRICES_PER_MTOK: dict[str, dict[str, float]] = {
    "claude-fable-5-1": {"input": 10.0, "output": 50.0},
    "claude-opus-5-5": {"input": 4.0, "output": 20.0},
    "claude-opus-5": {"input": 5.0, "output": 25.0},
    "claude-sonnet-5-5": {"input": 2.0, "output": 10.0},
    "claude-sonnet-5": {"input": 2.0, "output": 10.0},
    "claude-haiku-5-5": {"input": 0.1, "output": 0.5},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0},
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0},
    "claude-opus-4-5": {"input": 5.0, "output": 25.0},
}
# Unknown models are priced like the most expensive listed one, so a budget is never
# under-estimated.
FALLBACK_PRICE = {"input": 10.0, "output": 50.0}
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1


def load_prices(path: str | None) -> dict[str, dict[str, float]]:
    """The default table, updated from a JSON file when one is given."""
    table = {k: dict(v) for k, v in PRICES_PER_MTOK.items()}
    if not path:
        return table
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(path, f"cannot read price table: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "price table must be an object of model -> {input, output}")
    for model, price in data.items():
        if not (
            isinstance(price, dict)
            and all(
                isinstance(price.get(k), (int, float)) and price[k] >= 0
                for k in ("input", "output")
            )
        ):
            raise InputError(path, f"model {model!r}: needs numeric input and output prices")
        table[model] = {"input": float(price["input"]), "output": float(price["output"])}
    return table


def price_of(model: str, table: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    """The price entry for a model id, also for dated snapshots (``<id>-20260101``)."""
    table = table or PRICES_PER_MTOK
    if model in table:
        return table[model]
    for known in sorted(table, key=len, reverse=True):
        if model.startswith(known):
            return table[known]
    return FALLBACK_PRICE


def cost_usd(usage: Usage, price: dict[str, float]) -> float:
    """Estimated dollars for some usage at a price entry."""
    return (
        usage.input_tokens * price["input"]
        + usage.cache_creation_input_tokens * price["input"] * CACHE_WRITE_FACTOR
        + usage.cache_read_input_tokens * price["input"] * CACHE_READ_FACTOR
        + usage.output_tokens * price["output"]
    ) / 1_000_000


class CostGuard:
    """Adds up spending and refuses new calls once the budget would be exceeded.

    Before a call, the guard reserves the average cost of the calls so far (a fair estimate of
    the next one); a call is refused when spent plus reserved plus that estimate would pass
    the budget. ``budget_usd=None`` never refuses.
    """

    def __init__(self, price: dict[str, float], budget_usd: float | None = None) -> None:
        self.price = price
        self.budget_usd = budget_usd
        self.spent_usd = 0.0
        self.calls = 0
        self.usage = Usage()
        self._reserved = 0.0
        self._lock = threading.Lock()
        self.exhausted = False

    def _estimate(self) -> float:
        return self.spent_usd / self.calls if self.calls else 0.0

    def reserve(self) -> float | None:
        """Reserve room for one call; None when the budget does not allow it."""
        with self._lock:
            estimate = self._estimate()
            if self.budget_usd is not None and (
                self.spent_usd + self._reserved + estimate > self.budget_usd
                or self.spent_usd >= self.budget_usd
            ):
                self.exhausted = True
                return None
            self._reserved += estimate
            return estimate

    def add(self, usage: Usage, calls: int) -> None:
        """Count calls made elsewhere (xdist workers) against the budget; they also inform
        the estimate of the next call."""
        with self._lock:
            self.spent_usd += cost_usd(usage, self.price)
            self.calls += calls
            self.usage = self.usage + usage

    def settle(self, reserved: float, usage: Usage) -> None:
        """Replace a reservation by the actual cost of the call."""
        with self._lock:
            self._reserved = max(0.0, self._reserved - reserved)
            self.spent_usd += cost_usd(usage, self.price)
            self.calls += 1
            self.usage = self.usage + usage
