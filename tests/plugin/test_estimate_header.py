"""The header's estimate, before any call: every item it will sample (trigger and routing
entries, once per model), the rounds' most on top; checked against what the server saw."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.engine.estimate import combined, estimate_session
from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import cost_usd, price_of
from pytest_skilltrigger.model.settings import Settings
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

LINE = re.compile(
    r"estimate for (\d+) queries: up to ([\d,]+) calls \(([\d,]+) if every query "
    r"is clear-cut\), about \$[\d.]+ to \$[\d.]+ on ([^;]+)"
    r"(?:; the improvement rounds up to ([\d,]+) more calls \(at most \$[\d.]+\) "
    r"and (\d+) requests to the improve model)?"
)


def make_folder(root: Path) -> Path:
    """Two skills of one folder, four entries each, and a routing set of three entries."""
    folder = root / "skills"
    for name, words in (("sheets", "spreadsheet columns"), ("notes", "meeting notes")):
        (folder / name / "evals").mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Tidy {words} for the team.\n---\n\n# {name}\n"
        )
        entries = [{"query": f"tidy the {words} {i}", "should_trigger": True} for i in range(2)]
        entries += [{"query": f"bake bread {name} {i}", "should_trigger": False} for i in range(2)]
        (folder / name / "evals" / "trigger-eval.json").write_text(json.dumps(entries))
    (folder / "routing-eval.json").write_text(
        json.dumps(
            [
                {"query": "tidy the spreadsheet columns please", "expected_skill": "sheets"},
                {"query": "write up the meeting notes now", "expected_skill": "notes"},
                {"query": "paint the garden fence", "expected_skill": None},
            ]
        )
    )
    return folder


def header(result: pytest.RunResult) -> re.Match[str]:
    found = next((LINE.search(line) for line in result.stdout.lines if LINE.search(line)), None)
    assert found is not None, result.stdout.str()
    return found


def test_the_estimate_counts_every_item_and_bounds_the_calls_made(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_folder(pytester.path)
    result = pytester.runpytest_subprocess(*plugin_args(folder, "--trigger-confidence=0.95"))
    found = header(result)
    queries, most, fewest = (int(found.group(i).replace(",", "")) for i in (1, 2, 3))
    # 8 entries and 3 routing ones; at most 15 runs, each at most 5 calls (a turn's bound)
    assert (queries, most, fewest) == (11, 11 * 15 * 5, 11 * 4)
    assert "the most counts 5 calls a run (a run may look around first)" in result.stdout.str()
    assert fewest <= fake_api.stats["trigger_calls"] <= most


def test_a_matrix_counts_each_model_and_the_rounds_once(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Each model samples every item; the rounds run on the first model (their acceptance
    race on each), and what they made stays within their bound."""
    folder = make_folder(pytester.path)
    models = "claude-opus-5-5,claude-haiku-4-5"
    one = header(pytester.runpytest_subprocess(*plugin_args(folder)))
    result = pytester.runpytest_subprocess(
        *plugin_args(
            folder,
            f"--trigger-model={models}",
            "--trigger-optimize",
            "--trigger-max-iterations=2",
            "--trigger-confidence=off",
        )
    )
    found = header(result)
    assert int(found.group(2)) == 2 * int(one.group(2))
    assert found.group(4).startswith("claude-opus-5-5 and claude-haiku-4-5")
    rounds, asks = int(found.group(5).replace(",", "")), int(found.group(6))
    assert asks == 2 * 1 * 2  # two skills, one round each, a proposal and a repair at most
    made = fake_api.stats["trigger_calls"]
    assert made <= int(found.group(2)) + rounds
    assert fake_api.stats["improve_calls"] <= asks


class Sized(TriggerBackend):
    """A backend whose every request is the same size (only ``estimate`` is used)."""

    model = "claude-opus-5-5"

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        return Usage(input_tokens=1000, output_tokens=500)

    def run(self, context, query):  # type: ignore[no-untyped-def]
        raise AssertionError("an estimate makes no call")


