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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_skilltrigger.model.verdict import (  # noqa: E402
    FixedRule,
    Rule,
    SequentialRule,
    operating,
)

RULES: list[tuple[str, Rule]] = [
    ("reference, 3 runs (--trigger-confidence off)", FixedRule(3)),
    ("reference, 9 runs", FixedRule(9)),
    ("sequential 95%, margin 0.10", SequentialRule(margin=0.10)),
    ("sequential 95%, margin 0.15 (default)", SequentialRule()),
    ("sequential 95%, margin 0.20", SequentialRule(margin=0.20)),
    ("sequential 90%, margin 0.15", SequentialRule(confidence=0.90)),
]


def exact_table(grid: int) -> None:
    print("Part 1, exact: true rates spread evenly over 0..1, threshold 0.5")
    header = ("rule", "calls/q", "wrong", "wrong outside margin", "borderline",
              "flips per pair", "ever flips in 6")  # fmt: skip
    print(" | ".join(header))
    for name, rule in RULES:
        margin = getattr(rule, "margin", 0.15)
        calls = wrong = outside = outside_n = border = flips = ever = 0.0
        for i in range(grid):
            rate = (i + 0.5) / grid
            o = operating(rule, rate)
            calls += o.runs
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
            f"{border / grid:.1%} | {flips / grid:.1%} | {ever / grid:.1%}"
        )
    for name, rule in RULES:
        print(f"{name}: a clear-cut query (rate 0 or 1) takes {operating(rule, 1.0).runs:.0f} "
              f"runs")  # fmt: skip
    print()


def measured_table(repeats: int, rules: Sequence[tuple[str, Rule]]) -> None:
    """Part 2: the example skills against the graded fake, fresh draws each repetition."""
    from pytest_skilltrigger.backends.api.request import build_request
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.settings import Settings
    from pytest_skilltrigger.skills.catalog import load_targets
    from tests.fake_messages_api import FakeMessagesAPI, parse_listing
    from tests.graded_model import GradedModel

    targets = load_targets([str(ROOT / "example_skills")])
    queries = sum(len(t.eval_set.entries) for t in targets)
    print(f"Part 2, measured: {queries} queries of {len(targets)} example skills, graded rates "
          f"(seed 7), {repeats} runs of each rule on fresh draws, no store")  # fmt: skip
    print("rule | queries whose settled verdict ever flips | flips per pair | wrong vs the "
          "true rate | borderline | calls/q")  # fmt: skip
    import os

    with FakeMessagesAPI(awkward=False) as api:
        api.graded = model = GradedModel(seed=7)
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key")
        truth = {}
        for target in targets:
            context = target.context()
            for e in target.eval_set.entries:
                listing = parse_listing(build_request(context, e.query, "claude-bench"))
                rate = model.first_choice_rates(e.query, listing).get(target.name, 0.0)
                truth[(target.name, e.index)] = rate >= 0.5
        for name, rule in rules:
            settings = _settings(Settings, rule)
            verdicts: dict[tuple[str, int], list[str]] = {key: [] for key in truth}
            calls = 0
            for repeat in range(repeats):
                model.reseed(1000 + repeat)
                session = TriggerSession(settings)
                try:
                    for target in targets:
                        results = session.evaluate(target.context(), target.eval_set.entries)
                        for e, r in zip(target.eval_set.entries, results, strict=True):
                            verdicts[(target.name, e.index)].append(r.verdict)
                            calls += r.calls
                finally:
                    session.close()
            _print_measured(name, verdicts, truth, calls / (queries * repeats))


def _settings(settings_type: type, rule: Rule) -> object:
    if isinstance(rule, FixedRule):
        return settings_type(runs_per_query=rule.runs, confidence=None, cache_mode="off",
                             concurrency=16)  # fmt: skip
    return settings_type(confidence=rule.confidence, margin=rule.margin,
                         runs_per_query=rule.min_runs, max_runs_per_query=rule.max_runs,
                         cache_mode="off", concurrency=16)  # fmt: skip


def _print_measured(name: str, verdicts: dict, truth: dict, calls: float) -> None:
    ever = pairs = flipped = wrong = settled = border = total = 0
    for key, seen in verdicts.items():
        decided = [v for v in seen if v != "undecided"]
        ever += len(set(decided)) > 1
        for i in range(len(seen)):
            for j in range(i + 1, len(seen)):
                pairs += 1
                flipped += {seen[i], seen[j]} == {"triggered", "not_triggered"}
        expected = "triggered" if truth[key] else "not_triggered"
        wrong += sum(1 for v in decided if v != expected)
        settled += len(decided)
        border += len(seen) - len(decided)
        total += len(seen)
    print(f"{name} | {ever} of {len(verdicts)} | {flipped / pairs:.1%} | "
          f"{wrong / total:.1%} | {border / total:.1%} | {calls:.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="a coarser grid, 3 repeats")
    args = parser.parse_args()
    exact_table(200 if args.quick else 2000)
    chosen = [RULES[0], RULES[1], RULES[3]]
    measured_table(3 if args.quick else args.repeats, chosen)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
