"""The ``--trigger-json`` report: one file, written once, by the controller only.

Its keys follow the reference tool's output so existing scripts keep working, with our
additions (errors, chosen, tokens, cost) alongside.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_skilltrigger.engine.cost import PHASES, Spend, total_of
from pytest_skilltrigger.reports.routing import RoutingTable
from pytest_skilltrigger.reports.summary import SessionResults, models_used, summarize
from pytest_skilltrigger.skills.catalog import Target
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
    spending: Mapping[str, Spend] | None = None,
    routing: Sequence[RoutingTable] = (),
) -> dict[str, Any]:
    """The whole report as plain JSON values.

    Each skill's ``summary`` covers its items (the eval entries run as tests); ``totals``
    covers every call of the session, by phase: the items, the ``skill_trigger`` fixture's
    checks, the improvement rounds' trigger runs, the proposals (``improve``) and the
    confirmation runs. ``routing`` are the folders' tables
    (:func:`~pytest_skilltrigger.reports.routing.routing_tables`).
    """
    used = models_used(results.all_results())
    model = used[0] if used else model  # the model that really answered, when runs say so
    skills = []
    for skill in results.ordered():
        entry: dict[str, Any] = {
            "skill_name": skill.target.name,
            "skill_path": skill.target.skill.path,
            "description": skill.target.description,
            # the exact text after "- name: " that Claude Code lists (null: never listed)
            "listed_description": listed_description(skill.target),
            "results": skill.report_rows(),
            "summary": {"covers": "items", **summarize(skill.results(), model, prices)},
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
        "routing": [table.to_dict() for table in routing],
        "totals": totals(spending or {}),
    }


def totals(spending: Mapping[str, Spend]) -> dict[str, Any]:
    """The session's calls, tokens and cost, in all and by phase (phases in a fixed order)."""
    by_phase = {p: spending[p] for p in PHASES if p in spending}
    by_phase.update({p: s for p, s in spending.items() if p not in by_phase})
    whole = total_of(by_phase.values())
    return {**whole.to_dict(), "by_phase": {p: s.to_dict() for p, s in by_phase.items()}}


def write_report(path: str, report: dict[str, Any]) -> None:
    """Write the report atomically, pretty-printed, non-ASCII kept readable."""
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")


def listed_description(target: Target) -> str | None:
    """What the model sees of the skill's description, or None when it is not listed."""
    context = target.context()
    if not context.model_invocable:
        return None
    return context.tested.listed
