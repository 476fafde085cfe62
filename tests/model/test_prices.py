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
    usage = Usage(
        input_tokens=1000,
        output_tokens=1000,
        cache_creation_input_tokens=3000,
        cache_read_input_tokens=10_000,
        cache_creation_1h_input_tokens=2000,
    )
    assert cost_usd(usage, price_of(model)) == pytest.approx(dollars)


def test_a_long_prompt_is_billed_at_the_long_tier_per_request() -> None:
    """claude-haiku-5-5 above 100k prompt tokens (cache reads and writes count)."""
    price = price_of("claude-haiku-5-5")
    short = Usage(input_tokens=1000, cache_read_input_tokens=99_000, output_tokens=100)
    long = Usage(input_tokens=1001, cache_read_input_tokens=99_000, output_tokens=100)
    assert cost_usd(short, price) == pytest.approx((0.10 * 1000 + 0.01 * 99_000 + 0.5 * 100) / 1e6)
    assert cost_usd(long, price) == pytest.approx((0.50 * 1001 + 0.05 * 99_000 + 2.5 * 100) / 1e6)


def test_the_api_usage_shape_gives_the_one_hour_writes() -> None:
    usage = Usage.from_dict(
        {
            "input_tokens": 5,
            "cache_creation_input_tokens": 30,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 20},
        }
    )
    assert usage.cache_creation_1h_input_tokens == 20 and usage.prompt_tokens == 35


def test_a_price_file_overrides_any_rate_and_derives_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {"claude-opus-5-5": {"cache_read": 0.4}, "my-model": {"input": 2.0, "output": 8.0}}
        )
    )
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


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("cheap", "needs an object of rates"),
        ({"input": True, "output": 2.0}, "rates must be numbers of at least 0"),
        ({"input": "1", "output": 2.0}, "rates must be numbers of at least 0"),
        (
            {"input": 1.0, "output": 2.0, "long": {"input": 1, "output": 2}},
            "long_above and long go together",
        ),
        (
            {"input": 1.0, "output": 2.0, "long_above": 0, "long": {"input": 1, "output": 2}},
            "long must hold rates and long_above a positive token count",
        ),
        (
            {"input": 1.0, "output": 2.0, "long_above": 1.5, "long": {"input": 1, "output": 2}},
            "long must hold rates and long_above a positive token count",
        ),
        (
            {"input": 1.0, "output": 2.0, "long_above": 10, "long": {"input": 1}},
            "long must hold rates and long_above a positive token count",
        ),
    ],
)
def test_every_kind_of_bad_entry_is_named(tmp_path: Path, entry: object, problem: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"new-model": entry}))
    with pytest.raises(InputError) as err:
        load_prices(str(path))
    assert f"model 'new-model': {problem}" in str(err.value) and str(path) in str(err.value)


def test_an_unknown_rate_lists_the_known_ones(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": {"input": 1, "output": 2, "zz": 1, "aa": 2}}))
    with pytest.raises(InputError) as err:
        load_prices(str(path))
    assert (
        "unknown rate 'aa' (known: input, output, cache_write, cache_write_1h, cache_read, "
        "long_above, long)"
    ) in str(err.value)


def test_an_unreadable_or_shapeless_price_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.json"
    with pytest.raises(InputError, match="cannot read price table"):
        load_prices(str(missing))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InputError, match="cannot read price table"):
        load_prices(str(broken))
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(InputError, match="must be an object of model -> "):
        load_prices(str(listed))


def test_the_table_without_a_file_is_a_copy() -> None:
    from pytest_skilltrigger.model.prices import PRICES_PER_MTOK

    table = load_prices(None)
    assert table == PRICES_PER_MTOK and load_prices("") == PRICES_PER_MTOK
    table["claude-opus-5-5"]["input"] = 99.0
    assert PRICES_PER_MTOK["claude-opus-5-5"]["input"] == 4.0


def test_a_price_file_can_give_a_long_tier(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps(
            {"m": {"input": 1, "output": 2, "long_above": 50, "long": {"input": 3, "output": 4}}}
        )
    )
    entry = load_prices(str(path))["m"]
    assert entry == {
        "input": 1.0,
        "output": 2.0,
        "long_above": 50,
        "long": {"input": 3.0, "output": 4.0},
    }
    assert isinstance(entry["input"], float) and isinstance(entry["long_above"], int)
    at_edge, past = Usage(input_tokens=50), Usage(input_tokens=51)
    assert cost_usd(at_edge, entry) == pytest.approx(50 * 1 / 1e6)
    assert cost_usd(past, entry) == pytest.approx(51 * 3 / 1e6)


