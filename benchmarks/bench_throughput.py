"""Targets 1 and 2 of issue 4: wall time against the concurrency ideal, and client CPU per call.

200 queries x 3 runs (early stopping off, so exactly 600 calls), 250 ms of added server
latency, 16 runs in flight. Every size runs three times, interleaved.

    wall ratio = (wall - start-up wall) / (calls x latency / concurrency)          target <= 1.3
    CPU/call   = CPU of the run loop / calls                                      target <= 5 ms

Start-up for the wall ratio is the same command on a 1-entry eval set (median of 3): it pays
what every run pays once (imports, the SDK client, the first connection, pytest's start and
finish) plus one wave of 3 calls, whose latency is taken off its wall time.

CPU per call: a probe ``conftest.py`` in the generated project reads the pytest process's
user+sys time (``getrusage``, all threads) when the run loop starts and when it ends; the
median over the three runs, divided by the calls, is the figure. Start-up is everything
before the loop: pytest's start, collection, and importing the SDK (the probe imports it at
configure time; the plugin itself imports it lazily on the first call, so that a run served
from the store never pays about 3 s of CPU for it). Measured this way the noise of start-up
(+-0.5 s of CPU on this busy 2-core VM) stays out of the figure. The first session's method,
(whole-process CPU - CPU of the 1-entry run) / (calls - its calls), is printed beside it.

``--quick``: 60 queries. ``--queries N``, ``--latency S``, ``--concurrency C`` override.
"""

from __future__ import annotations

import json
import statistics
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

PROBE_OUT = "loop-cpu.json"
PROBE = f"""
import json, resource

import anthropic  # noqa: F401  start-up: the plugin imports it on its first call
import pytest


def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    session.config._loop_cpu = _cpu()


def pytest_sessionfinish(session):
    start = getattr(session.config, "_loop_cpu", None)
    if start is not None:
        with open({PROBE_OUT!r}, "w") as f:
            json.dump({{"loop_cpu": _cpu() - start}}, f)
"""


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--pytest-arg",
        action="append",
        default=[],
        help="one more option for the measured sessions (e.g. --trigger-rate-limit=off)",
    )
    args = parser.parse_args(argv)
    queries = args.queries or (60 if args.quick else 200)

    entries = make_entries(queries)
    with scripted_project(entries, latency=args.latency, conftest=PROBE) as (tmp, api, skill):
        opts = skill_args(skill, runs=args.runs, concurrency=args.concurrency, early_stop=False)
        opts += args.pytest_arg
        one = write_project(tmp / "one", entries[:1])
        one_opts = skill_args(one, runs=args.runs, concurrency=args.concurrency, early_stop=False)
        one_opts += args.pytest_arg
        startups, fulls, loops = [], [], []
        for _ in range(3):  # interleaved, so a slow spell of the machine hits both
            startups.append(run_pytest(one_opts, tmp / "one", api))
            fulls.append(run_pytest(opts, tmp, api))
            loops.append(json.loads((tmp / PROBE_OUT).read_text())["loop_cpu"])
        for label, results in (("start-up", startups), ("run", fulls)):
            for result in results:
                check(label, result)

    # medians of the three interleaved runs (not the fastest: that would flatter the ratio)
    startup_wall = statistics.median(r.wall for r in startups) - args.latency  # its one wave
    startup, run = startups[0], fulls[0]  # (the call counts: the same in every run)
    calls = run.calls
    ideal = calls * args.latency / args.concurrency
    work_wall = statistics.median(r.wall for r in fulls) - startup_wall
    ratio = work_wall / ideal if ideal else float("nan")

    cpu_per_call_ms = 1000 * statistics.median(loops) / calls
    full_cpu = statistics.median(r.cpu for r in fulls)
    startup_cpu = statistics.median(r.cpu for r in startups)
    old_method_ms = 1000 * (full_cpu - startup_cpu) / (calls - startup.calls)

    print(
        f"throughput: {queries} queries x {args.runs} runs, latency {args.latency * 1000:.0f} ms, "
        f"{args.concurrency} in flight"
    )
    print(f"  calls made            {calls} (expected {queries * args.runs})")
    print(
        f"  start-up (1 entry)    wall {startup_wall:.2f} s (+{args.latency:.2f} s of calls), "
        f"cpu {_spread([r.cpu for r in startups])} s, {startup.calls} calls"
    )
    print(
        f"  full run              wall {_spread([r.wall for r in fulls])} s, "
        f"cpu {_spread([r.cpu for r in fulls])} s"
    )
    print(f"  run loop              cpu {_spread(loops)} s")
    print(f"  ideal                 {ideal:.2f} s = calls x latency / concurrency")
    print(f"  wall ratio            {ratio:.3f}  (target <= 1.3)")
    print(
        f"  client CPU per call   {cpu_per_call_ms:.2f} ms  (target <= 5, aim 3); "
        f"whole process minus 1-entry run: {old_method_ms:.2f} ms"
    )
    print(
        f"  server in-flight max  {api.stats['in_flight_max']}, "
        f"connections {api.stats['connections']} over {len(startups) + len(fulls)} pytest runs"
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
                "2 client CPU per call",
                cpu_per_call_ms,
                5.0,
                "ms",
                f"aim 3 ms; run loop of {calls} calls; "
                f"whole process minus 1-entry run {old_method_ms:.2f} ms",
            ),
        ]
    )
    return 0


def _spread(values: list[float]) -> str:
    """Median CPU seconds and the range, e.g. ``6.54 (6.41-6.80)``."""
    cpus = sorted(values)
    return f"{statistics.median(cpus):.2f} ({cpus[0]:.2f}-{cpus[-1]:.2f})"


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
