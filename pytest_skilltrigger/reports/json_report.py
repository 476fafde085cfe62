"""The ``--trigger-json`` report as plain JSON values: the edge where the typed session
report becomes JSON. Its keys follow the reference tool's output so existing scripts keep
working, with our additions (errors, chosen, tokens, cost) alongside.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pytest_skilltrigger.model.outcome import passed
from pytest_skilltrigger.optimizer.record import AcceptanceRecord, RoundRecord, RoundsRecord
from pytest_skilltrigger.optimizer.scoring import Gain, Score
from pytest_skilltrigger.reports.analysis import disagreements
from pytest_skilltrigger.reports.crowd_curve import crowd_curves
from pytest_skilltrigger.reports.session_report import RunScope, SessionReport, SkillReport

REPORT_VERSION = 1


def report_json(report: SessionReport) -> dict[str, Any]:
    """The whole report as plain JSON values (``routing``: the folders' tables, see
    :func:`~pytest_skilltrigger.reports.routing_table.routing_tables`)."""
    by_phase = report.by_phase()
    curves = crowd_curves(report.skills)
    document: dict[str, Any] = {
        "version": REPORT_VERSION,
        "backend": report.backend,
        "model": report.model,
        "runs_per_query": report.runs_per_query,
        "trigger_threshold": report.threshold,
        # how verdicts were reached: the sequential rule (confidence, margin, fewest and most
        # runs) or the reference scripts' fixed runs
        "verdict_rule": report.rule.to_dict() if report.rule is not None else None,
        # the permission mode every query was asked in (a matrix's others: each skill's)
        "permission_mode": report.mode_name,
        "skills": [skill_json(skill, report.mode_name) for skill in report.skills],
        # a model matrix: its models, and the queries whose verdicts differ between them
        "models": list(dict.fromkeys(s.model for s in report.skills if s.model)),
        "model_disagreements": [d.to_dict() for d in disagreements(report.skills)],
        "routing": [table.to_dict() for table in report.routing],
        # the claude-code backend's CLI processes in flight, the xdist workers' added up
        # (null: another backend)
        "concurrency": report.load.to_dict() if report.load is not None else None,
        "totals": {
            **report.total().to_dict(),
            "by_phase": {p: s.to_dict() for p, s in by_phase.items()},
        },
    }
    if curves:  # --trigger-crowd: recall and precision against the install's size
        document["crowd_curves"] = [c.to_dict() for c in curves]
    if report.controls:  # the controls run before the items (--trigger-controls)
        document["controls"] = [control.to_dict() for control in report.controls]
    if report.lint:  # what the eval sets' lint found (--trigger-lint)
        document["lint"] = [finding.to_dict() for finding in report.lint]
    document.update(scope_json(report.scope))
    return document


def scope_json(scope: RunScope) -> dict[str, Any]:
    """The keys of a run that covers part of the skills: ``changed_since`` and
    ``not_rerun``; a shard's ``shard`` and ``items`` (each item's node id and result, which
    ``--trigger-merge`` reads back); a merge's ``merged`` parts."""
    found: dict[str, Any] = {}
    if scope.changed_since is not None:
        found["changed_since"] = scope.changed_since
        found["not_rerun"] = [unchanged.to_dict() for unchanged in scope.not_rerun]
    if scope.shard is not None:
        found["shard"] = scope.shard
        found["items"] = [
            {"nodeid": nodeid, "result": result.to_dict()}
            for nodeid, result in sorted(scope.items.items())
        ]
    if scope.merged:
        found["merged"] = list(scope.merged)
    return found


def skill_json(skill: SkillReport, session_mode: str = "default") -> dict[str, Any]:
    """One skill's entry: its items' rows and summary, and its rounds' keys when any ran
    (``session_mode``: the permission mode of items not in a matrix's other modes)."""
    target = skill.target
    entry: dict[str, Any] = {
        "skill_name": target.name,
        "skill_path": target.skill.path,
        "model": skill.model,  # its model in a matrix (null: the session's one model)
        "description": target.description,
        # the exact text after "- name: " that Claude Code lists (null: never listed)
        "listed_description": skill.listed_description,
        # how Claude Code shows it on its model: full, cut (past 1,536 characters), bare (the
        # listing passes the model's budget: the name alone) or unlisted
        "listed": skill.listed,
        "listing_budget": skill.fit.to_dict() if skill.fit else None,
        "results": skill.results.report_rows(),
        "summary": {"covers": "items", **skill.summary.to_dict()},
    }
    harvested = [r for r in entry["results"] if (r.get("extra") or {}).get("harvested")]
    if harvested:  # the queries from the user's own sessions, apart
        entry["harvested"] = {
            "queries": len(harvested),
            "passed": sum(1 for r in harvested if r.get("pass") is True),
            "failed": sum(1 for r in harvested if r.get("pass") is False),
        }
    if skill.crowd is not None:  # the other installed skills it was asked among
        entry["crowd"] = skill.crowd
    mode = skill.mode or session_mode
    if mode != "default":  # its permission mode: the session's, or a matrix's other
        entry["permission_mode"] = mode
    sub = target.start_context.subfolder
    if sub is not None:  # a subfolder's skill: how the session reached it, by which name
        entry["subfolder"] = {
            "folder": sub.folder,
            "session": "started in the folder" if sub.started_in else "root, after a Read",
            "read": sub.read_path or None,
            "called_as": target.choice_id,
        }
    if skill.optimization is not None:
        entry.update(rounds_json(skill.optimization))
    return entry


