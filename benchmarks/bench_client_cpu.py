"""The whole plugin's marginal client CPU per call, beside a plain SDK streaming loop's.

What a call costs the client beyond what one-time costs (pytest's start, collection, importing
the SDK, the first connection, the interpreter's exit) cost every session. Both sides are
measured the same way, in the same run, against the same stand-in (250 ms of latency, 16 in
flight):

    plugin marginal = (CPU of a session of N queries - CPU of one of n) / (its calls - theirs)
    SDK marginal    = (CPU of a loop of the big session's calls - one of the small's) / (the
                      difference in calls)
    ratio           = plugin marginal / SDK marginal                             target <= 1.3

Each session is the whole plugin as a user's process spends it: ``python -m pytest
--trigger-skill-path ...`` with the defaults a user has (the sequential rule, a result store, here a
fresh one each session, the JSON report written), the item per query and everything pytest
and the plugin do around it; calls counted on the server. The loop is ``_sdk_loop.py``: the
same request bodies, ``messages.create(..., stream=True)``, every event read, 16 threads.
Every process's CPU is its user+sys time, all threads (``RUSAGE_CHILDREN``). Five
repetitions, each interleaved, so a slow spell of the machine hits both sides; each prints
its own ratio, and the target is their median.

``--queries N`` (default 333: about 1,000 calls; at 500 calls one start-up's noise on a busy
2-core VM, about 0.3 s of CPU, is 0.6 ms a call) and ``--small n`` (default 33); ``--quick``:
67 and 7.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from pathlib import Path

from _common import (
    MODEL,
    PYTHON,
    bench_parser,
    check,
    child_env,
    emit,
    make_entries,
    run_pytest,
    script_entries,
    skill_args,
    target_row,
    temp_dir,
    write_project,
)
from _common import fake_api as fake_server

from tests.fake_messages_api import FakeMessagesAPI

LOOP = Path(__file__).resolve().parent / "_sdk_loop.py"
LATENCY = 0.25
IN_FLIGHT = 16
RUNS = 3


def sdk_loop(api: FakeMessagesAPI, skill: Path, calls: int) -> tuple[float, int]:
    """CPU seconds and server-counted calls of one plain SDK loop making ``calls`` calls."""
    before, served = resource.getrusage(resource.RUSAGE_CHILDREN), api.stats["calls"]
    subprocess.run(
        [PYTHON, str(LOOP), str(skill), MODEL, str(calls), str(IN_FLIGHT)],
        env=child_env(api),
        check=True,
        capture_output=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, api.stats["calls"] - served


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=None)
    parser.add_argument("--small", type=int, default=None)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    big_n = args.queries or (67 if args.quick else 333)
    small_n = args.small or (7 if args.quick else 33)
    entries = make_entries(big_n)
    ratios, plugin_ms, sdk_ms = [], [], []
    with temp_dir() as tmp, fake_server(latency=LATENCY) as api:
        big = write_project(tmp / "big", entries)
        small = write_project(tmp / "small", entries[:small_n])
        for rep in range(args.reps):
            started = time.perf_counter()
            sessions = []
            for folder, skill in ((tmp / "big", big), (tmp / "small", small)):
                script_entries(api, entries)
                store = folder / f"store-{rep}.sqlite"  # a first run's: every call stored
                opts = skill_args(
                    skill,
                    runs=RUNS,
                    concurrency=IN_FLIGHT,
                    cache="use",
                    store=store,
                    json_path=folder / "out.json",
                    confidence="0.95",
                )
                result = run_pytest([*opts, "--trigger-context=builtin"], folder, api)
                check(folder.name, result)
                sessions.append(result)
            loops = [sdk_loop(api, big, sessions[0].calls), sdk_loop(api, big, sessions[1].calls)]
            calls = sessions[0].calls - sessions[1].calls
            plugin = (sessions[0].cpu - sessions[1].cpu) / calls
            sdk = (loops[0][0] - loops[1][0]) / (loops[0][1] - loops[1][1])
            plugin_ms.append(1000 * plugin)
            sdk_ms.append(1000 * sdk)
            ratios.append(plugin / sdk)
            print(
                f"rep {rep + 1}: plugin {sessions[0].calls} and {sessions[1].calls} calls, "
                f"{sessions[0].cpu:.2f} and {sessions[1].cpu:.2f} s CPU: {1000 * plugin:.2f} ms "
                f"a call; SDK loop {loops[0][1]} and {loops[1][1]} calls, {loops[0][0]:.2f} and "
                f"{loops[1][0]:.2f} s: {1000 * sdk:.2f} ms a call; ratio {plugin / sdk:.2f}x "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    print(
        f"marginal client CPU per call, {big_n} - {small_n} queries, the default rule, a "
        f"store and the JSON, {LATENCY * 1000:.0f} ms, {IN_FLIGHT} in flight: plugin "
        f"{statistics.median(plugin_ms):.2f} ms, plain SDK loop {statistics.median(sdk_ms):.2f} "
        f"ms (medians), ratios {', '.join(f'{r:.2f}' for r in ratios)}"
    )
    emit(
        [
            target_row(
                "client CPU per call, whole plugin / plain SDK loop (marginal)",
                statistics.median(ratios),
                1.3,
                "x",
                f"the median of {len(ratios)}: {', '.join(f'{r:.2f}' for r in ratios)}",
            )
        ]
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
