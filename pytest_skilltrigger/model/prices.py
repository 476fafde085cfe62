"""Token prices, what a call costs at them, and what some part of a session spent.

Prices are US dollars per million tokens, for budgeting, not a bill. Each model has its own
rates: ``input``, ``output``, ``cache_write`` (a 5-minute cache write), ``cache_write_1h``,
``cache_read``; a model whose rates change with the prompt's length has ``long_above`` (the
prompt tokens past which they apply, cache reads and writes included) and ``long`` (the rates
then), applied per request. A rate a table leaves out is derived from the input price (1.25x,
2x, 0.1x). Calls made in message batches cost half. Override or extend any rate with a JSON
file (``--trigger-prices``): ``{"model-id": {"input": 2.0, "output": 10.0, "cache_read": 0.2}}``.

Sources, read 2026-12-02: the "Model pricing" table of the Claude platform's pricing page
(platform.claude.com/docs/en/about-claude/pricing) and the models overview for every rate
except two that only third-party release notes give (PromptFuel v1.0.23, synaps_cli's
pricing module, both citing the same pages): claude-haiku-5-5's cache read and its rates
above 100k prompt tokens, and claude-sonnet-5-5's cache read of $0.10, down from $0.20 on
2026-10-07.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.support.errors import InputError


def _rates(i: float, w5: float, w1h: float, read: float, out: float) -> dict[str, float]:
    return {"input": i, "cache_write": w5, "cache_write_1h": w1h, "cache_read": read, "output": out}


PRICES_PER_MTOK: dict[str, dict[str, Any]] = {
    "claude-fable-5-1": _rates(10.0, 12.5, 20.0, 0.25, 50.0),
    "claude-mythos-5-1": _rates(10.0, 12.5, 20.0, 0.25, 50.0),
    "claude-fable-5": _rates(10.0, 12.5, 20.0, 1.0, 50.0),
    "claude-mythos-5": _rates(10.0, 12.5, 20.0, 1.0, 50.0),
    "claude-opus-5-5": _rates(4.0, 5.0, 8.0, 0.20, 20.0),
    "claude-opus-5": _rates(5.0, 6.25, 10.0, 0.50, 25.0),
    "claude-opus-4-8": _rates(5.0, 6.25, 10.0, 0.50, 25.0),
    "claude-sonnet-5-5": _rates(2.0, 2.5, 4.0, 0.10, 10.0),  # cache read: third-party
    "claude-sonnet-5": _rates(2.0, 2.5, 4.0, 0.20, 10.0),
    "claude-haiku-5-5": {  # cache read and the long tier: third-party
        **_rates(0.10, 0.125, 0.20, 0.01, 0.50),
        "long_above": 100_000,
        "long": _rates(0.50, 0.625, 1.00, 0.05, 2.50),
    },
    "claude-haiku-4-5": _rates(1.0, 1.25, 2.0, 0.10, 5.0),
    "claude-sonnet-4-5": _rates(3.0, 3.75, 6.0, 0.30, 15.0),
    "claude-opus-4-5": _rates(5.0, 6.25, 10.0, 0.50, 25.0),
}
# The budget guard prices a model missing from the table like the most expensive listed one,
# so a budget is never under-estimated; reports say its cost is unknown instead.
FALLBACK_PRICE: dict[str, Any] = _rates(10.0, 12.5, 20.0, 1.0, 50.0)
# what a rate left out of a table is, from the input price
DERIVED = {"cache_write": 1.25, "cache_write_1h": 2.0, "cache_read": 0.1}
RATE_KEYS = ("input", "output", *DERIVED)
# Message Batches cost half the live price, for every kind of token.
BATCH_RATE = 0.5


def load_prices(path: str | None) -> dict[str, dict[str, Any]]:
    """The default table, updated from a JSON file when one is given (a model's rates there
    replace the table's one by one; a new model needs ``input`` and ``output``)."""
    table: dict[str, dict[str, Any]] = json.loads(json.dumps(PRICES_PER_MTOK))
    if not path:
        return table
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(path, f"cannot read price table: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "price table must be an object of model -> {input, output, ...}")
    for model, price in data.items():
        problem = _price_problem(price, model in table)
        if problem:
            raise InputError(path, f"model {model!r}: {problem}")
        entry = table.setdefault(model, {})
        entry.update({k: float(v) for k, v in price.items() if k in RATE_KEYS})
        if "long_above" in price:
            entry["long_above"] = int(price["long_above"])
            entry["long"] = {k: float(v) for k, v in price["long"].items()}
    return table


def _price_problem(price: Any, known: bool) -> str | None:
    """What is wrong with one model's entry of a price file, if anything."""
    if not isinstance(price, dict):
        return "needs an object of rates"
    unknown = set(price) - set(RATE_KEYS) - {"long_above", "long"}
    if unknown:
        known_keys = ", ".join((*RATE_KEYS, "long_above", "long"))
        return f"unknown rate {sorted(unknown)[0]!r} (known: {known_keys})"
    rates = {k: v for k, v in price.items() if k in RATE_KEYS}
    if not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in rates.values()
    ):
        return "rates must be numbers of at least 0"
    if not known and not {"input", "output"} <= set(rates):
        return "needs numeric input and output prices"
    if ("long_above" in price) != ("long" in price):
        return "long_above and long go together"
    if "long" in price and (
        _price_problem(price["long"], False)
        or not isinstance(price["long_above"], int)
        or price["long_above"] <= 0
    ):
        return "long must hold rates and long_above a positive token count"
    return None


Price = dict[str, Any]

# The phases a session's calls are counted under (``by_phase`` in the JSON totals).
PHASES = ("draft", "controls", "items", "checks", "rounds", "improve", "confirmation")


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


def did_you_mean(model: str | None) -> str:
    """``did you mean claude-opus-4-5?`` for a model id the price table does not know but
    one it knows is close to (a typo, a dot for a dash); empty otherwise."""
    if not model or price_of(model) is not None:
        return ""

    close = difflib.get_close_matches(model.replace(".", "-"), PRICES_PER_MTOK, n=1, cutoff=0.75)
    return f"did you mean {close[0]}?" if close else ""


def rate(price: Price, key: str) -> float:
    """One rate of a price entry, derived from its input price when the entry leaves it out."""
    value = price.get(key)
    if value is None:
        return float(price["input"]) * DERIVED[key]
    return float(value)


def cost_usd(usage: Usage, price: Price, requests: int = 1) -> float:
    """Estimated dollars for the usage of ``requests`` requests (summed, of alike size) at a
    price entry: each kind of token at its own rate, 5-minute and 1-hour cache writes apart,
    and the long-prompt rates when a request's prompt passes the entry's ``long_above`` (the
    tier is per request: summed usage is judged by its mean prompt)."""
    if "long_above" in price and usage.prompt_tokens > price["long_above"] * max(requests, 1):
        price = price["long"]
    one_hour = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    return (
        usage.input_tokens * rate(price, "input")
        + (usage.cache_creation_input_tokens - one_hour) * rate(price, "cache_write")
        + one_hour * rate(price, "cache_write_1h")
        + usage.cache_read_input_tokens * rate(price, "cache_read")
        + usage.output_tokens * rate(price, "output")
    ) / 1_000_000


def maybe_cost_usd(
    usage: Usage, price: Price | None, batch: bool = False, requests: int = 1
) -> float | None:
    """The cost at a known price (at the batch rate for a batch call), None at an unknown
    one."""
    return None if price is None else cost_usd(usage, price, requests) * rate_of(batch)


def rate_of(batch: bool) -> float:
    """The share of the live price a call pays: half in a message batch."""
    return BATCH_RATE if batch else 1.0


@dataclass(frozen=True)
class Calls:
    """Requests to count: what they used, how many, under which phase, the model that
    answered (None: the session's), and whether they were made in a message batch."""

    usage: Usage
    requests: int
    phase: str
    model: str | None = None
    batch: bool = False
    waited: float = 0.0  # seconds spent waiting for the rate limit
    rate_limited: int = 0  # 429 answers met

    @classmethod
    def of(cls, outcome: RunOutcome, phase: str) -> Calls:
        """A run's requests."""
        return cls(
            outcome.usage,
            outcome.requests,
            phase,
            outcome.model,
            outcome.batch,
            outcome.waited,
            outcome.rate_limited,
        )


@dataclass
class Spend:
    """Calls, tokens and cost of some part of a session; the cost is None when any of it was
    made with a model whose price is unknown."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    batch_calls: int = 0  # of ``calls``, those made in message batches (at the batch rate)
    waited_seconds: float = 0.0  # time runs waited for the rate limit (added over runs)
    rate_limited: int = 0  # 429 answers met

    def add(self, calls: Calls, cost: float | None) -> None:
        made = Spend(
            calls=calls.requests,
            usage=calls.usage,
            cost_usd=cost,
            batch_calls=calls.requests if calls.batch else 0,
            waited_seconds=calls.waited,
            rate_limited=calls.rate_limited,
        )
        self._take(made)

    def __add__(self, other: Spend) -> Spend:
        total = Spend(**vars(self))
        total._take(other)
        return total

    def _take(self, other: Spend) -> None:
        """Add ``other``'s counts to these (the cost becomes unknown if either is)."""
        self.calls += other.calls
        self.batch_calls += other.batch_calls
        self.usage = self.usage + other.usage
        self.waited_seconds += other.waited_seconds
        self.rate_limited += other.rate_limited
        known = other.cost_usd is not None and self.cost_usd is not None
        self.cost_usd = self.cost_usd + other.cost_usd if known else None  # type: ignore[operator]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Spend:
        """A spend as :meth:`to_dict` wrote it (a shard's report, read back to merge)."""
        cost = data.get("cost_usd")
        return cls(
            calls=int(data.get("calls") or 0),
            usage=Usage.from_dict(data),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            batch_calls=int(data.get("batch_calls") or 0),
            waited_seconds=float(data.get("waited_seconds") or 0.0),
            rate_limited=int(data.get("rate_limited") or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 6)
        return {
            "calls": self.calls,
            "batch_calls": self.batch_calls,
            **self.usage.to_dict(),
            "cost_usd": cost,
            "waited_seconds": round(self.waited_seconds, 3),
            "rate_limited": self.rate_limited,
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