def test_the_dollars_follow_the_cache_and_the_runs() -> None:
    """The low end: every run reads the prefix from the cache, each context writes it once,
    at most 100 output tokens; the high end: every run uncached at the rule's most. (On a
    model whose listing comes before the query: the prefix holds it.)"""
    price = price_of("claude-opus-5-5")
    assert price is not None
    reminders = "claude-haiku-4-5"
    first = TriggerContext("a", "A.", model=reminders)
    second = TriggerContext("b", "B.", model=reminders)
    samplings = [(first, "q1"), (first, "q2"), (second, "q3")]
    got = estimate_session(samplings, Settings(), Sized(), price)
    own = len(b"q1") // 3 + 1
    read = Usage(input_tokens=own, output_tokens=100, cache_read_input_tokens=1000 - own)
    write = Usage(cache_creation_input_tokens=1000 - own)
    assert got.fewest_usd == pytest.approx(
        3 * 4 * cost_usd(read, price) + 2 * cost_usd(write, price)
    )
    assert got.most_usd == pytest.approx(3 * 15 * cost_usd(Usage(1000, 500), price))
    assert (got.queries, got.fewest_calls, got.most_calls) == (3, 12, 45)
    # the dearest call, with the longest description a round may propose (1,024 characters)
    longest = Usage(1000 + (1024 - len(b"A.")) // 3, 500)
    sibling = ListedSkill("s", "Schön.")  # already improved: as long too, as wide in bytes
    wide = estimate_session(
        [(TriggerContext("a", "A.", (sibling,)), "q")], Settings(), Sized(), price
    ).call_usd[0]
    grown = 1000 + (1024 - 2) // 3 + (int(1024 * 7 / 6) - 7) // 3
    assert wide == pytest.approx(cost_usd(Usage(grown, 500), price))
    assert got.call_usd == pytest.approx((cost_usd(longest, price),))
    rounds = got.with_rounds(100, 0, 8)
    assert (rounds.round_calls, rounds.asks) == (100, 8)
    assert rounds.round_usd == pytest.approx(100 * cost_usd(longest, price))
    # a matrix: the rounds on the first model, the acceptance race on each, at its own price
    small = price_of("claude-haiku-4-5")
    assert small is not None and small != price
    both = combined([got, estimate_session(samplings, Settings(), Sized(), small)])
    priced = both.with_rounds(100, 10, 8)
    assert priced.round_calls == 110
    assert priced.round_usd == pytest.approx(
        100 * cost_usd(longest, price) + 10 * cost_usd(longest, small)
    )
    hidden = TriggerContext("c", "C.", model_invocable=False)  # never listed: no call
    assert estimate_session([(hidden, "q")], Settings(), Sized(), price).most_calls == 0


def test_no_cache_is_counted_on_where_the_listing_follows_the_query() -> None:
    """claude-opus-5-5 gets the listing in a system message after the query: every run sends
    the whole request anew, so even the low end reads nothing from the cache."""
    price = price_of("claude-opus-5-5")
    assert price is not None
    context = TriggerContext("a", "A.")  # the backend's model: claude-opus-5-5
    got = estimate_session([(context, "q1"), (context, "q2")], Settings(), Sized(), price)
    uncached = Usage(input_tokens=1000, output_tokens=100)
    assert got.fewest_usd == pytest.approx(2 * 4 * cost_usd(uncached, price))
    assert got.fewest_input == 2 * 4 * 1000


def test_stored_runs_lower_the_estimate_to_the_runs_still_to_make() -> None:
    """A sampling its stored runs decide costs nothing; one they start counts what is left:
    two triggers stored under the reference rule's three runs leave none (decided), one
    trigger and one miss leave one."""
    from pytest_skilltrigger.model.outcome import RunOutcome
    from pytest_skilltrigger.model.plan import reference_plan

    plan = reference_plan(3, 0.5)
    hit, miss = RunOutcome("triggered", "skill:a"), RunOutcome("not_triggered", "text")
    assert plan.runs_to_go([hit, hit]) == (0, 0)
    assert plan.runs_to_go([hit, miss]) == (1, 1)
    assert plan.runs_to_go() == (2, 3)
    price = price_of("claude-opus-5-5")
    context = TriggerContext("a", "A.")
    got = estimate_session(
        [(context, "q1"), (context, "q2")], Settings(), Sized(), price, [(0, 0), (1, 1)]
    )
    assert (got.queries, got.stored, got.fewest_calls, got.most_calls) == (2, 1, 1, 1)
    assert "stored runs decide 1 of 2" in got.line()
    none = estimate_session([(context, "q1")], Settings(), Sized(), price, [(0, 0)])
    assert none.line() == "estimate for 1 query: no call, stored runs decide every one"
    # the rounds' calls are priced all the same: they ask new descriptions, never stored
    assert none.call_usd == got.call_usd and none.call_usd[0]
    assert "(at most $0.00)" not in none.with_rounds(100, 0, 2).line()


def test_a_selection_gets_the_estimate_of_what_it_selected(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """``-k`` runs two of the eleven items: after collection a line sizes those two."""
    folder = make_folder(pytester.path)
    result = pytester.runpytest_subprocess(*plugin_args(folder, "-k", "sheets and tidy"))
    result.stdout.fnmatch_lines(
        ["skilltrigger: the 2 selected items' estimate for 2 queries: up to *"]
    )
    assert header(result).group(1) == "11"  # the header still sizes every item


def test_under_q_the_estimate_is_said_before_any_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """-q shows no header: the estimate is the line after collection."""
    folder = make_folder(pytester.path)
    result = pytester.runpytest_subprocess(*plugin_args(folder, "-q"))
    first = next(i for i, line in enumerate(result.stdout.lines) if "estimate for 11" in line)
    progress = next(i for i, line in enumerate(result.stdout.lines) if "[100%]" in line)
    assert first < progress
