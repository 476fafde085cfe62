"""Does the optimizer find real gains through the noise, and write only those?

Against the local fake Messages API with graded trigger rates and the stand-in improve model
that reads the prompt's failures (``tests/graded_model.py``): every description's *true*
quality is known, the number of the skill's queries whose true trigger rate is on the side
the eval set wants (out of 20 for each example skill), and so is the true quality of what the
rounds chose and of what they wrote. Each example skill is improved with several seeds of the
stand-in model (other rates, other draws), five iterations, no store.

It prints, per run, the start's and the best's true quality, whether SKILL.md would be
written and with what gain on fresh test runs, and the calls by phase; then the totals: how
often a write was a true gain, how often a true gain went unwritten, and the calls.

The same skills and stand-in seeds (so the same true rates; every run draws afresh) are run
with the reference loop replayed (``reference`` in ``--trigger-accept-on``):
each description evaluated on train and test with 3 runs a query (no early stopping), one
proposal a round from the newest description, the best the one with the most test passes
(the first on ties), and "written" whenever that best is not the start (its user pastes it
into SKILL.md). It uses the same stand-in proposer, through the project's prompt.

    .venv/bin/python benchmarks/bench_optimizer.py [--seeds 3] [--candidates 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def true_quality(model, target, description: str, entries=None) -> tuple[int, float]:
    """How many of ``entries`` (all the skill's queries) the description gets right by the
    true rates, and its expected passes (each query's chance of the wanted answer in a run:
    its rate when it should trigger, one less its rate when not)."""
    from pytest_skilltrigger.backends.api.request import build_request
    from tests.fake_messages_api import parse_listing

    context = target.context(description)
    right, expected = 0, 0.0
    for entry in entries if entries is not None else target.eval_set.entries:
        listing = parse_listing(build_request(context, entry.query, "claude-bench"))
        rate = model.first_choice_rates(entry.query, listing).get(target.name, 0.0)
        right += (rate >= 0.5) == entry.should_trigger
        expected += rate if entry.should_trigger else 1.0 - rate
    return right, expected


def fresh_skill(api, name: str, seed: int) -> tuple:
    """A throw-away copy of an example skill, and the stand-in (this seed's true rates) set
    on the fake API."""
    from pytest_skilltrigger.skills.catalog import load_targets
    from tests.graded_model import GradedModel

    folder = Path(tempfile.mkdtemp()) / name
    shutil.copytree(ROOT / "example_skills" / name, folder)
    (target,) = load_targets([str(folder)])
    api.graded = model = GradedModel(seed=100 + seed)
    return target, model


def one_run(api, name: str, seed: int, rule: str, iterations: int, candidates: int) -> dict:
    """One skill improved with one seed of the stand-in: its row printed, its figures back."""
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
    from pytest_skilltrigger.optimizer.driver import OptimizationDriver

    target, model = fresh_skill(api, name, seed)
    session = TriggerSession(Settings(cache_mode="off", concurrency=16))
    options = OptimizerSettings(
        max_iterations=iterations, candidates_per_round=candidates, accept_on=rule
    )
    try:
        runs = OptimizationDriver(session, options, lambda _line: None).run([target], {}, [])
        spent = session.spending()
    finally:
        session.close()
    (run,) = runs.values()
    start = true_quality(model, target, target.description)
    best = true_quality(model, target, run.best().description)
    test = [
        true_quality(model, target, d, run.test_entries)[0]
        for d in (target.description, run.best().description)
    ]
    gain = run.acceptance.race.gain.text() if run.acceptance else "—"
    calls = [
        sum(s.calls for p, s in spent.items() if p in ("items", "rounds")),
        spent["improve"].calls if "improve" in spent else 0,
        spent["confirmation"].calls if "confirmation" in spent else 0,
    ]
    print(
        f"{rule} | {name} | {seed} | {start[0]} -> {best[0]} | {start[1]:.1f} -> "
        f"{best[1]:.1f} | {test[0]} -> {test[1]} | {'yes' if run.improved else 'no'} | "
        f"{gain} | {calls[0]} / {calls[1]} / {calls[2]}",
        flush=True,
    )
    return {
        "start": start,
        "best": best,
        "written": run.improved,
        "calls": sum(calls),
        "trigger_calls": calls[0] + calls[2],
        "acceptance_calls": calls[2],
        "reference_calls": iterations * len(target.eval_set.entries) * 3,
    }


def reference_run(api, name: str, seed: int, iterations: int) -> dict:
    """The reference loop replayed on one skill with one seed of the stand-in (see the
    module docstring): its row printed, its figures back in :func:`one_run`'s shape."""
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.settings import Settings
    from pytest_skilltrigger.optimizer.proposer import (
        Attempt,
        DescriptionProposer,
        PromptInputs,
        build_prompt,
    )
    from pytest_skilltrigger.optimizer.split import split_entries

    target, model = fresh_skill(api, name, seed)
    session = TriggerSession(
        Settings(cache_mode="off", concurrency=16, confidence=None, min_runs=3, no_early_stop=True)
    )
    proposer = DescriptionProposer(lambda prompt: session.ask(prompt))
    train, test = split_entries(target.eval_set.entries, 0.4, 42)
    history: list[tuple[str, list, list]] = []
    description = target.description
    try:
        for number in range(1, iterations + 1):
            results = session.evaluate(target.context(description), train + test)
            own = results[: len(train)]
            history.append((description, own, results[len(train) :]))
            if all(r.passed for r in own) or number == iterations:
                break
            attempts = [Attempt(d, tuple(t)) for d, t, _ in history]
            prompt = build_prompt(
                PromptInputs(
                    target.name,
                    target.skill.raw.decode("utf-8", "replace"),
                    description,
                    own,
                    attempts,
                    when_to_use=target.skill.when_to_use,
                )
            )
            proposal = proposer.propose(prompt, 1, [d for d, _, _ in history])
            if not proposal.descriptions:
                break
            description = proposal.descriptions[0]
        spent = session.spending()
    finally:
        session.close()
    passes = [sum(bool(r.passed) for r in tested) for _, _, tested in history]
    chosen = history[passes.index(max(passes))][0]
    start = true_quality(model, target, target.description)
    best = true_quality(model, target, chosen)
    test_right = [true_quality(model, target, d, test)[0] for d in (target.description, chosen)]
    written = chosen != target.description
    calls = [
        sum(s.calls for p, s in spent.items() if p != "improve"),
        spent["improve"].calls if "improve" in spent else 0,
    ]
    print(
        f"reference | {name} | {seed} | {start[0]} -> {best[0]} | {start[1]:.1f} -> "
        f"{best[1]:.1f} | {test_right[0]} -> {test_right[1]} | {'yes' if written else 'no'} | "
        f"test passes {passes[0]} -> {max(passes)} | {calls[0]} / {calls[1]} / 0",
        flush=True,
    )
    return {
        "start": start,
        "best": best,
        "written": written,
        "calls": sum(calls),
        "trigger_calls": calls[0],
        "acceptance_calls": 0,
        "reference_calls": iterations * len(target.eval_set.entries) * 3,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one seed, three iterations")
    parser.add_argument(
        "--trigger-accept-on",
        nargs="+",
        default=["all", "test", "reference"],
        help="the acceptance rules to compare, and the reference loop "
        "replayed (default: all, test and reference)",
    )
    args = parser.parse_args()
    seeds = 1 if args.quick else args.seeds
    iterations = 3 if args.quick else args.iterations

    from tests.fake_messages_api import FakeMessagesAPI

    print(
        f"{iterations} iterations, {args.candidates} candidates a round, 95%, graded fake; "
        "true quality: queries right of 20 by the true rates, and expected passes"
    )
    print(
        "rule | skill | seed | true right, start -> best | expected passes, start -> best | "
        "of the 8 test queries | written | gain on fresh runs | calls (items+rounds / "
        "improve / acceptance)"
    )
    totals = {
        rule: dict.fromkeys(
            (
                "written",
                "false_writes",
                "runs",
                "calls",
                "gain_written",
                "expected_written",
                "best_gain",
                "truly_better",
                "acceptance_calls",
                "reference_calls",
                "trigger_calls",
            ),
            0.0,
        )
        for rule in args.accept_on
    }
    with FakeMessagesAPI(awkward=False) as api:
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key")
        for rule in args.accept_on:
            for seed in range(seeds):
                for name in ("csv-cleaner", "release-notes", "spreadsheet-charts"):
                    row = (
                        reference_run(api, name, seed, iterations)
                        if rule == "reference"
                        else one_run(api, name, seed, rule, iterations, args.candidates)
                    )
                    t = totals[rule]
                    t["runs"] += 1
                    t["calls"] += row["calls"]
                    t["trigger_calls"] += row["trigger_calls"]
                    t["best_gain"] += row["best"][1] - row["start"][1]
                    t["truly_better"] += row["best"][1] > row["start"][1]
                    t["acceptance_calls"] += row["acceptance_calls"]
                    t["reference_calls"] += row["reference_calls"]
                    if row["written"]:
                        t["written"] += 1
                        t["gain_written"] += row["best"][0] - row["start"][0]
                        t["expected_written"] += row["best"][1] - row["start"][1]
                        t["false_writes"] += row["best"][1] < row["start"][1]
    print()
    for rule, t in totals.items():
        runs, written = int(t["runs"]), int(t["written"])
        per = max(written, 1)
        name = (
            "the reference loop replayed" if rule == "reference" else f"--trigger-accept-on={rule}"
        )
        print(
            f"{name}: {runs} runs, written {written}, of them truly worse than "
            f"the start {int(t['false_writes'])}; mean true gain of what was written "
            f"{t['gain_written'] / per:+.1f} right, {t['expected_written'] / per:+.2f} "
            f"expected passes of 20 (the best seen: {t['best_gain'] / runs:+.2f} on "
            f"average over all runs); calls per run {t['calls'] / runs:.0f}"
        )
        print(
            f"  the best truly better than the start in {int(t['truly_better'])} of {runs} "
            f"runs; the acceptance race's calls per run {t['acceptance_calls'] / runs:.0f}; "
            f"a reference run of its iterations (each description x the queries x 3 runs): "
            f"{t['reference_calls'] / runs:.0f} "
            f"trigger calls, so {t['trigger_calls'] / t['reference_calls']:.2f}x its trigger "
            f"calls ({t['calls'] / t['reference_calls']:.2f}x with the improve model's "
            "requests)"
        )
    replayed = totals.get("reference")
    for rule, t in totals.items():
        if replayed and rule != "reference" and replayed["calls"]:
            print(
                f"--trigger-accept-on={rule}: "
                f"{t['calls'] / replayed['calls']:.2f}x the calls of the "
                f"reference loop replayed ({t['calls'] / t['runs']:.0f} against "
                f"{replayed['calls'] / replayed['runs']:.0f} a run)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
