"""Runs at a rate limit: the example skills' kind of queries against a low-tier key's limits.

200 clear-cut queries, one run each, against the fake API enforcing 60 requests a minute (and,
in a second scenario, an input-token limit that binds before the requests do: each query
carries a pasted table), under ``-n 1`` and ``-n 4``. The paced plugin (this tree) is compared
in the same run with the code before pacing (``--before``, a git revision run from a
worktree), which sends as it comes and leaves each 429 to the SDK's back-off.

The fake's "minute" lasts ``--minute`` seconds (6: ten times faster than the API's). Every
header, reset time and ``retry-after`` is stated in those seconds, so proportions hold: the
ideal wall time is what the limit allows, ``max(calls / RPM, counted input tokens / ITPM)``
minutes of the fake's. Per row: items that errored, requests the server saw, the share it
answered 429, the wall time from the first request to the last, and its ratio to the ideal.
Targets: no item errors, the paced wall within 1.15x of the ideal, 429s at most 5%.

Two more scenarios keep their requests a minute over a short interval as well, as the API's
docs say it may, which its headers never state: 300 a minute over one second (five at once),
and a low tier's 50 a minute over 1.2 s (one at a time); the fake's minute is a real one
here, its buckets the minute's and the interval's, its 429s' ``retry-after`` in whole
seconds. The paced plugin runs each under ``-n 1`` and ``-n 2``. Targets: no item errors, at
most 10% of requests refused, the wall within 1.2x of the ideal.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _common import (
    ROOT,
    bench_parser,
    emit,
    run_pytest,
    script_entries,
    skill_args,
    target_row,
    temp_dir,
    write_project,
)

sys.path.insert(0, str(ROOT))
from tests.fake_messages_api import FakeMessagesAPI, RateLimits

BEFORE = "cd83993"  # the last landed code before pacing (this round's start)
TABLE = " | ".join(f"row {n}: 2026-0{n % 9 + 1}-1{n % 9} payment {n * 37} EUR" for n in range(40))


def entries(count: int, pasted: bool) -> list[dict[str, Any]]:
    """``count`` queries, half should trigger; with ``pasted`` each carries a table."""
    found = []
    for i in range(count):
        positive = i % 2 == 0
        ask = "reconcile this ledger against the invoices" if positive else "write a haiku"
        text = f"{ask}, batch {i}" + (f": {TABLE}" if pasted else "")
        found.append({"query": text, "should_trigger": positive})
    return found


@contextlib.contextmanager
def before_tree(revision: str) -> Iterator[Path]:
    """The code at ``revision``, in a worktree of its own (removed on exit)."""
    folder = Path(tempfile.mkdtemp(prefix="skilltrigger-before-"))
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(folder), revision],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, check=False)


def one_run(
    api: FakeMessagesAPI, project: Path, skill: Path, workers: list[str], tree: Path | None
) -> dict[str, Any]:
    """One pytest run against ``api`` (``tree``: the code before pacing); its figures."""
    api.rate_limits = api.rate_limits  # fresh, full buckets (assigning resets them)
    api.rate_log.clear()
    before = dict(api.stats)
    out = project / "out.json"
    args = [*skill_args(skill, runs=1, concurrency=10, json_path=out), *workers]
    if tree is not None:
        args = named_as_before(args)
    env_before = os.environ.get("PYTHONPATH")
    if tree is not None:
        os.environ["PYTHONPATH"] = str(tree)  # its package ahead of this tree's
    # the items' pacing alone: the controls' two queries, asked by the xdist controller while
    # its workers start, would stretch the span from the first request to the last
    os.environ["SKILLTRIGGER_CONTROLS"] = "off"
    try:
        result = run_pytest(args, project, api, timeout=1800)
    finally:
        os.environ.pop("SKILLTRIGGER_CONTROLS", None)
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    report = json.loads(out.read_text()) if out.exists() else {"skills": []}
    errored = sum(s["summary"]["errors"] for s in report["skills"])
    times = [t for t, _tokens in api.rate_log]
    requests = api.stats["calls"] - before.get("calls", 0)
    refused = api.stats["rate_limited"] - before.get("rate_limited", 0)
    return {
        "errored": errored,
        "calls": len(times),
        "requests": requests,
        "refused": refused,
        "tokens": sum(tokens for _t, tokens in api.rate_log),
        "span": (times[-1] - times[0]) if len(times) > 1 else 0.0,
        "wall": result.wall,
        "items": len(report["skills"][0]["results"]) if report["skills"] else 0,
    }


def named_as_before(args: list[str]) -> list[str]:
    """The options as the code before pacing named them (before every option took the
    ``--trigger-`` prefix); those it did not have are left out (it judged the first call)."""
    from pytest_skilltrigger.model.options import BY_FLAG

    out = []
    for arg in args:
        flag, sep, value = arg.partition("=")
        option = BY_FLAG.get(flag)
        if option is None:
            out.append(arg)
        elif option.was is not None:
            out.append(f"{option.was}{sep}{value}")
        elif flag == "--trigger-within":
            continue
        else:
            out.append(arg)
    return out


def ideal(row: dict[str, Any], limits: RateLimits) -> float:
    """The seconds the limits allow for what the server accepted (the fake's minute)."""
    minutes = row["calls"] / (limits.rpm or 1)
    if limits.itpm:
        minutes = max(minutes, row["tokens"] / limits.itpm)
    return minutes * limits.minute


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--minute", type=float, default=6.0)
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with")
    args = parser.parse_args(argv)
    queries = 60 if args.quick else args.queries
    os.environ.pop("ANTHROPIC_AUTH_TOKEN", None)
    scenarios = {
        "60 RPM": (RateLimits(rpm=60, minute=args.minute), False),
        "60 RPM, ITPM binding": (RateLimits(rpm=60, itpm=12_000, minute=args.minute), True),
    }
    rows = []
    with before_tree(args.before) as tree:
        for name, (limits, pasted) in scenarios.items():
            for label, code in (("paced", None), ("before", tree)):
                for workers in ([], ["-n", "4"]):
                    rows.append(scenario_row(name, limits, pasted, label, code, workers, queries))
    for name, short in SHORT.items():
        for workers in ([], ["-n", "2"]):
            rows.append(scenario_row(name, short, False, "paced", None, workers, queries))
    print_targets(rows)
    return 0


SHORT = {
    "300 RPM over 1 s too": RateLimits(rpm=300, minute=60.0, interval=1.0),
    "50 RPM over 1.2 s too": RateLimits(rpm=50, minute=60.0, interval=1.2),
}


def scenario_row(
    name: str,
    limits: RateLimits,
    pasted: bool,
    label: str,
    code: Path | None,
    workers: list[str],
    queries: int,
) -> dict[str, Any]:
    """One run of a scenario, printed: its figures, with the ideal wall time."""
    with temp_dir() as tmp, FakeMessagesAPI(rate_limits=limits) as api:
        found = entries(queries, pasted)
        skill = write_project(tmp, found)
        script_entries(api, found)
        row = one_run(api, tmp, skill, workers, code)
    row.update(scenario=name, code=label, workers=int(workers[1]) if workers else 1)
    row["ideal"] = ideal(row, limits)
    print_row(row)
    return row


def print_row(row: dict[str, Any]) -> None:
    from pytest_skilltrigger.model.stats import wilson

    share = row["refused"] / row["requests"] if row["requests"] else 0.0
    low, high = wilson(row["refused"], row["requests"]) if row["requests"] else (0.0, 1.0)
    ratio = row["span"] / row["ideal"] if row["ideal"] else float("nan")
    print(
        f"{row['scenario']:22s} {row['code']:7s} -n {row['workers']}: "
        f"{row['errored']} of {row['items']} items errored, {row['requests']} requests, "
        f"429s {row['refused']} ({share:.1%}, 95% interval {low:.1%}–{high:.1%}), "
        f"wall {row['span']:.1f}s (whole run {row['wall']:.1f}s), "
        f"ideal {row['ideal']:.1f}s, ratio {ratio:.2f}",
        flush=True,
    )


def print_targets(rows: list[dict[str, Any]]) -> None:
    paced = [r for r in rows if r["code"] == "paced" and r["scenario"] not in SHORT]
    short = [r for r in rows if r["scenario"] in SHORT]

    def worst_wall(found: list[dict[str, Any]]) -> float:
        return max(r["span"] / r["ideal"] for r in found if r["ideal"])

    def worst_share(found: list[dict[str, Any]]) -> float:
        return 100 * max(r["refused"] / r["requests"] for r in found if r["requests"])

    emit(
        [
            target_row("rate limit: paced wall / ideal (worst row)", worst_wall(paced), 1.15, "x"),
            target_row("rate limit: paced 429 share (worst row)", worst_share(paced), 5.0, "%"),
            target_row(
                "rate limit: paced items errored", sum(r["errored"] for r in paced), 0, "items"
            ),
            target_row("short interval: wall / ideal (worst row)", worst_wall(short), 1.2, "x"),
            target_row("short interval: 429 share (worst row)", worst_share(short), 10.0, "%"),
            target_row(
                "short interval: items errored", sum(r["errored"] for r in short), 0, "items"
            ),
        ]
    )


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
