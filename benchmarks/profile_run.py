"""Profile the pytest process of a benchmark workload with py-spy (all threads).

    python benchmarks/profile_run.py [--queries 200] [--latency 0.25] [--concurrency 16]
        [--store-entries N] [--pyspy PATH] [--out DIR]

Runs the throughput workload (or, with ``--store-entries N``, an all-from-store run of N
entries) under ``py-spy record --format raw --threads --idle=false``, then prints the
functions with the most samples, both as leaf ("self") and anywhere on the stack
("inclusive"). py-spy is not a project dependency: install it anywhere
(``pip install --target /tmp/pyspy py-spy``) and pass ``--pyspy /tmp/pyspy/bin/py-spy``.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
from pathlib import Path

from _common import (
    fake_api,
    fill_store,
    make_entries,
    run_pytest,
    script_entries,
    skill_args,
    temp_dir,
    write_project,
)

STARTUP_FRAMES = ("_find_and_load", "gc_collect_harder", "_prepareconfig", "pytest_collection")


def summarize(raw: Path, top: int = 30, steady: bool = False) -> None:
    """Print the hottest frames; ``steady`` drops start-up stacks (imports, collection, the
    final gc pass) so what is left is the cost that grows with calls and items."""
    self_counts: collections.Counter[str] = collections.Counter()
    incl_counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if not f.startswith("thread ")]
        if not frames:
            continue
        if steady and any(any(s in f for s in STARTUP_FRAMES) for f in frames):
            continue
        total += count
        self_counts[frames[-1]] += count
        for frame in set(frames):
            incl_counts[frame] += count
    print(f"total samples (non-idle): {total}")
    print("\n-- self (leaf) --")
    for frame, count in self_counts.most_common(top):
        print(f"{100 * count / total:6.1f}%  {frame}")
    print("\n-- inclusive --")
    for frame, count in incl_counts.most_common(top + 20):
        print(f"{100 * count / total:6.1f}%  {frame}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--store-entries", type=int, default=0)
    parser.add_argument("--pyspy", default=shutil.which("py-spy") or "/tmp/pyspy/bin/py-spy")
    parser.add_argument("--rate", type=int, default=250)
    parser.add_argument("--out", default=None, help="keep raw output here")
    parser.add_argument(
        "--all-threads",
        action="store_true",
        help="sample every non-idle thread, not only the one holding the GIL",
    )
    args = parser.parse_args(argv)
    if not Path(args.pyspy).exists():
        print(f"py-spy not found at {args.pyspy}; see the module docstring")
        return 0
    with temp_dir() as tmp, fake_api(latency=args.latency) as api:
        raw = Path(args.out or tmp) / "profile.txt"
        prefix = [
            args.pyspy,
            "record",
            "--format",
            "raw",
            "--threads",
            "-r",
            str(args.rate),
            "-o",
            str(raw),
        ]
        if not args.all_threads:
            prefix.append("--gil")
        prefix.append("--")
        if args.store_entries:
            entries = make_entries(args.store_entries)
            skill = write_project(tmp, entries)
            store = tmp / "store.sqlite"
            fill_store(store, skill, entries)
            opts = skill_args(skill, cache="use", store=store)
        else:
            entries = make_entries(args.queries)
            skill = write_project(tmp, entries)
            script_entries(api, entries)
            opts = skill_args(skill, runs=args.runs, concurrency=args.concurrency, early_stop=False)
        result = run_pytest(opts, tmp, api, prefix=prefix)
        print(f"wall {result.wall:.2f} s, calls {result.calls}, rc {result.returncode}")
        print(result.tail(4))
        if raw.exists():
            print("==== whole process ====")
            summarize(raw, top=15)
            print("\n==== steady state (start-up stacks removed) ====")
            summarize(raw, top=40, steady=True)
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
