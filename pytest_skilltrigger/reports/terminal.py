"""The terminal summary: one line per skill with verdict counts, quality numbers and cost."""

from __future__ import annotations

from typing import Any

from pytest_skilltrigger.reports.formatting import format_ratio


def summary_lines(report: dict[str, Any]) -> list[str]:
    """Lines such as ``csv-cleaner: 18 passed, 2 failed, 0 errors | precision 0.90 ...``,
    read from the report already built for the session (nothing is summarised twice)."""
    lines = []
    for skill in report["skills"]:
        s = skill["summary"]
        cost = f", ~${s['cost_usd']:.4f}" if "cost_usd" in s else ""
        skipped = f", {s['skipped']} skipped" if s["skipped"] else ""
        lines.append(
            f"{skill['skill_name']}: {s['passed']} passed, {s['failed']} failed, "
            f"{s['errors']} errors{skipped} | precision {format_ratio(s['precision'])}, "
            f"recall {format_ratio(s['recall'])}, accuracy {format_ratio(s['accuracy'])} | "
            f"{s['calls']} calls, tokens in {s['input_tokens']:,} out {s['output_tokens']:,} "
            f"cache write {s['cache_creation_input_tokens']:,} "
            f"read {s['cache_read_input_tokens']:,}{cost}"
        )
    return lines