def test_dated_names_take_the_longest_known_prefix() -> None:
    table = {"claude-x": {"input": 1.0, "output": 1.0}, "claude-x-5": {"input": 2.0, "output": 2.0}}
    assert price_of("claude-x-5-20260101", table) == table["claude-x-5"]
    assert price_of("claude-x-4", table) == table["claude-x"]
    assert price_of("other", table) is None and price_of(None, table) is None
    assert price_of("", table) is None
    assert price_of("claude-haiku-4-5-20251001") == price_of("claude-haiku-4-5")


def test_rates_a_table_leaves_out_are_derived_from_the_input_price() -> None:
    from pytest_skilltrigger.model.prices import maybe_cost_usd, rate, rate_of

    price = {"input": 2.0, "output": 8.0}
    assert rate(price, "cache_write") == 2.5 and rate(price, "cache_write_1h") == 4.0
    assert rate(price, "cache_read") == pytest.approx(0.2) and rate(price, "output") == 8.0
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert maybe_cost_usd(usage, price) == 10.0 and maybe_cost_usd(usage, price, True) == 5.0
    assert maybe_cost_usd(usage, None) is None
    assert rate_of(True) == 0.5 and rate_of(False) == 1.0


def test_one_hour_writes_are_never_more_than_the_writes() -> None:
    """An API usage whose one-hour count passes the writes (it cannot, but a proxy may say
    so) is priced as writes, never as negative five-minute ones."""
    price = {"input": 1.0, "output": 1.0}
    usage = Usage(cache_creation_input_tokens=100, cache_creation_1h_input_tokens=300)
    assert cost_usd(usage, price) == pytest.approx(100 * 2.0 / 1e6)


def test_spends_add_up_and_an_unknown_cost_stays_unknown() -> None:
    from pytest_skilltrigger.model.prices import Calls, Spend, total_of

    a = Spend()
    a.add(Calls(Usage(10, 1), 2, "items", batch=True), 0.5)
    a.add(Calls(Usage(5, 0), 1, "items"), 0.25)
    assert (a.calls, a.batch_calls, a.usage, a.cost_usd) == (3, 2, Usage(15, 1), 0.75)
    b = Spend(1, Usage(1, 1), None, 0)
    both = a + b
    assert both.calls == 4 and both.usage == Usage(16, 2) and both.cost_usd is None
    assert (a.calls, a.cost_usd) == (3, 0.75)  # adding made a new one
    assert total_of([a, a]).cost_usd == 1.5 and total_of([]).calls == 0
    assert Spend(1, Usage(), 0.1234567).to_dict()["cost_usd"] == 0.123457
    assert Spend(1, Usage(), None).to_dict()["cost_usd"] is None
    assert Spend(3, Usage(), 0.0, 2).to_dict()["batch_calls"] == 2


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "unknown"),
        (0, "$0.00"),
        (12.5, "$12.50"),
        (1, "$1.00"),
        (-2.345, "$-2.35"),
        (0.5, "$0.50"),
        (0.042, "$0.042"),
        (0.0001, "$0.0001"),
        (0.00012345, "$0.00012"),
        (0.1, "$0.10"),
        (0.999, "$1.00"),
        (0.0101, "$0.01"),
        (-0.042, "$-0.042"),
    ],
)
def test_small_amounts_keep_two_significant_digits(value: float | None, text: str) -> None:
    from pytest_skilltrigger.model.prices import format_usd

    assert format_usd(value) == text


def test_the_long_tier_is_per_request_when_usage_is_summed() -> None:
    """Two 60k-token prompts summed (a run's retry, or a worker's spending) are two short
    requests, not one long one; two 120k-token prompts are two long ones."""
    price = price_of("claude-haiku-5-5")
    assert price is not None
    two_short = Usage(input_tokens=120_000)
    assert cost_usd(two_short, price, requests=2) == pytest.approx(120_000 * 0.10 / 1e6)
    two_long = Usage(input_tokens=240_000)
    assert cost_usd(two_long, price, requests=2) == pytest.approx(240_000 * 0.50 / 1e6)
    assert cost_usd(two_short, price) == pytest.approx(120_000 * 0.50 / 1e6)  # one request
