"""The ``--trigger-json`` report: one file, written once, by the controller only.

Its keys follow the reference tool's output so existing scripts keep working, with our
additions (errors, chosen, tokens, cost) alongside.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_skilltrigger.reports.summary import SessionResults, summarize
from pytest_skilltrigger.support.atomic import atomic_write_text

REPORT_VERSION = 1


def build_report(
    results: SessionResults,
    *,
    backend: str | None,
    model: str | None,
    runs_per_query: int,
    threshold: float,
    extra_by_skill: dict[str, dict[str, Any]] | None = None,
    prices: dict | None = None,
) -> dict[str, Any]:
    """The whole report as plain JSON values."""
    skills = []
    for skill in results.ordered():
        entry: dict[str, Any] = {
            "skill_name": skill.target.name,
            "skill_path": skill.target.skill.path,
            "description": skill.target.description,
            "results": skill.report_rows(),
            "summary": summarize(skill.results(), model, prices),
        }
        entry.update((extra_by_skill or {}).get(skill.target.skill.path, {}))
        skills.append(entry)
    return {
        "version": REPORT_VERSION,
        "backend": backend,
        "model": model,
        "runs_per_query": runs_per_query,
        "trigger_threshold": threshold,
        "skills": skills,
    }


def write_report(path: str, report: dict[str, Any]) -> None:
    """Write the report atomically, pretty-printed, non-ASCII kept readable."""
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