def rounds_document(records: Sequence[RoundsRecord]) -> str:
    """The rounds' results JSON (``results.json`` of the results folder), as text: each
    skill's rounds with its name, path and listing line."""
    skills = [
        {
            "skill_name": record.name,
            "skill_path": record.skill_path,
            "listed_as": record.listed_as,
            **rounds_json(record),
        }
        for record in records
    ]
    return dumps({"skills": skills}) + "\n"


def rounds_json(run: RoundsRecord) -> dict[str, Any]:
    """One skill's improvement rounds in the reference scripts' keys (``best_description``,
    ``history``...), plus ours: each iteration's scores with intervals, its candidates and
    its race against the best so far, and the fresh race that decided acceptance."""
    return {
        "exit_reason": run.exit_reason,
        "original_description": run.original,
        "best_description": run.best_description,
        "best_iteration": run.best_iteration,
        "best_score": run.best_score,
        "best_train_score": run.best_train_score,
        "best_test_score": run.best_test_score,
        "final_description": run.final_description,
        "iterations_run": len(run.rounds),
        "holdout": run.holdout,
        "train_size": len(run.train_entries),
        "test_size": len(run.test_entries),
        "confidence": run.confidence,
        "improved": run.improved,
        "acceptance": _acceptance_json(run.acceptance) if run.acceptance else None,
        "interrupted": run.interrupted,
        "history": [_history_entry(it) for it in run.rounds],
        # queries no round got right (after two): drop or rephrase them
        "unreachable": [u.to_dict() for u in run.unreachable],
    }


def _score_json(value: Score) -> dict[str, Any]:
    return {
        "expected": round(value.expected, 3),
        "interval": list(value.interval),
        "total": value.total,
    }


def _gain_json(gain: Gain) -> dict[str, Any]:
    return {
        "expected": round(gain.expected, 3),
        "interval": list(gain.interval),
        "p_better": round(gain.p_better, 4),
        "p_worse": round(gain.p_worse, 4),
        "verdict": gain.verdict,
        "differing": gain.differing,
    }


def _history_entry(it: RoundRecord) -> dict[str, Any]:
    """An iteration's reference history entry, plus ours: its status and proposal notes,
    scores with intervals (expected queries right, own and the folder's), its candidates and
    its race; in a folder of skills also each skill's pass counts and the folder's."""
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
    if it.train_score is None or it.test_score is None:
        return entry
    entry["train_score"] = _score_json(it.train_score)
    entry["test_score"] = _score_json(it.test_score)
    entry["candidates"] = [
        {"description": c.description, "screened_runs": c.screened_runs, "survived": c.survived}
        for c in it.candidates
    ]
    race = it.race
    entry["race"] = {**_gain_json(race.gain), "extra_runs": race.extra_runs} if race else None
    entry["became_best"] = race.became_best if race else False
    if it.folder is not None:
        entry["skill_scores"] = {skill: f"{p}/{t}" for skill, p, t in it.folder.skill_scores}
        entry["folder_score"] = f"{it.folder.passed}/{it.folder.total}"
        entry["folder_taken"] = list(it.folder.taken)
    return entry


def _acceptance_json(record: AcceptanceRecord) -> dict[str, Any]:
    """The fresh race of the best against the start on the held-out queries."""
    acceptance = record.acceptance
    race = acceptance.race
    return {
        "best_iteration": acceptance.best_iteration,
        "on": acceptance.on,
        "gain": _gain_json(race.gain),
        # racing on all queries: the held-out ones alone, where the best may not be worse
        "held_out_gain": _gain_json(acceptance.held_out) if acceptance.held_out else None,
        "extra_runs": race.extra_runs,
        "accepted": acceptance.accepted,
        "complete": acceptance.complete,
        "verdict": record.verdict,
        "start_score": record.start_score,
        "best_score": record.best_score,
        "folder_start_score": record.folder_start_score,
        "folder_best_score": record.folder_best_score,
        # with a model matrix: the race on each other model (the best may lose on none)
        "models": {
            str(model): {"gain": _gain_json(other.gain), "verdict": other.verdict}
            for model, other in acceptance.on_models
        },
        "start_results": [r.summary_row() for r in race.incumbent],
        "best_results": [r.summary_row() for r in race.challenger],
    }


def dumps(data: Any) -> str:
    """JSON as people read it: pretty-printed, non-ASCII kept readable."""
    return json.dumps(data, indent=2, ensure_ascii=False)


def compact(data: Any) -> str:
    """JSON on one line with sorted keys (a JUnit property's value)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False)
