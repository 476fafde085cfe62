"""Prices per model: each kind of token at its own rate, 5-minute and 1-hour cache writes
apart, a long-prompt tier per request, and a price file that may override any rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import cost_usd, load_prices, price_of
from pytest_skilltrigger.support.errors import InputError


@pytest.mark.parametrize(
    ("model", "dollars"),
    [
        # input 1k, 5-minute writes 1k (of 3k written), 1-hour writes 2k, reads 10k, output 1k
        ("claude-opus-5-5", (4 * 1 + 5 * 1 + 8 * 2 + 0.20 * 10 + 20 * 1) / 1000),
        ("claude-opus-5", (5 + 6.25 + 10 * 2 + 0.50 * 10 + 25) / 1000),
        ("claude-sonnet-5-5", (2 + 2.5 + 4 * 2 + 0.10 * 10 + 10) / 1000),
        ("claude-fable-5-1", (10 + 12.5 + 20 * 2 + 0.25 * 10 + 50) / 1000),
        ("claude-fable-5", (10 + 12.5 + 20 * 2 + 1.0 * 10 + 50) / 1000),
        ("claude-haiku-4-5", (1 + 1.25 + 2 * 2 + 0.10 * 10 + 5) / 1000),
        ("claude-haiku-5-5", (0.10 + 0.125 + 0.20 * 2 + 0.01 * 10 + 0.50) / 1000),
    ],
)
def test_each_model_has_its_own_cache_rates(model: str, dollars: float) -> None:
    usage = Usage(input_tokens=1000, output_tokens=1000, cache_creation_input_tokens=3000,
                  cache_read_input_tokens=10_000, cache_creation_1h_input_tokens=2000)  # fmt: skip
    assert cost_usd(usage, price_of(model)) == pytest.approx(dollars)


def test_a_long_prompt_is_billed_at_the_long_tier_per_request() -> None:
    """claude-haiku-5-5 above 100k prompt tokens (cache reads and writes count)."""
    price = price_of("claude-haiku-5-5")
    short = Usage(input_tokens=1000, cache_read_input_tokens=99_000, output_tokens=100)
    long = Usage(input_tokens=1001, cache_read_input_tokens=99_000, output_tokens=100)
    assert cost_usd(short, price) == pytest.approx((0.10 * 1000 + 0.01 * 99_000 + 0.5 * 100) / 1e6)
    assert cost_usd(long, price) == pytest.approx((0.50 * 1001 + 0.05 * 99_000 + 2.5 * 100) / 1e6)


def test_the_api_usage_shape_gives_the_one_hour_writes() -> None:
    usage = Usage.from_dict({"input_tokens": 5, "cache_creation_input_tokens": 30,
                             "cache_creation": {"ephemeral_5m_input_tokens": 10,
                                                "ephemeral_1h_input_tokens": 20}})  # fmt: skip
    assert usage.cache_creation_1h_input_tokens == 20 and usage.prompt_tokens == 35


def test_a_price_file_overrides_any_rate_and_derives_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"claude-opus-5-5": {"cache_read": 0.4},
                                "my-model": {"input": 2.0, "output": 8.0}}))  # fmt: skip
    table = load_prices(str(path))
    assert table["claude-opus-5-5"]["cache_read"] == 0.4
    assert table["claude-opus-5-5"]["input"] == 4.0  # the rest kept
    usage = Usage(cache_creation_input_tokens=1000, cache_read_input_tokens=1000)
    assert cost_usd(usage, table["my-model"]) == pytest.approx((2.5 + 0.2) / 1000)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"input": 1.0}, "needs numeric input and output prices"),
        ({"input": 1.0, "output": 2.0, "cache_reads": 0.1}, "unknown rate 'cache_reads'"),
        ({"input": -1, "output": 2.0}, "rates must be numbers of at least 0"),
        ({"input": 1.0, "output": 2.0, "long_above": 10}, "long_above and long go together"),
    ],
)
def test_a_bad_price_file_is_one_line_naming_the_model(
    tmp_path: Path, entry: dict, problem: str
) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"new-model": entry}))
    with pytest.raises(InputError, match=f"model 'new-model': {problem}"):
        load_prices(str(path))
