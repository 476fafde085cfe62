"""Peak memory of the claude-code backend's CLI processes, and the bound the governor draws.

Runs ``--runs`` trigger runs of one skill through the claude-code backend (the pinned CLI in
``.tools/``, ``.ci/install_claude_code.sh`` installs it), ``--at-once`` at a time, against the
fake Messages API with ``--latency`` seconds per answer, all in this process with a private
HOME. Each run's peak RSS (``VmHWM`` of the CLI process, read after each of its queries: a
process kept between runs shows how its memory grows with the queries it answered) is
printed, then the governor's memory bound on this machine: the
available memory, how many CLI processes it holds at the largest peak measured (the share
``Policy.memory_share`` of it), the cap at this CPU count, and the most memory the CLI
processes hold together at the ceiling the governor applies. Then one process answers
``--queries`` queries in a row (the most the backend gives one process): its peak after the
first and after the last, the growth the pool's ``MOST_QUERIES`` bounds. Linux only
(``/proc``).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import ROOT, bench_parser, fake_api

CLI = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
SKILL = "pdf-tools"
DESCRIPTION = "Merge, split and extract pages from PDF documents. Use when the user wants PDFs."
MB = 1_000_000


def measure(runs: int, at_once: int, latency: float) -> list[int]:
    """Each run's peak RSS in bytes (runs whose process ended before it was read: none)."""
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
    from pytest_skilltrigger.backends.claude_code.process import cli_memory
    from pytest_skilltrigger.model.context import TriggerContext

    peaks: list[int] = []
    cli_memory.listeners.append(peaks.append)
    queries = [f"merge the quarterly pdf reports, batch {n}" for n in range(runs)]
    with fake_api(latency=latency) as api, tempfile.TemporaryDirectory() as home:
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key", HOME=home)
        for n, query in enumerate(queries):
            api.script(query, [f"skill:{SKILL}" if n % 2 == 0 else "text"])
        backend = ClaudeCodeBackend(timeout=120, claude_bin=str(CLI))
        context = TriggerContext(SKILL, DESCRIPTION)
        try:
            with ThreadPoolExecutor(at_once) as pool:
                outcomes = list(pool.map(lambda q: backend.run(context, q), queries))
        finally:
            backend.close()
    errors = [o.error for o in outcomes if o.status == "error"]
    if errors:
        print(f"  !! {len(errors)} runs errored, the first: {errors[0]}")
    return peaks


def growth(queries: int) -> tuple[int, int] | None:
    """The peak RSS of one kept process after its first query and after its last."""
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
    from pytest_skilltrigger.backends.claude_code.process import cli_memory
    from pytest_skilltrigger.model.context import TriggerContext

    peaks: list[int] = []
    cli_memory.listeners.append(peaks.append)
    with fake_api(latency=0.0) as api, tempfile.TemporaryDirectory() as home:
        os.environ.update(ANTHROPIC_BASE_URL=api.url, ANTHROPIC_API_KEY="test-key", HOME=home)
        backend = ClaudeCodeBackend(timeout=120, claude_bin=str(CLI))
        context = TriggerContext(SKILL, DESCRIPTION)
        try:
            outcomes = [backend.run(context, f"merge pdf reports {n}") for n in range(queries)]
        finally:
            backend.close()
            cli_memory.listeners.remove(peaks.append)
    if any(o.status == "error" for o in outcomes) or len(peaks) < 2:
        return None
    return peaks[0], peaks[-1]


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--at-once", type=int, default=4)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=None, help="default: MOST_QUERIES")
    args = parser.parse_args()
    if not CLI.exists():
        print(f"no pinned CLI at {CLI}: run .ci/install_claude_code.sh")
        return 0
    if not Path("/proc/self/status").exists():
        print("no /proc here: a CLI process's peak memory cannot be read")
        return 0
    runs = 4 if args.quick else args.runs
    began = time.monotonic()
    peaks = measure(runs, args.at_once, args.latency)
    wall = time.monotonic() - began
    print(
        f"{runs} CLI runs, {args.at_once} at a time, {args.latency:g} s of API latency "
        f"({wall:.1f} s): {len(peaks)} peaks read"
    )
    if not peaks:
        return 0
    print("peak RSS per process (MB): " + ", ".join(f"{p / MB:.0f}" for p in sorted(peaks)))
    print(f"  median {statistics.median(peaks) / MB:.0f} MB, largest {max(peaks) / MB:.0f} MB")
    report_bound(max(peaks))
    from pytest_skilltrigger.backends.claude_code.pool import MOST_QUERIES

    queries = 10 if args.quick else (args.queries or MOST_QUERIES)
    grew = growth(queries)
    if grew is None:
        print(f"one process, {queries} queries: errored or no peak read")
        return 0
    first, last = grew
    print(
        f"one process, {queries} queries in a row: peak {first / MB:.0f} MB after the first, "
        f"{last / MB:.0f} MB after the last ({(last - first) / MB / (queries - 1):.2f} MB a query)"
    )
    return 0


def report_bound(peak: int) -> None:
    """The governor's memory bound on this machine, at the largest peak measured."""
    from pytest_skilltrigger.engine.concurrency import Concurrency
    from pytest_skilltrigger.engine.load_governor import Bounds, LoadGovernor, Policy, Readings
    from pytest_skilltrigger.support.machine import available_memory, cpu_count

    policy = Policy()
    cpus = cpu_count()
    cap = policy.cap(cpus)
    readings = Readings(lambda: None, available_memory, lambda: peak)
    governor = LoadGovernor(Concurrency(cpus, most=cap), Bounds(cpus, cap), readings, policy)
    holds = governor.memory_holds()
    available = available_memory()
    if holds is None or available is None:
        print("the available memory is not published here: the cap alone bounds the runs")
        return
    ceiling = min(cap, holds)
    print(
        f"memory bound: {available / MB:,.0f} MB available; {policy.memory_share:.0%} of it "
        f"holds {holds} CLI processes of {peak / MB:.0f} MB"
    )
    print(
        f"  cap at {cpus} CPUs: {cap}; the governor's ceiling here: {ceiling} runs in flight, "
        f"whose CLI processes hold at most {ceiling * peak / MB:,.0f} MB together"
    )
    print(
        f"  a machine needs {cap * peak / policy.memory_share / MB:,.0f} MB available for the "
        "cap, not memory, to bound the runs"
    )


if __name__ == "__main__":
    sys.exit(main())
