"""Token prices, what a call costs at them, and what some part of a session spent.

Prices are US dollars per million tokens, from the public price list at the time of writing;
they are estimates for budgeting, not a bill. Cache writes cost 1.25x the input price and cache
reads 0.1x; calls made in message batches cost half. Override or extend the table with a JSON
file (``--trigger-prices``): ``{"model-id": {"input": 2.0, "output": 10.0}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.outcome import Usage
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
# The budget guard prices a model missing from the table like the most expensive listed one,
# so a budget is never under-estimated; reports say its cost is unknown instead.
FALLBACK_PRICE = {"input": 10.0, "output": 50.0}
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.1
# Message Batches cost half the live price, for every kind of token.
BATCH_RATE = 0.5


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


Price = dict[str, float]

# The phases a session's calls are counted under (``by_phase`` in the JSON totals).
PHASES = ("draft", "items", "checks", "rounds", "improve", "confirmation")


def price_of(model: str | None, table: dict[str, Price] | None = None) -> Price | None:
    """The price entry for a model id, also for dated snapshots (``<id>-20260101``); None
    when the model is not in the table (its cost is then unknown)."""
    if not model:
        return None
    table = table or PRICES_PER_MTOK
    if model in table:
        return table[model]
    for known in sorted(table, key=len, reverse=True):
        if model.startswith(known):
            return table[known]
    return None


def cost_usd(usage: Usage, price: Price) -> float:
    """Estimated dollars for some usage at a price entry."""
    return (
        usage.input_tokens * price["input"]
        + usage.cache_creation_input_tokens * price["input"] * CACHE_WRITE_FACTOR
        + usage.cache_read_input_tokens * price["input"] * CACHE_READ_FACTOR
        + usage.output_tokens * price["output"]
    ) / 1_000_000


def maybe_cost_usd(usage: Usage, price: Price | None, batch: bool = False) -> float | None:
    """The cost at a known price (at the batch rate for a batch call), None at an unknown
    one."""
    return None if price is None else cost_usd(usage, price) * rate_of(batch)


def rate_of(batch: bool) -> float:
    """The share of the live price a call pays: half in a message batch."""
    return BATCH_RATE if batch else 1.0


@dataclass
class Spend:
    """Calls, tokens and cost of some part of a session; the cost is None when any of it was
    made with a model whose price is unknown."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    batch_calls: int = 0  # of ``calls``, those made in message batches (at the batch rate)

    def add(self, calls: int, usage: Usage, cost: float | None, batch_calls: int = 0) -> None:
        self.calls += calls
        self.batch_calls += batch_calls
        self.usage = self.usage + usage
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    def __add__(self, other: Spend) -> Spend:
        total = Spend(self.calls, self.usage, self.cost_usd, self.batch_calls)
        total.add(other.calls, other.usage, other.cost_usd, other.batch_calls)
        return total

    def to_dict(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 6)
        return {
            "calls": self.calls,
            "batch_calls": self.batch_calls,
            **self.usage.to_dict(),
            "cost_usd": cost,
        }


def total_of(spends: Iterable[Spend]) -> Spend:
    """Several spends added up (the cost unknown if any part's is)."""
    total = Spend()
    for spend in spends:
        total = total + spend
    return total


def format_usd(value: float | None) -> str:
    """Dollars with the digits that say a small amount: ``$0.0001``, ``$0.042``, ``$12.50``."""
    if value is None:
        return "unknown"
    if value == 0 or abs(value) >= 1:
        return f"${value:.2f}"
    digits = max(2, 1 - math.floor(math.log10(abs(value))))  # two significant digits
    text = f"{value:.{digits}f}"
    whole, _, decimals = text.partition(".")
    decimals = decimals.rstrip("0").ljust(2, "0")
    return f"${whole}.{decimals}"
