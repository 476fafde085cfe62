"""How trustworthy each verdict rule is: wrong verdicts, flips between fresh runs, calls.

Part 1 is exact (no simulation noise): for every true trigger rate on a fine grid of 0..1,
:func:`pytest_skilltrigger.model.verdict.operating` follows every path of runs a rule can
take, wave by wave as the sampler makes them, with its probability. Averaged over rates spread
evenly over 0..1 (the worst case: real eval sets hold mostly clear-cut queries), it gives each
rule's calls per query, how often its verdict is on the wrong side of the threshold (for all
queries, and for those whose rate lies outside the margin, where the sequential rule
guarantees at most 1 - confidence), how often it ends borderline, and how often two fresh runs
of one query settle opposite verdicts.

Part 2 measures the same against the local fake Messages API with graded trigger rates
(``tests/graded_model.py``: rates spread over 0..1 by a seed, known exactly, a fresh draw per
run): the example skills' 60 queries, each rule run ``--repeats`` times on fresh draws with no
store, through the engine as a session runs it.

    .venv/bin/python benchmarks/bench_verdicts.py [--repeats 6] [--quick]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_skilltrigger.model.settings import Settings  # noqa: E402
from pytest_skilltrigger.model.verdict import (  # noqa: E402
    FixedRule,
    Rule,
    SequentialRule,
    operating,
)

RULES: list[tuple[str, Rule]] = [
    ("reference, 3 runs (--trigger-confidence off)", FixedRule(3)),
    ("reference, 9 runs", FixedRule(9)),
    ("sequential 95%, margin 0.15, Wald's bounds", SequentialRule(calibrated=False)),
    ("sequential 95%, margin 0.10", SequentialRule(margin=0.10)),
    ("sequential 95%, margin 0.15 (default)", SequentialRule()),
    ("sequential 95%, margin 0.20", SequentialRule(margin=0.20)),
    ("sequential 90%, margin 0.15", SequentialRule(confidence=0.90)),
]
MEASURED = [RULES[0], RULES[1], RULES[2], RULES[4]]


def exact_table(grid: int) -> None:
    print("Part 1, exact: true rates spread evenly over 0..1, threshold 0.5")
    header = (
        "rule",
        "calls/q",
        "wrong",
        "wrong outside margin",
        "error at the margin",
        "borderline",
        "flips per pair",
        "ever flips in 6",
    )
    print(" | ".join(header))
    for name, rule in RULES:
        margin = getattr(rule, "margin", 0.15)
        edge = max(
            operating(rule, 0.5 - margin).triggered, operating(rule, 0.5 + margin).not_triggered
        )
        calls = wrong = outside = outside_n = border = flips = ever = 0.0
        for i in range(grid):
            rate = (i + 0.5) / grid
            o = operating(rule, rate)
            calls += o.mean_runs
            miss = o.not_triggered if rate >= 0.5 else o.triggered
            wrong += miss
            if abs(rate - 0.5) > margin:
                outside += miss
                outside_n += 1
            border += o.undecided
            flips += 2 * o.triggered * o.not_triggered
            t, n, b = o.triggered, o.not_triggered, o.undecided
            ever += 1 - (t + b) ** 6 - (n + b) ** 6 + b**6
        print(
            f"{name} | {calls / grid:.2f} | {wrong / grid:.1%} | {outside / outside_n:.2%} | "
            f"{edge:.2%} | {border / grid:.1%} | {flips / grid:.1%} | {ever / grid:.1%}"
        )
    for name, rule in RULES:
        runs = operating(rule, 1.0).mean_runs
        print(f"{name}: a clear-cut query (rate 0 or 1) takes {runs:.0f} runs")
    print()


def measured_table(repeats: int, rules: Sequence[tuple[str, Rule]]) -> None:
    """Part 2: the example skills against the graded fake, fresh draws each repetition; first
    what each rule is expected to do there (exact, from the fake's true rates), then what it
    did."""
    from pytest_skilltrigger.backends.api.request import build_request
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.skills.catalog import load_targets
    from tests.fake_messages_api import FakeMessagesAPI, parse_listing
    from tests.graded_model import GradedModel

    targets = load_targets([str(ROOT / "example_skills")])
    queries = sum(len(t.eval_set.entries) for t in targets)
    import os

    with FakeMessagesAPI(awkward=False) as api:
        api.graded = model = GradedModel(seed=7)
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key")
        truth: dict[tuple[str, int], tuple[float, bool, str]] = {}
        for target in targets:
            context = target.context()
            for e in target.eval_set.entries:
                listing = parse_listing(build_request(context, e.query, "claude-bench"))
                rate = model.first_choice_rates(e.query, listing).get(target.name, 0.0)
                truth[(target.name, e.index)] = (rate, e.should_trigger, e.query)
        _print_expected(repeats, rules, truth)
        print(
            f"Part 2, measured: {queries} queries of {len(targets)} example skills, graded "
            f"rates (seed 7), {repeats} runs of each rule on fresh draws, no store"
        )
        print(f"rule | {MEASURED_HEADER}")
        for name, rule in rules:
            verdicts: dict[tuple[str, int], list[str]] = {key: [] for key in truth}
            calls = 0
            for repeat in range(repeats):
                model.reseed(1000 + repeat)
                session = TriggerSession(_settings(rule))
                try:
                    for target in targets:
                        results = session.evaluate(target.context(), target.eval_set.entries)
                        for e, r in zip(target.eval_set.entries, results, strict=True):
                            verdicts[(target.name, e.index)].append(r.verdict)
                            calls += r.calls
                finally:
                    session.close()
            _print_measured(name, verdicts, truth, calls / (queries * repeats))


MEASURED_HEADER = (
    "queries whose settled verdict ever flips | queries whose pass/fail ever differs | "
    "flips per pair | wrong vs the true rate | borderline | calls/q"
)


def _print_expected(
    repeats: int,
    rules: Sequence[tuple[str, Rule]],
    truth: dict[tuple[str, int], tuple[float, bool, str]],
) -> None:
    """The exact expectation over fresh draws of what part 2 measures: for each query's true
    rate, the chance of each verdict (``operating``), combined over ``repeats`` runs. A query
    in two skills' eval sets is one request (the folder's listing is the same), and the skills
    are evaluated one after another, so the second reuses the first's runs: its calls are
    counted once, at the larger of the two skills' expected runs (a lower bound of what they
    share, within 0.01 calls a query here: the exact figure needs their joint stopping)."""
    print(
        f"Part 2, expected (exact, from the fake's true rates of the {len(truth)} queries, "
        f"over {repeats} fresh runs of each)"
    )
    print(f"rule | {MEASURED_HEADER}")

    def shared_calls(rule: Rule) -> float:
        most: dict[str, float] = {}
        for rate, _should, query in truth.values():
            most[query] = max(most.get(query, 0.0), operating(rule, rate).mean_runs)
        return sum(most.values())

    reference = shared_calls(FixedRule(3))
    for name, rule in rules:
        ever = differs = pairs = wrong = border = 0.0
        calls = shared_calls(rule)
        for rate, should, _query in truth.values():
            o = operating(rule, rate)
            t, n, b = o.triggered, o.not_triggered, o.undecided
            ever += 1 - (t + b) ** repeats - (n + b) ** repeats + b**repeats
            passed = t if should else n
            differs += 1 - passed**repeats - (1 - passed) ** repeats
            pairs += 2 * t * n
            wrong += n if rate >= 0.5 else t
            border += b
        q = len(truth)
        print(
            f"{name} | {ever:.1f} of {q} ({ever / q:.1%}) | {differs:.1f} of {q} "
            f"({differs / q:.1%}) | {pairs / q:.1%} | {wrong / q:.1%} | {border / q:.1%} | "
            f"{calls / q:.2f} ({calls / reference:.2f}x the reference's)"
        )
    print()


def _settings(rule: Rule) -> Settings:
    if isinstance(rule, FixedRule):
        return Settings(min_runs=rule.runs, confidence=None, cache_mode="off", concurrency=16)
    kind = Settings if rule.calibrated else _WaldSettings
    return kind(
        confidence=rule.confidence,
        margin=rule.margin,
        min_runs=rule.min_runs,
        max_runs=rule.max_runs,
        cache_mode="off",
        concurrency=16,
    )


class _WaldSettings(Settings):
    """Settings whose sequential rule keeps Wald's bounds (no option asks for them)."""

    @property
    def rule(self) -> Rule:
        return replace(super().rule, calibrated=False)


def _print_measured(name: str, verdicts: dict, truth: dict, calls: float) -> None:
    ever = differs = pairs = flipped = wrong = settled = border = total = 0
    for key, seen in verdicts.items():
        decided = [v for v in seen if v != "undecided"]
        ever += len(set(decided)) > 1
        rate, should, _query = truth[key]
        differs += len({v == ("triggered" if should else "not_triggered") for v in seen}) > 1
        for i in range(len(seen)):
            for j in range(i + 1, len(seen)):
                pairs += 1
                flipped += {seen[i], seen[j]} == {"triggered", "not_triggered"}
        expected = "triggered" if rate >= 0.5 else "not_triggered"
        wrong += sum(1 for v in decided if v != expected)
        settled += len(decided)
        border += len(seen) - len(decided)
        total += len(seen)
    print(
        f"{name} | {ever} of {len(verdicts)} | {differs} of {len(verdicts)} | "
        f"{flipped / pairs:.1%} | {wrong / total:.1%} | {border / total:.1%} | "
        f"{calls:.2f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="a coarser grid, 3 repeats")
    args = parser.parse_args()
    exact_table(200 if args.quick else 2000)
    measured_table(3 if args.quick else args.repeats, MEASURED)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
