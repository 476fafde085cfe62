"""The ``--trigger-json`` report: one file, written once, by the controller only.

This is the edge where the typed :class:`~pytest_skilltrigger.reports.session_report.SessionReport`
becomes plain JSON values. Its keys follow the reference tool's output so existing scripts
keep working, with our additions (errors, chosen, tokens, cost) alongside.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport
from pytest_skilltrigger.support.atomic import atomic_write_text

REPORT_VERSION = 1


def report_json(report: SessionReport) -> dict[str, Any]:
    """The whole report as plain JSON values (``routing``: the folders' tables, see
    :func:`~pytest_skilltrigger.reports.routing_table.routing_tables`)."""
    by_phase = report.by_phase()
    return {
        "version": REPORT_VERSION,
        "backend": report.backend,
        "model": report.model,
        "runs_per_query": report.runs_per_query,
        "trigger_threshold": report.threshold,
        "skills": [skill_json(skill) for skill in report.skills],
        "routing": [table.to_dict() for table in report.routing],
        "totals": {
            **report.total().to_dict(),
            "by_phase": {p: s.to_dict() for p, s in by_phase.items()},
        },
    }


def skill_json(skill: SkillReport) -> dict[str, Any]:
    """One skill's entry: its items' rows and summary, and its rounds' keys when any ran."""
    target = skill.target
    entry: dict[str, Any] = {
        "skill_name": target.name,
        "skill_path": target.skill.path,
        "description": target.description,
        # the exact text after "- name: " that Claude Code lists (null: never listed)
        "listed_description": skill.listed_description,
        "results": skill.results.report_rows(),
        "summary": {"covers": "items", **skill.summary.to_dict()},
    }
    if skill.optimization is not None:
        entry.update(skill.optimization.to_dict())
    return entry


def write_report(path: str, report: dict[str, Any]) -> None:
    """Write the report atomically, pretty-printed, non-ASCII kept readable."""
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
