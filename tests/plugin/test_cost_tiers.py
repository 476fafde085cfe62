"""What a session reports it spent equals the server's usage at the published rates: the
long-prompt tier of claude-haiku-5-5 applied per request. The usage is what the fake API
billed, answer by answer; the rates are the price list's, written out here on their own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

# dollars per million tokens: input, 5-minute write, 1-hour write, cache read, output
HAIKU_5_5 = (0.10, 0.125, 0.20, 0.01, 0.50)
HAIKU_5_5_LONG = (0.50, 0.625, 1.00, 0.05, 2.50)  # a prompt over 100,000 tokens
HAIKU_4_5 = (1.0, 1.25, 2.0, 0.10, 5.0)


def billed(usage: dict[str, Any], rates: tuple[float, ...]) -> float:
    """One answer's price, as the price list reads."""
    hour = usage.get("cache_creation", {}).get("ephemeral_1h_input_tokens", 0)
    five = usage["cache_creation_input_tokens"] - hour
    tokens = (
        usage["input_tokens"],
        five,
        hour,
        usage["cache_read_input_tokens"],
        usage["output_tokens"],
    )
    return sum(t * r for t, r in zip(tokens, rates, strict=True)) / 1_000_000


def prompt(usage: dict[str, Any]) -> int:
    return (
        usage["input_tokens"]
        + usage["cache_creation_input_tokens"]
        + usage["cache_read_input_tokens"]
    )


def make_skill(root: Path) -> Path:
    folder = root / "skills" / "ledger"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: ledger\ndescription: Keep the ledger.\n---\n")
    evals = [
        {"query": "post these invoices to the ledger", "should_trigger": True},
        {"query": "write a poem", "should_trigger": False},
    ]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    return folder


@pytest.mark.parametrize("padding,rates", [(120_000, HAIKU_5_5_LONG), (0, HAIKU_5_5)])
def test_a_long_prompt_is_billed_at_the_long_tier(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, padding: int, rates: tuple
) -> None:
    fake_api.prompt_padding = padding
    out = pytester.path / "out.json"
    pytester.runpytest_subprocess(
        *plugin_args(make_skill(pytester.path), f"--trigger-json={out}"),
        "--trigger-model=claude-haiku-5-5",
        "--trigger-confidence=off",
        "--trigger-runs=3",
    )
    totals = json.loads(out.read_text())["totals"]
    assert totals["calls"] == len(fake_api.usages) > 0
    assert all((prompt(u) > 100_000) == bool(padding) for u in fake_api.usages)
    expected = sum(billed(u, rates) for u in fake_api.usages)
    # the JSON gives micro-dollars: the sum rounded (the order of the sum may differ by
    # float error, which decides a rounding at exactly half a micro-dollar)
    assert totals["cost_usd"] == pytest.approx(expected, abs=0.5e-6 + 1e-12)
