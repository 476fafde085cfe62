"""Targets 4 and 5 of issue 4: the result store.

4. Rerun of an unchanged description: a first run of N queries fills a store
   (``--trigger-store``); the same command again must make 0 calls, with the same verdicts.
5. 10,000 entries all served from the store: the store is filled directly (the plugin's own
   context key, see ``_common.fill_store``), then an all-from-store run is timed against a
   baseline of the same number of trivial pytest items (a generated ``test_x.py`` with 10,000
   parametrized ``pass`` tests). Overhead per item = (store run - baseline) / N, on wall
   time (best of 2 each) and on CPU time.

``--quick``: 60 queries for 4 and 2,000 entries for 5.
"""

from __future__ import annotations

import sys

from _common import (
    bench_parser,
    check,
    emit,
    fake_api,
    fill_store,
    make_entries,
    report_verdicts,
    run_pytest,
    scripted_project,
    skill_args,
    target_row,
    temp_dir,
    write_project,
)

BASELINE_TEST = """import pytest


@pytest.mark.parametrize("i", range({n}))
def test_x(i):
    pass
"""


def rerun_calls(n: int) -> tuple[int, int, bool]:
    """(calls of the first run, calls of the rerun, verdicts identical)."""
    entries = make_entries(n)
    with scripted_project(entries) as (tmp, api, skill):
        store = tmp / "store.sqlite"
        first = run_pytest(
            skill_args(skill, cache="use", store=store, json_path=tmp / "first.json"), tmp, api
        )
        check("first run", first)
        again = run_pytest(
            skill_args(skill, cache="use", store=store, json_path=tmp / "again.json"), tmp, api
        )
        check("rerun", again)
        same = report_verdicts(tmp / "first.json") == report_verdicts(tmp / "again.json")
    return first.calls, again.calls, same


def from_store_overhead(n: int) -> dict[str, float]:
    entries = make_entries(n)
    with temp_dir() as tmp, fake_api(latency=0.0) as api:
        skill = write_project(tmp / "skill-project", entries)
        store = tmp / "store.sqlite"
        fill_store(store, skill, entries)
        base_dir = tmp / "baseline-project"
        base_dir.mkdir()
        (base_dir / "pytest.ini").write_text("[pytest]\n")
        (base_dir / "test_x.py").write_text(BASELINE_TEST.format(n=n))

        opts = skill_args(skill, cache="use", store=store)
        skill_runs, base_runs = [], []
        for _ in range(2):  # interleaved, so both see the same machine load
            skill_runs.append(run_pytest(opts, tmp / "skill-project", api))
            base_runs.append(run_pytest(["test_x.py"], base_dir, None))
        for r in skill_runs:
            check("from-store run", r)
        for r in base_runs:
            check("baseline run", r)
    skill_wall = min(r.wall for r in skill_runs)
    base_wall = min(r.wall for r in base_runs)
    skill_cpu = min(r.cpu for r in skill_runs)
    base_cpu = min(r.cpu for r in base_runs)
    return {
        "skill_wall": skill_wall,
        "base_wall": base_wall,
        "skill_cpu": skill_cpu,
        "base_cpu": base_cpu,
        "calls": max(r.calls for r in skill_runs),
        "wall_ms": 1000 * (skill_wall - base_wall) / n,
        "cpu_ms": 1000 * (skill_cpu - base_cpu) / n,
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=None, help="set size for target 4")
    parser.add_argument("--entries", type=int, default=None, help="set size for target 5")
    args = parser.parse_args(argv)
    n4 = args.queries or (60 if args.quick else 200)
    n5 = args.entries or (2000 if args.quick else 10000)

    first, again, same = rerun_calls(n4)
    print(f"store: rerun of an unchanged description, {n4} queries")
    print(f"  first run calls       {first}")
    print(f"  rerun calls           {again}  (target 0)")
    print(f"  verdicts identical    {same}")

    o = from_store_overhead(n5)
    print(f"store: {n5} entries all served from the store vs {n5} trivial pytest items")
    print(f"  calls made            {o['calls']} (expected 0)")
    print(f"  from-store run        wall {o['skill_wall']:.2f} s, cpu {o['skill_cpu']:.2f} s")
    print(f"  trivial baseline      wall {o['base_wall']:.2f} s, cpu {o['base_cpu']:.2f} s")
    print(
        f"  overhead per item     wall {o['wall_ms']:.3f} ms, cpu {o['cpu_ms']:.3f} ms "
        "(target <= 2 ms)"
    )

    row4 = target_row(
        "4 calls on rerun of unchanged description",
        again,
        0,
        "calls",
        f"first run {first} calls; verdicts identical {same}",
    )
    row4["ratio"] = 0.0 if again == 0 else float("inf")
    row4["ok"] = again == 0 and same
    row5 = target_row(
        f"5 overhead per item, {n5} from store",
        o["wall_ms"],
        2.0,
        "ms",
        f"cpu {o['cpu_ms']:.3f} ms/item; {o['calls']} calls",
    )
    row5["ok"] = row5["ok"] and o["calls"] == 0
    emit([row4, row5])
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
