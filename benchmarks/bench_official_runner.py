"""Side by side with the official runner, ``claude plugin eval`` (issue 33, item 6).

One eval set (the example skill ``csv-cleaner``'s 20 queries, exported as ``claude plugin
eval`` cases into a throw-away plugin ``acme``), one local fake Messages API whose graded
stand-in model gives each query a known true trigger rate (see ``_official.py``), four runs:

- ``claude plugin eval`` at its defaults: 3 runs a case, ``--threshold 1.0`` (every run must
  pass), ``-j 1`` (one run at a time), and ``--ablation none`` (the without-plugin arm only
  shows that a skill that is not loaded is not called);
- ``claude plugin eval --threshold 0.5``: a case passes on 2 runs of 3;
- this plugin on the claude-code backend, defaults (the sequential test at 95%, the adaptive
  concurrency);
- this plugin on the API backend, defaults.

Printed: the requests the server received, the runs, the wall time, and the verdicts right
against the true rates (a should-trigger query is right when it passes if and only if its
true rate is at least 0.5, a should-not query when it passes if and only if its rate is
below 0.5), beside the number each runner gets right on average over fresh draws, computed
exactly from the true rates. Then each query's rate and verdicts.

    .venv/bin/python benchmarks/bench_official_runner.py [--quick] [--queries 20]
        [--latency 0] [--jobs N]
"""

from __future__ import annotations

import sys

from _common import bench_parser, fake_api, temp_dir
from _official import (
    Row,
    chance_table,
    cli_options,
    differing_rates,
    make_plugin,
    markdown,
    need_cli,
    official_chance,
    pick_entries,
    plugin_chance,
    problems,
    run_official,
    run_ours,
    truth_table,
)


def measure(plugin, api, entries, jobs: int | None) -> list[Row]:
    from pytest_skilltrigger.model.verdict import SequentialRule

    j = ["-j", str(jobs)] if jobs else []
    rows = [
        run_official("claude plugin eval (defaults)", plugin, api, entries, options=j, draws=1),
        run_official(
            "claude plugin eval --threshold 0.5",
            plugin,
            api,
            entries,
            options=["--threshold", "0.5", *j],
            draws=2,
        ),
        run_ours("this plugin, claude-code", plugin, api, entries, options=cli_options(), draws=3),
        run_ours(
            "this plugin, API",
            plugin,
            api,
            entries,
            options=["--trigger-backend=anthropic"],
            draws=4,
        ),
    ]
    rows[0].chance = official_chance(3, 1.0)
    rows[1].chance = official_chance(3, 0.5)
    rows[2].chance = rows[3].chance = plugin_chance(SequentialRule())
    return rows


NOTE = """\
What differs: the official runner passes a case only when every one of its 3 runs passes
(threshold 1.0). A should-trigger query with true rate r passes with chance r^3 (0.9: 0.73,
0.7: 0.34); a should-not query with chance (1-r)^3 (rate 0.3: 0.34). So it fails most queries
that are on the right side of 0.5 but not near 0 or 1. With --threshold 0.5 it is a majority
of 3 runs: right on clear-cut queries, a coin toss near 0.5. This plugin samples a query until
a sequential test settles, at 95%, which side of 0.5 its rate is on (4 runs for a clear-cut
query, up to 15 for an unclear one); a query it cannot settle in 15 runs is borderline and
fails. It makes more runs where the answer is unclear and is rarely wrong outside its margin
(rates 0.35 to 0.65). Inside it, where any verdict is a close call, it often ends borderline
and fails, so there a majority of 3 runs is right more often, by chance (about half the time
at 0.5)."""


def report(rows: list[Row], entries, latency: float) -> None:
    n = len(entries)
    print(
        f"\n{n} queries of acme:csv-cleaner, graded fake (seed 7), {latency:g} s of latency; "
        "calls = requests the server received\n"
    )
    head = ["runner", "calls", "runs", "wall s", "verdicts right (of N)"]
    body = [
        [r.label, str(r.calls), str(r.runs), f"{r.wall:.1f}", r.right_cell(entries)] for r in rows
    ]
    print(markdown(head, body))
    print()
    print(truth_table(entries, rows))
    print("\nChance of a right verdict, exactly, where the runners differ:\n")
    print(chance_table(entries, rows))
    for line in [*differing_rates(entries, rows), *problems(rows)]:
        print(line)
    print()
    print(NOTE)


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=20, help="queries of the eval set")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--jobs", type=int, default=None, help="-j of the official runner")
    args = parser.parse_args()
    why = need_cli()
    if why:
        print(why)
        return 0
    entries = pick_entries(6 if args.quick else args.queries)
    with temp_dir() as tmp, fake_api(latency=args.latency) as api:
        plugin = make_plugin(tmp, entries)
        rows = measure(plugin, api, entries, args.jobs)
    report(rows, entries, args.latency)
    return 0


if __name__ == "__main__":
    main()
    sys.exit(0)
