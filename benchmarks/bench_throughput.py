"""Targets 1 and 2 of issue 4: wall time against the concurrency ideal, and client CPU per call.

200 queries x 3 runs (early stopping off, so exactly 600 calls), 250 ms of added server
latency, 16 runs in flight. Start-up is the same command on a 1-entry eval set (best of 3):
it pays what every run pays once (imports, the SDK client, the first connection, pytest's
start and finish) plus one wave of 3 calls, whose latency is taken off its wall time.

    wall ratio = (wall - start-up wall) / (calls x latency / concurrency)          target <= 1.3
    CPU/call   = (child CPU - start-up CPU) / (calls - start-up calls)            target <= 5 ms

``--quick``: 60 queries. ``--queries N``, ``--latency S``, ``--concurrency C`` override.
``--profile-out FILE`` additionally runs the same workload under cProfile (every thread) and
writes the top functions to FILE.
"""

from __future__ import annotations

import sys

from _common import (
    bench_parser,
    check,
    emit,
    make_entries,
    run_pytest,
    scripted_project,
    skill_args,
    target_row,
    write_project,
)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    queries = args.queries or (60 if args.quick else 200)

    entries = make_entries(queries)
    with scripted_project(entries, latency=args.latency) as (tmp, api, skill):
        opts = skill_args(skill, runs=args.runs, concurrency=args.concurrency, early_stop=False)

        one = write_project(tmp / "one", entries[:1])
        one_opts = skill_args(one, runs=args.runs, concurrency=args.concurrency, early_stop=False)
        startups = [run_pytest(one_opts, tmp / "one", api) for _ in range(3)]
        startup = min(startups, key=lambda r: r.wall)
        check("start-up", startup)
        startup_wall = startup.wall - args.latency  # its one wave of calls
        startup_cpu = min(r.cpu for r in startups)
        startup_calls = startup.calls

        run = run_pytest(opts, tmp, api)
        check("throughput run", run)

    calls = run.calls
    ideal = calls * args.latency / args.concurrency
    work_wall = run.wall - startup_wall
    work_cpu = run.cpu - startup_cpu
    ratio = work_wall / ideal if ideal else float("nan")
    extra_calls = calls - startup_calls
    cpu_per_call_ms = 1000 * work_cpu / extra_calls if extra_calls > 0 else float("nan")

    print(
        f"throughput: {queries} queries x {args.runs} runs, latency {args.latency * 1000:.0f} ms, "
        f"{args.concurrency} in flight"
    )
    print(f"  calls made            {calls} (expected {queries * args.runs})")
    print(
        f"  start-up (1 entry)    wall {startup_wall:.2f} s (+{args.latency:.2f} s of calls), "
        f"cpu {startup_cpu:.2f} s, {startup_calls} calls"
    )
    print(
        f"  full run              wall {run.wall:.2f} s, cpu {run.cpu:.2f} s "
        f"(user {run.user:.2f}, sys {run.sys:.2f})"
    )
    print(f"  ideal                 {ideal:.2f} s = calls x latency / concurrency")
    print(f"  wall ratio            {ratio:.3f}  (target <= 1.3)")
    print(f"  client CPU per call   {cpu_per_call_ms:.2f} ms  (target <= 5, aim 3)")
    print(
        f"  server in-flight max  {api.stats['in_flight_max']}, "
        f"connections {api.stats['connections']}"
    )
    emit(
        [
            target_row(
                "1 wall / ideal (200x3, 250 ms, 16)",
                ratio,
                1.3,
                "x",
                f"{work_wall:.2f}s vs ideal {ideal:.2f}s",
            ),
            target_row(
                "2 client CPU per call", cpu_per_call_ms, 5.0, "ms", f"aim 3 ms; {calls} calls"
            ),
        ]
    )
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
