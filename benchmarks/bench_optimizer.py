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


def true_quality(model, target, description: str, entries=None) -> int:
    """How many of ``entries`` (all the skill's queries) the description gets right by the
    true rates."""
    from pytest_skilltrigger.backends.api.request import build_request
    from tests.fake_messages_api import parse_listing

    context = target.context(description)
    right = 0
    for entry in entries if entries is not None else target.eval_set.entries:
        listing = parse_listing(build_request(context, entry.query, "claude-bench"))
        rate = model.first_choice_rates(entry.query, listing).get(target.name, 0.0)
        right += (rate >= 0.5) == entry.should_trigger
    return right


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one seed, three iterations")
    args = parser.parse_args()
    seeds = 1 if args.quick else args.seeds
    iterations = 3 if args.quick else args.iterations

    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
    from pytest_skilltrigger.optimizer.driver import OptimizationDriver
    from pytest_skilltrigger.skills.catalog import load_targets
    from tests.fake_messages_api import FakeMessagesAPI
    from tests.graded_model import GradedModel

    print(f"{iterations} iterations, {args.candidates} candidates a round, 95%, graded fake")
    print("skill | seed | true right of 20, start -> best | of the 8 test queries | written | "
          "gain on fresh test runs | calls (items+rounds / improve / acceptance)")  # fmt: skip
    totals = {"written": 0, "true_gain_written": 0, "false_writes": 0, "missed": 0, "runs": 0,
              "calls": 0, "gain_written": 0}  # fmt: skip
    with FakeMessagesAPI(awkward=False) as api:
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key")
        for seed in range(seeds):
            for name in ("csv-cleaner", "release-notes", "spreadsheet-charts"):
                folder = Path(tempfile.mkdtemp()) / name
                shutil.copytree(ROOT / "example_skills" / name, folder)
                (target,) = load_targets([str(folder)])
                api.graded = model = GradedModel(seed=100 + seed)
                session = TriggerSession(Settings(cache_mode="off", concurrency=16))
                options = OptimizerSettings(max_iterations=iterations,
                                            candidates_per_round=args.candidates)  # fmt: skip
                try:
                    runs = OptimizationDriver(session, options, lambda _line: None).run(
                        [target], {}, []
                    )
                    spent = session.spending()
                finally:
                    session.close()
                (run,) = runs.values()
                start = true_quality(model, target, target.description)
                best = true_quality(model, target, run.best().description)
                test = [true_quality(model, target, d, run.test_entries)
                        for d in (target.description, run.best().description)]  # fmt: skip
                gain = run.acceptance.race.gain.text() if run.acceptance else "—"
                calls = [sum(s.calls for p, s in spent.items() if p in ("items", "rounds")),
                         spent["improve"].calls if "improve" in spent else 0,
                         spent["confirmation"].calls if "confirmation" in spent else 0]  # fmt: skip
                print(f"{name} | {seed} | {start} -> {best} | {test[0]} -> {test[1]} | "
                      f"{'yes' if run.improved else 'no'} | {gain} | "
                      f"{calls[0]} / {calls[1]} / {calls[2]}")  # fmt: skip
                totals["runs"] += 1
                totals["calls"] += sum(calls)
                if run.improved:
                    totals["written"] += 1
                    totals["gain_written"] += best - start
                    totals["true_gain_written" if best > start else "false_writes"] += 1
                elif test[1] > test[0]:
                    totals["missed"] += 1  # a true gain on the held-out queries, unwritten
    t = totals
    print()
    print(f"runs {t['runs']}: written {t['written']} (true gains {t['true_gain_written']}, "
          f"not gains {t['false_writes']}), a true held-out gain left unwritten {t['missed']}; "
          f"mean true "
          f"gain of what was written {t['gain_written'] / max(t['written'], 1):+.1f} of 20; "
          f"calls per run {t['calls'] / t['runs']:.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
