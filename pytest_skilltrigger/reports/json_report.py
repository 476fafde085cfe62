"""The ``--trigger-json`` report: one file, written once, by the controller only.

This is the edge where the typed :class:`~pytest_skilltrigger.reports.session_report.SessionReport`
becomes plain JSON values. Its keys follow the reference tool's output so existing scripts
keep working, with our additions (errors, chosen, tokens, cost) alongside.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_skilltrigger.model.outcome import format_score, passed
from pytest_skilltrigger.optimizer.confirmation import Confirmation
from pytest_skilltrigger.optimizer.folder import skill_scores, taken_lines
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
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
        entry.update(rounds_json(skill.optimization))
    return entry


def rounds_json(run: Optimization) -> dict[str, Any]:
    """One skill's improvement rounds in the reference scripts' keys (``best_description``,
    ``history``...), plus ours (the confirmation, the folder's scores)."""
    evaluated = run.evaluated()
    best = run.best() if evaluated else None
    last = evaluated[-1] if evaluated else None
    return {
        "exit_reason": run.exit_reason,
        "original_description": run.target.description,
        "best_description": best.description if best else run.target.description,
        "best_iteration": best.iteration if best else None,
        "best_score": (
            format_score(best.test if run.test_entries else best.train) if best else None
        ),
        "best_train_score": format_score(best.train) if best else None,
        "best_test_score": format_score(best.test) if best else None,
        "final_description": last.description if last else run.target.description,
        "iterations_run": len(run.iterations),
        "holdout": run.holdout,
        "train_size": len(run.train_entries),
        "test_size": len(run.test_entries),
        "improved": run.improved,
        "confirmation": confirmation_json(run.confirmation) if run.confirmation else None,
        "refused_for_folder": run.refused_for_folder(),
        "interrupted": run.interrupted,
        "history": [history_entry(run, it) for it in run.iterations],
    }


def history_entry(run: Optimization, it: Iteration) -> dict[str, Any]:
    """An iteration's reference history entry, plus our status and proposal notes; in a
    folder of skills also each skill's score (the siblings': their queries this candidate
    leaves alone) and the folder's."""
    train_rows = [r.summary_row() for r in it.train]
    test_rows = [r.summary_row() for r in it.test]
    train_passed, test_passed = passed(it.train), passed(it.test)
    entry: dict[str, Any] = {
        "iteration": it.iteration,
        "description": it.description,
        "status": it.status,
        "train_passed": train_passed,
        "train_failed": len(it.train) - train_passed,
        "train_total": len(it.train),
        "train_results": train_rows,
        "test_passed": test_passed,
        "test_failed": len(it.test) - test_passed,
        "test_total": len(it.test),
        "test_results": test_rows,
        "passed": train_passed,
        "failed": len(it.train) - train_passed,
        "total": len(it.train),
        "results": train_rows,
        "elapsed_seconds": round(it.elapsed, 3),
        **it.usage.to_dict(),
    }
    if it.note is not None:
        entry["note"] = it.note
    if run.folder and it.evaluated:
        name, cross = run.target.name, run.folder.train + run.folder.test
        cross_results = it.cross_train + it.cross_test
        scores = skill_scores(name, it.train + it.test, cross, cross_results)
        entry["skill_scores"] = {skill: f"{p}/{t}" for skill, (p, t) in scores.items()}
        done, total = (sum(v[i] for v in scores.values()) for i in (0, 1))
        entry["folder_score"] = f"{done}/{total}"
        entry["folder_taken"] = taken_lines(name, cross, cross_results)
    return entry


def confirmation_json(confirmation: Confirmation) -> dict[str, Any]:
    """The fresh re-measurement of the start and the best."""
    c = confirmation
    return {
        "best_iteration": c.best_iteration,
        "on": c.on,
        "start_score": format_score(c.start),
        "best_score": format_score(c.best),
        "holds": c.holds,
        "lead_holds": c.lead_holds,
        "folder_holds": c.folder_holds,
        "folder_start_score": format_score(c.folder_start),
        "folder_best_score": format_score(c.folder_best),
        "complete": c.complete,
        "verdict": c.verdict(),
        "start_results": [r.summary_row() for r in c.start],
        "best_results": [r.summary_row() for r in c.best],
    }


def write_report(path: str, report: dict[str, Any]) -> None:
    """Write the report atomically, pretty-printed, non-ASCII kept readable."""
    atomic_write_text(path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
