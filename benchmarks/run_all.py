"""Run every benchmark and print one table: target, measured, limit, ratio, OK/OVER.

    .venv/bin/python benchmarks/run_all.py [--quick] [--only NAME ...] [--json FILE]

Each benchmark runs as its own process (its output is shown as it comes); the rows they
emit (lines starting with ``@@``) make the table. Measurements, not tests: exits 0 always.
The benchmarks that run the pinned Claude Code CLI (``CLI_BENCHES``, several minutes each)
run only when named: ``--only local_latency official_runner``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = (
    "throughput",
    "client_cpu",
    "curtailment",
    "store",
    "load",
    "client_call",
    "batch",
    "contexts",
    "changed_since",
    "within_turn",
    "harvest",
)
CLI_BENCHES = ("local_latency", "official_runner")


def load_average() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run_bench(name: str, quick: bool) -> tuple[list[dict], float]:
    cmd = [sys.executable, str(HERE / f"bench_{name}.py")]
    if quick:
        cmd.append("--quick")
    print(f"\n### bench_{name}.py (load average {load_average()})", flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=HERE.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    rows = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("@@ "):
            rows.append(json.loads(line[3:]))
        else:
            print("   " + line.rstrip(), flush=True)
    proc.wait()
    return rows, time.perf_counter() - start


def fmt(value: float) -> str:
    if value == float("inf"):
        return "inf"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def table(rows: list[dict]) -> str:
    head = ("target", "measured", "limit", "ratio", "verdict")
    body = [
        (
            r["target"],
            f"{fmt(r['measured'])} {r['unit']}",
            f"{fmt(r['limit'])} {r['unit']}",
            fmt(r["ratio"]),
            "OK" if r["ok"] else "OVER",
        )
        for r in rows
    ]
    widths = [max(len(x[i]) for x in (head, *body)) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    notes = [f"  {r['target']}: {r['note']}" for r in rows if r.get("note")]
    return "\n".join([*lines, "", "notes:", *notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="*", choices=BENCHES + CLI_BENCHES, default=None)
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    rows: list[dict] = []
    for name in args.only or BENCHES:
        got, seconds = run_bench(name, args.quick)
        print(f"   ({seconds:.0f} s)")
        rows += got
    total = time.perf_counter() - start
    print(
        f"\n=== summary ({'quick' if args.quick else 'full'}, {total:.0f} s, "
        f"{os.cpu_count()} CPUs, load average at end {load_average()}) ==="
    )
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
