"""The terminal summary: one line per skill with verdict counts, quality numbers and cost."""

from __future__ import annotations

from pytest_skilltrigger.summary import SessionResults, summarize


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def summary_lines(results: SessionResults, model: str | None, prices: dict | None) -> list[str]:
    """Lines such as ``csv-cleaner: 18 passed, 2 failed, 0 errors | precision 0.90 ...``."""
    lines = []
    for skill in results.ordered():
        s = summarize(skill.results(), model, prices)
        cost = f", ~${s['cost_usd']:.4f}" if "cost_usd" in s else ""
        skipped = f", {s['skipped']} skipped" if s["skipped"] else ""
        lines.append(
            f"{skill.skill_name}: {s['passed']} passed, {s['failed']} failed, "
            f"{s['errors']} errors{skipped} | precision {_ratio(s['precision'])}, "
            f"recall {_ratio(s['recall'])}, accuracy {_ratio(s['accuracy'])} | "
            f"{s['calls']} calls, tokens in {s['input_tokens']:,} out {s['output_tokens']:,} "
            f"cache write {s['cache_creation_input_tokens']:,} "
            f"read {s['cache_read_input_tokens']:,}{cost}"
        )
    return lines
