"""Local runs at real latencies: the claude-code backend against the official runner (issue 34).

The set-up of ``bench_official_runner.py`` (``_official.py``: the example skill
``csv-cleaner``'s 20 queries exported as ``claude plugin eval`` cases into a throw-away
plugin, the graded fake with known true rates), with the fake answering after ``--latency``
seconds (0.5 and 2 by default). Rows, at each latency:

- the official runner at its defaults but ``-j 8`` (its default runs one at a time);
- this plugin's claude-code backend at its defaults (the sequential test, the adaptive
  concurrency);
- the same with the reference rule, ``--trigger-confidence=off --trigger-runs=3``;
- the same with ``--trigger-concurrency=<CPU count>`` and a new CLI process per run
  (``_one_process_per_run.py``): the default before the adaptive governor and the kept
  processes ("today's default", the one issue 34 started from).

Columns: wall time; requests the server received; CPU seconds of the runner and its CLI
processes (the children's rusage); runs in flight on average (this plugin: ``--trigger-json``'s
``concurrency``; the official runner: its ``-j``, and the ``claude`` processes alive below it,
sampled every 0.2 s in /proc, on average over the samples with any alive); the largest peak
RSS of one CLI process (this plugin: the JSON's ``process_peak_rss_bytes``; the official
runner: the largest ``VmHWM`` sampled); verdicts right against the true rates (as in
``bench_official_runner.py``), beside the number expected over fresh draws.

Targets (issue 34): at 2 s the plugin's default wall time at most 1.1 times the official
runner's, with at least as many verdicts right, and the reference rule at most 0.6 times; at
0.5 s the default no slower than today's default (within noise: 5%).

    .venv/bin/python benchmarks/bench_local_latency.py [--quick] [--queries 20]
        [--latency 0.5 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import bench_parser, emit, fake_api, target_row, temp_dir
from _official import (
    Row,
    cli_options,
    differing_rates,
    make_plugin,
    markdown,
    mb,
    need_cli,
    official_chance,
    pick_entries,
    plugin_chance,
    problems,
    run_official,
    run_ours,
    truth_table,
)

OFFICIAL, DEFAULT, REFERENCE, TODAY = range(4)
BENCHMARKS = str(Path(__file__).resolve().parent)


def measure(plugin, entries, latency: float, cpus: int) -> list[Row]:
    from pytest_skilltrigger.model.verdict import FixedRule, SequentialRule

    cli = cli_options()
    with fake_api(latency=latency) as api:
        rows = [
            run_official("claude plugin eval -j 8", plugin, api, entries, options=["-j", "8"]),
            run_ours("this plugin, defaults", plugin, api, entries, options=cli, draws=1),
            run_ours(
                "this plugin, reference rule",
                plugin,
                api,
                entries,
                options=[*cli, "--trigger-confidence=off", "--trigger-runs=3"],
                draws=2,
            ),
            run_ours(
                f"this plugin, before: {cpus} in flight, a process per run",
                plugin,
                api,
                entries,
                options=[*cli, f"--trigger-concurrency={cpus}", "-p", "_one_process_per_run"],
                draws=3,
                pythonpath=BENCHMARKS,
            ),
        ]
    rows[OFFICIAL].chance = official_chance(3, 1.0)
    rows[DEFAULT].chance = rows[TODAY].chance = plugin_chance(SequentialRule())
    rows[REFERENCE].chance = plugin_chance(FixedRule(3))
    return rows


def in_flight(row: Row) -> str:
    if row.in_flight.startswith("-j") and row.sampled_alive is not None:
        return f"{row.in_flight} (sampled {row.sampled_alive:.1f})"
    return row.in_flight or "?"


def peak(row: Row) -> str:
    return mb(row.peak_rss if row.peak_rss is not None else row.sampled_peak)


def timeline(alive: list[int], samples: int = 25) -> str:
    """The sampled CLI processes alive, averaged per ``samples`` samples (5 s)."""
    chunks = [alive[i : i + samples] for i in range(0, len(alive), samples)]
    return " ".join(f"{sum(c) / len(c):.1f}" for c in chunks)


def table(rows: list[Row], entries) -> str:
    head = ["runner", "wall s", "requests", "CPU s", "in flight", "CLI peak RSS MB", "right"]
    body = [
        [
            r.label,
            f"{r.wall:.1f}",
            str(r.calls),
            f"{r.cpu:.1f}",
            in_flight(r),
            peak(r),
            r.right_cell(entries),
        ]
        for r in rows
    ]
    return markdown(head, body)


def ratios(rows: list[Row], entries, latency: float) -> list[dict]:
    """Print the wall-time ratios; return the target rows of this latency."""
    official, default = rows[OFFICIAL].wall, rows[DEFAULT].wall
    a = default / official
    b = rows[REFERENCE].wall / official
    c = default / rows[TODAY].wall
    print(
        f"at {latency:g} s: plugin default / official {a:.2f}; reference rule / official "
        f"{b:.2f}; plugin default / today's default {c:.2f}"
    )
    targets = []
    if latency == 2.0:
        ours, theirs = rows[DEFAULT].right(entries), rows[OFFICIAL].right(entries)
        targets += [
            target_row("34 default wall / official wall, 2 s", a, 1.1, "x"),
            target_row("34 reference rule wall / official wall, 2 s", b, 0.6, "x"),
            target_row(
                "34 verdicts right, default vs official, 2 s",
                ours,
                theirs,
                "right",
                note=f"of {len(entries)}; the official runner got {theirs}",
                lower_is_better=False,
            ),
        ]
    if latency == 0.5:
        targets.append(
            target_row(
                "34 default wall / before (CPU count, a process per run), 0.5 s",
                c,
                1.05,
                "x",
                note="no slower than before, within 5% noise",
            )
        )
    return targets


def per_request(rows: list[Row], cpus: int) -> None:
    """Each row's wall time and CPU per request, and the least wall time the plugin's default
    could take on this machine: its CPU spread over every CPU."""
    cells = [
        f"{r.label} {r.wall / r.calls:.2f} s wall, {r.cpu / r.calls:.2f} s CPU"
        for r in rows
        if r.calls
    ]
    print("per request: " + "; ".join(cells))
    floor = rows[DEFAULT].cpu / cpus
    print(
        f"the default's CPU over {cpus} CPUs: {floor:.1f} s at the least, "
        f"{floor / rows[OFFICIAL].wall:.2f} of the official runner's wall time"
    )


def report(rows: list[Row], entries, latency: float, cpus: int) -> list[dict]:
    print(f"\n## {latency:g} s of latency ({len(entries)} queries)\n")
    print(table(rows, entries))
    print()
    per_request(rows, cpus)
    print(truth_table(entries, rows))
    sampled = ", ".join(
        f"{r.label} {mb(r.sampled_peak)} MB" for r in rows if r.peak_rss is not None
    )
    print(f"CLI peak RSS sampled in /proc for this plugin's rows too: {sampled}")
    print("CLI processes alive, sampled, on average per 5 s:")
    for row in rows:
        print(f"  {row.label}: {timeline(row.alive)}")
    for line in [*differing_rates(entries, rows), *problems(rows)]:
        print(line)
    return ratios(rows, entries, latency)


def main() -> int:
    from pytest_skilltrigger.support.machine import cpu_count

    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=20, help="queries of the eval set")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.5, 2.0])
    args = parser.parse_args()
    why = need_cli()
    if why:
        print(why)
        return 0
    entries = pick_entries(6 if args.quick else args.queries)
    cpus = cpu_count()
    print(f"{cpus} CPUs; today's default = --trigger-concurrency={cpus}")
    targets: list[dict] = []
    with temp_dir() as tmp:
        plugin = make_plugin(tmp, entries)
        for latency in args.latency:
            rows = measure(plugin, entries, latency, cpus)
            targets += report(rows, entries, latency, cpus)
    emit(targets)
    return 0


if __name__ == "__main__":
    main()
    sys.exit(0)
