"""Target 3 of issue 4: calls per query with early stopping (curtailment) at k = 3.

A set of clear-cut queries (each always or never triggers) is run twice, with early stopping
and with ``--trigger-no-early-stop``; the calls per query of the first run are compared with the
2.3 limit, and the verdicts of both runs (from ``--trigger-json``) must be identical.

A second, mixed set (queries scripted to cycle through triggering and not triggering) checks
that early stopping also keeps verdicts identical when the runs disagree; its calls per query
are printed for information (they are necessarily higher).

``--quick``: 60 clear-cut queries instead of 200.
"""

from __future__ import annotations

import sys

from _common import (
    SKILL_NAME,
    bench_parser,
    check,
    emit,
    fake_api,
    make_entries,
    report_verdicts,
    run_pytest,
    script_entries,
    skill_args,
    target_row,
    temp_dir,
    write_project,
)

MIXED_PATTERNS = (
    [f"skill:{SKILL_NAME}", "text"],
    ["text", f"skill:{SKILL_NAME}"],
    ["text", "text", f"skill:{SKILL_NAME}"],
    [f"skill:{SKILL_NAME}", f"skill:{SKILL_NAME}", "text"],
)


def run_pair(tmp, api, entries, patterns=None):
    """Run the set with and without early stopping; return (calls on, calls off, same?)."""
    skill = write_project(tmp, entries)
    out = {}
    for early in (True, False):
        if patterns is None:
            script_entries(api, entries)
        else:
            for n, entry in enumerate(entries):
                api.script(entry["query"], patterns[n % len(patterns)])
        report = tmp / f"report-{early}.json"
        opts = skill_args(skill, concurrency=16, early_stop=early, json_path=report)
        result = run_pytest(opts, tmp, api)
        if patterns is None:
            check(f"early_stop={early}", result)
        out[early] = (result.calls, report_verdicts(report) if report.exists() else {})
    (on_calls, on_verdicts), (off_calls, off_verdicts) = out[True], out[False]
    same = bool(on_verdicts) and on_verdicts == off_verdicts
    return on_calls, off_calls, same, len(on_verdicts)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=None)
    args = parser.parse_args(argv)
    n = args.queries or (60 if args.quick else 200)

    with fake_api(latency=0.0) as api:
        with temp_dir() as tmp:
            clear = make_entries(n)
            on, off, same, judged = run_pair(tmp, api, clear)
        with temp_dir() as tmp:
            mixed = make_entries(40)
            m_on, m_off, m_same, m_judged = run_pair(tmp, api, mixed, MIXED_PATTERNS)

    per_query = on / n
    print(f"curtailment: k = 3, threshold 0.5, {n} clear-cut queries")
    print(f"  early stopping on     {on} calls = {per_query:.2f} per query  (target <= 2.3)")
    print(f"  early stopping off    {off} calls = {off / n:.2f} per query")
    print(f"  verdicts identical    {same} ({judged} queries judged)")
    print(
        f"  mixed set (40, runs disagree): {m_on / 40:.2f} vs {m_off / 40:.2f} calls per query, "
        f"verdicts identical {m_same} ({m_judged} judged)"
    )
    note = f"verdicts identical: {same}; mixed set identical: {m_same}"
    row = target_row("3 calls per query, clear-cut, k=3", per_query, 2.3, "calls", note)
    row["ok"] = row["ok"] and same and m_same
    emit([row])
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
