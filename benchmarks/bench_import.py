"""What importing the SDK costs, and what a project without skills pays for the plugin.

Why: the plugin defers the ``anthropic`` import to the first call, so that a run served from
the store (and every project that collects no skill) never pays it. This prints the figure the
README quotes: the CPU seconds (user + sys) of a fresh interpreter importing ``anthropic``,
minus those of a fresh interpreter doing nothing, and the same for importing the plugin's
entry point; medians of several runs, each in its own process (the second import in one
process is free).

    .venv/bin/python benchmarks/bench_import.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

PROBE = """
import resource, sys
before = resource.getrusage(resource.RUSAGE_SELF)
{statement}
after = resource.getrusage(resource.RUSAGE_SELF)
print((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
"""


def cpu_of(statement: str, repeats: int) -> float:
    """The median CPU seconds of ``statement`` in a fresh interpreter."""
    times = []
    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", PROBE.format(statement=statement)],
            capture_output=True,
            text=True,
            check=True,
        )
        times.append(float(done.stdout.strip()))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    nothing = cpu_of("pass", args.repeats)
    sdk = cpu_of("import anthropic", args.repeats)
    entry = cpu_of("import pytest_skilltrigger.plugin", args.repeats)
    engine = cpu_of("import pytest_skilltrigger.engine.session", args.repeats)
    print(f"import anthropic: {sdk - nothing:.2f} s of CPU (median of {args.repeats})")
    print(f"import the plugin's entry point: {entry - nothing:.3f} s of CPU")
    print(f"import the engine (no SDK yet): {engine - nothing:.2f} s of CPU")


if __name__ == "__main__":
    main()
