"""What the rounds' page shows of one skill's typed rounds (the template is ``rounds.html.j2``).

Per skill: a header (path, exit reason, the best and its scores, the split, the line Claude
Code lists, the fresh re-measurement), the original and best descriptions, lines that say why
the folder kept a candidate from being the best or the winner from being written, then one
row per iteration and one column per query, train columns and test columns apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_skilltrigger.model.outcome import QueryResult, format_score
from pytest_skilltrigger.optimizer.folder import skill_scores, taken_lines
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.reports.html_pages import QUERY_CHARS, cell_of
from pytest_skilltrigger.skills.evalset import EvalEntry


def skill_view(run: Optimization) -> dict[str, Any]:
    """One skill's section of the rounds' page."""
    best = run.best() if run.evaluated() else None
    refused = run.refused_for_folder()
    original = run.target.description
    best_text = best.description if best else original
    return {
        "name": run.target.name,
        "folder_lines": _folder_lines(run, refused),
        "meta": _meta(run, best),
        "original": original,
        "best": best_text,
        "unchanged": best_text == original,
        "folder": bool(run.folder),
        "train_columns": [_column(e, "train") for e in run.train_entries],
        "test_columns": [_column(e, "test") for e in run.test_entries],
        "rows": [_row(run, it, best, refused) for it in run.iterations],
    }


def _score(results: Sequence[QueryResult]) -> str:
    return format_score(results) if results else "—"


def _meta(run: Optimization, best: Iteration | None) -> list[tuple[str, str]]:
    sizes = f"train {len(run.train_entries)}, test {len(run.test_entries)}"
    sizes += f" (holdout {run.holdout:g})"
    if not run.test_entries and not run.holdout:
        sizes += " — no test set: scores are on the queries the improver saw"
    best_text = "—"
    if best is not None:
        best_text = (
            f"iteration {best.iteration} (train {_score(best.train)}, test {_score(best.test)})"
        )
    meta = [
        ("Path", run.target.skill.path),
        ("Exit reason", run.exit_reason or ("interrupted" if run.interrupted else "—")),
        ("Best", best_text),
        ("Queries", sizes),
        ("Listed as", run.target.context().tested.line),
    ]
    if run.confirmation is not None:
        c = run.confirmation
        meta.append(("Measured again", f"on fresh runs ({c.on}): {c.verdict()}"))
    if run.interrupted:
        meta.append(("Interrupted", "yes: the run stopped before it finished"))
    return meta


def _folder_lines(run: Optimization, refused: list[int]) -> list[str]:
    """Why a row with more test passes than the highlighted best is not the best, or why a
    winning round left SKILL.md unchanged: the folder decided."""
    name = run.target.name
    lines = []
    if refused:
        numbers = ", ".join(str(n) for n in refused)
        one = len(refused) == 1
        lines.append(
            f"Iteration {numbers} did better on {name}'s own queries than the best but "
            f"{'was' if one else 'were'} refused: {'it takes' if one else 'each takes'} more "
            "of its siblings' queries than it gains (the folder passes fewer of its queries "
            "than with the starting description)."
        )
    c = run.confirmation
    if c is not None and run.folder and c.complete and not c.folder_holds:
        lead = (
            ", though its lead on its own queries held: it takes more of its siblings' queries "
            "than it gains"
            if c.lead_holds
            else ""
        )
        lines.append(
            f"Not written: measured again on fresh runs, the best (iteration "
            f"{c.best_iteration}) passes fewer of the folder's queries than the start "
            f"({format_score(c.folder_best)} with it, {format_score(c.folder_start)} with the "
            f"start){lead}."
        )
    return lines


def _column(entry: EvalEntry, split: str) -> dict[str, Any]:
    query = entry.query
    short = query if len(query) <= QUERY_CHARS else query[: QUERY_CHARS - 1] + "…"
    tip = [query, "should trigger" if entry.should_trigger else "should not trigger"]
    tip += [f"set: {split}", *(f"{k}: {v}" for k, v in entry.extra.items())]
    return {
        "split": split,
        "should_trigger": entry.should_trigger,
        "short": short,
        "tip": "\n".join(tip),
    }


def _row(run: Optimization, it: Iteration, best: Iteration | None,
         refused: list[int]) -> dict[str, Any]:  # fmt: skip
    """One iteration: its marks, description, scores, the folder's, and a cell per query."""
    is_best = best is not None and it.iteration == best.iteration
    is_refused = it.iteration in refused
    marks = ["best" if is_best else "", "refused" if is_refused else "", it.status]
    row: dict[str, Any] = {
        "number": it.iteration,
        "classes": " ".join(m for m in marks if m),
        "best": is_best,
        "status": it.status if it.status != "evaluated" else "",
        "refused": is_refused,
        "description": it.description,
        "note": it.note,
        "train_score": _score(it.train),
        "test_score": _score(it.test),
        "train_cells": [cell_of(r) for r in _padded(it.train, len(run.train_entries))],
        "test_cells": [cell_of(r) for r in _padded(it.test, len(run.test_entries))],
        "folder_score": None,
    }
    if run.folder and it.evaluated:
        name, cross = run.target.name, run.folder.train + run.folder.test
        cross_results = it.cross_train + it.cross_test
        scores = skill_scores(name, it.train + it.test, cross, cross_results)
        done, total = (sum(v[i] for v in scores.values()) for i in (0, 1))
        row["folder_score"] = f"{done}/{total}"
        row["skill_scores"] = [f"{skill} {p}/{t}" for skill, (p, t) in scores.items()]
        row["taken"] = taken_lines(name, cross, cross_results)
    return row


def _padded(results: list[QueryResult], size: int) -> list[QueryResult | None]:
    """An iteration's results, one per column (an interrupted one's missing ones as None)."""
    return [*results, *([None] * (size - len(results)))][:size]

