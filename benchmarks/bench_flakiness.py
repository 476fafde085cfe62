"""Flakiness of the verdict rules on graded trigger rates: part 2 of ``bench_verdicts.py``.

The example skills' 60 queries against the local fake Messages API with rates spread over
0..1 (``tests/graded_model.py``, seed 7), for the reference rule with 3 and 9 runs, the
sequential rule with Wald's bounds and the default: each rule's exact expectation from the
fake's true rates, then each rule run ``--repeats`` times on fresh draws with no store:
queries whose settled verdicts contradict each other across repetitions, queries whose
pass/fail ever differs, verdicts wrong against the true rates, borderline share, calls per
query. (``bench_verdicts.py`` prints the same after its exact part 1.)

    .venv/bin/python benchmarks/bench_flakiness.py [--repeats 6]
"""

from __future__ import annotations

import argparse
import sys

from bench_verdicts import MEASURED, measured_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=6, help="fresh runs of each rule (>= 5)")
    measured_table(parser.parse_args().repeats, MEASURED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
