"""Issue 16: what a query costs with ``--trigger-batch`` against live runs, at the margin.

The same clear-cut eval set is run four times: live and batched, each at two sizes (N and
4N queries, 3 runs, early stopping on). The marginal figures, (large − small) / (3N queries),
leave out what any run pays once (start-up, the batch's first polls):

- **cost per query** of the request side (input, cache writes and reads, from
  ``--trigger-json``'s tokens), batched over live, target 0.5 (the batch rate), limit 0.55;
  and the batched runs' reported cost must be what the server billed (the tokens of the
  succeeded batch requests, its ``batch_usage``) at the batch rate. (The output
  side is not comparable: a live stream cut at another tool's start is priced as far as it was
  read, a batch answer is whole; output tokens per query are printed for both.)
- **calls per query**: the batches must make exactly the runs live early stopping makes
  (requests counted on the server's side, ``batch_requests`` against ``calls``);
- **client CPU per query** of the pytest process, batched over live, for information: the
  batch path builds each request as live does, without a stream to read.

Verdicts of the batched and the live run must be identical. ``--quick``: N = 30.
"""

from __future__ import annotations

import json
import sys

from _common import (
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

from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import BATCH_RATE, cost_usd, rate_of

PRICE = {"input": 3.0, "output": 15.0}


def measure(api, n: int, batch: bool) -> tuple[float, int, float, dict, dict, Usage]:
    """(input-side cost, server-side calls, client CPU, verdicts, totals, the tokens the
    server billed the batch requests for) of one run of ``n`` queries."""
    with temp_dir() as tmp:
        entries = make_entries(n)
        skill = write_project(tmp, entries)
        script_entries(api, entries)
        report = tmp / "report.json"
        args = skill_args(skill, concurrency=16, json_path=report)
        args += ["--trigger-prices", str(prices(tmp))]
        if batch:
            args += ["--trigger-batch", "--trigger-batch-poll=0.05"]
        before = api.stats["batch_requests"] + api.stats["calls"]
        billed_before = dict(api.stats["batch_usage"])
        result = run_pytest(args, tmp, api)
        check(f"{'batch' if batch else 'live'} n={n}", result)
        calls = api.stats["batch_requests"] + api.stats["calls"] - before
        tally = api.stats["batch_usage"]
        billed = Usage.from_dict({k: tally[k] - billed_before[k] for k in tally})
        totals = json.loads(report.read_text())["totals"]
        verdicts = report_verdicts(report)
        return input_cost(totals, batch), calls, result.cpu, verdicts, totals, billed


def input_cost(totals: dict, batch: bool) -> float:
    """The cost of the request side (input, cache writes, cache reads), which both paths
    count in full. The output side is not comparable: a live stream is cut at the decision
    and priced only as far as it was read (at another tool's start), a batch answer is
    whole."""
    usage = Usage.from_dict({**totals, "output_tokens": 0})
    return cost_usd(usage, PRICE) * rate_of(batch)


def prices(folder):
    """A price for the benchmark's model, so that its cost is known."""
    path = folder / "prices.json"
    path.write_text(json.dumps({"claude-bench-model": PRICE}))
    return path


def check_rate(figures: dict) -> bool:
    """The batched runs' reported cost equals what the server billed them for, at half the
    live price."""
    ok = True
    for (batch, _n), (*_rest, totals, billed) in figures.items():
        if batch:
            expected = cost_usd(billed, PRICE) * BATCH_RATE
            ok = ok and abs(expected - float(totals["cost_usd"] or 0)) <= 1e-5 + expected * 1e-3
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    args = parser.parse_args(argv)
    small = 30 if args.quick else 60
    large = 4 * small
    figures = {}
    with fake_api(latency=0.0) as api:
        for batch in (False, True):
            for n in (small, large):
                figures[(batch, n)] = measure(api, n, batch)
    margin = large - small

    def marginal(batch: bool, index: int) -> float:
        return (figures[(batch, large)][index] - figures[(batch, small)][index]) / margin

    cost_ratio = marginal(True, 0) / marginal(False, 0)
    same_calls = all(figures[(True, n)][1] == figures[(False, n)][1] for n in (small, large))
    same_verdicts = all(figures[(True, n)][3] == figures[(False, n)][3] for n in (small, large))
    cpu_ratio = marginal(True, 2) / marginal(False, 2) if marginal(False, 2) > 0 else float("nan")
    rate_ok = check_rate(figures)

    def output_per_query(batch: bool) -> float:
        out = [figures[(batch, n)][4]["output_tokens"] for n in (small, large)]
        return (out[1] - out[0]) / margin

    print(f"batches: {small} and {large} queries, 3 runs each, early stopping on")
    for batch in (False, True):
        label = "batched" if batch else "live   "
        print(
            f"  {label} cost/query ${marginal(batch, 0):.6f}, calls/query "
            f"{marginal(batch, 1):.2f}, output tokens/query {output_per_query(batch):.0f}, "
            f"client CPU/query {marginal(batch, 2) * 1000:.2f} ms"
        )
    print(f"  request-side cost ratio batched/live {cost_ratio:.3f} (target 0.5)")
    print(f"  batched cost = the tokens the server billed, at the batch rate: {rate_ok}")
    print(f"  same calls {same_calls}, same verdicts {same_verdicts}")
    print(f"  client CPU ratio batched/live {cpu_ratio:.2f} (information)")
    note = f"same calls: {same_calls}; same verdicts: {same_verdicts}; rate: {rate_ok}"
    row = target_row("16 marginal cost per query, batched / live", cost_ratio, 0.55, "x", note)
    row["ok"] = row["ok"] and same_calls and same_verdicts and rate_ok
    emit([row])
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
