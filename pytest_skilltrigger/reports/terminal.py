"""The terminal summary: one line per skill with verdict counts, quality numbers and cost."""

from __future__ import annotations

from typing import Any

from pytest_skilltrigger.engine.cost import format_usd
from pytest_skilltrigger.reports.formatting import format_ratio

MAX_CLASHES = 5  # the worst clashes per folder in the terminal; the JSON has them all


def summary_lines(report: dict[str, Any]) -> list[str]:
    """Lines such as ``csv-cleaner: 18 passed, 2 failed, 0 errors | precision 0.90 ...``,
    read from the report already built for the session (nothing is summarised twice)."""
    lines = []
    for skill in report["skills"]:
        s = skill["summary"]
        cost = _cost(s)
        skipped = f", {s['skipped']} skipped" if s["skipped"] else ""
        counted = s["total"] - s["skipped"]
        lines.append(
            f"{skill['skill_name']}: {s['passed']} passed, {s['failed']} failed, "
            f"{s['errors']} errors{skipped} | queries passed {s['passed']}/{counted} "
            f"({format_ratio(s['query_pass_rate'])}) | precision "
            f"{format_ratio(s['precision'])}, recall {format_ratio(s['recall'])}, "
            f"run accuracy {format_ratio(s['accuracy'])} | "
            f"{s['calls']} calls, tokens in {s['input_tokens']:,} out {s['output_tokens']:,} "
            f"cache write {s['cache_creation_input_tokens']:,} "
            f"read {s['cache_read_input_tokens']:,}{cost}"
        )
    for table in report.get("routing") or []:
        clashes = table["clashes"]
        folder = table["folder"]
        if not clashes:
            lines.append(f"routing in {folder}: no skill took another's queries")
        for clash in clashes[:MAX_CLASHES]:
            lines.append(f"routing in {folder}: {clash['text']}")
        if len(clashes) > MAX_CLASHES:
            lines.append(f"routing in {folder}: ... {len(clashes) - MAX_CLASHES} more clashes")
    totals = report.get("totals") or {}
    phases = totals.get("by_phase") or {}
    if phases:
        parts = [f"{name} {_calls(spend)}{_cost(spend)}" for name, spend in phases.items()]
        lines.append(f"session total: {_calls(totals)}{_cost(totals)} ({'; '.join(parts)})")
    return lines


def _calls(spend: dict[str, Any]) -> str:
    """``12 calls``, or ``12 calls (10 in batches)``: batch calls cost half."""
    batch = spend.get("batch_calls") or 0
    return f"{spend['calls']} calls" + (f" ({batch} in batches)" if batch else "")


def _cost(spend: dict[str, Any]) -> str:
    """``, ~$0.0042``; ``, cost unknown`` for a model missing from the price table."""
    if "cost_usd" not in spend:
        return ""
    cost = spend["cost_usd"]
    return ", cost unknown (model not in the price table)" if cost is None else (
        f", ~{format_usd(cost)}"
    )
