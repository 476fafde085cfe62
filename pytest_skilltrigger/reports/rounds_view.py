"""What the rounds' page shows of one skill's typed rounds (the template is ``rounds.html.j2``).

Per skill: a header (path, exit reason, the line Claude Code lists, the fresh race that
decided acceptance), a chart of the rounds, the original and best descriptions, one row per
iteration (its candidates, scores with intervals, its race against the best so far), and a
grid of queries by iteration. The grid grows downwards, one row per query, so that it stays
in view at the width of a laptop screen however many queries the set holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_skilltrigger.model.formatting import display_path
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.optimizer.folder import skill_scores, taken_lines
from pytest_skilltrigger.optimizer.rounds import Candidate, Iteration, Optimization
from pytest_skilltrigger.reports.html_pages import cell_of
from pytest_skilltrigger.skills.evalset import EvalEntry

CHART = {"width": 560, "height": 220, "left": 44, "right": 16, "top": 14, "bottom": 34}


def skill_view(run: Optimization, base: str | None = None) -> dict[str, Any]:
    """One skill's section of the rounds' page (its folder shown relative to ``base``, where
    pytest started)."""
    evaluated = run.evaluated()
    best = run.best() if evaluated else None
    original = run.target.description
    best_text = best.description if best else original
    return {
        "name": run.target.name,
        "anchor": "skill-" + "".join(c if c.isalnum() else "-" for c in run.target.name),
        "meta": _meta(run, base),
        "original": original,
        "best": best_text,
        "unchanged": best_text == original,
        "folder": bool(run.folder),
        "chart": _chart(run),
        "rows": [_row(run, it, best) for it in run.iterations],
        "columns": [it.iteration for it in run.iterations],
        "grid": _grid(run),
    }


def _meta(run: Optimization, base: str | None = None) -> list[tuple[str, str]]:
    sizes = f"train {len(run.train_entries)}, test {len(run.test_entries)}"
    sizes += f" (holdout {run.holdout:g})"
    if not run.test_entries and not run.holdout:
        sizes += " — no test set: acceptance is on the queries the improver saw"
    if run.folder:
        sizes += f"; the folder's: train {len(run.folder.train)}, test {len(run.folder.test)}"
    meta = [
        ("Path", display_path(run.target.skill.path, base)),
        ("Exit reason", run.exit_text),
        ("Queries", sizes),
        ("Listed as", run.target.context().tested.line),
    ]
    if run.acceptance is not None:
        a = run.acceptance
        written = "accepted for SKILL.md" if run.improved else "SKILL.md unchanged"
        meta.append(
            (
                "Acceptance",
                f"iteration {a.best_iteration} raced against the start on "
                f"fresh runs ({a.on}): {a.verdict()}; {written}",
            )
        )
    elif run.evaluated() and not run.beats_start and not run.interrupted:
        meta.append(("Acceptance", "no candidate beat the start on train: SKILL.md unchanged"))
    if run.interrupted:
        meta.append(("Interrupted", "yes: the run stopped before it finished"))
    return meta


def _row(run: Optimization, it: Iteration, best: Iteration | None) -> dict[str, Any]:
    """One iteration: its description and candidates, scores, race, and the folder's."""
    c = run.confidence
    row: dict[str, Any] = {
        "number": it.iteration,
        "classes": " ".join(x for x in ("best" if it is best else "", it.status) if x),
        "best": it is best,
        "status": it.status if it.status != "evaluated" else "",
        "description": it.description,
        "note": it.note,
        "candidates": [_candidate(cand) for cand in it.candidates]
        if len(it.candidates) > 1
        else [],
        "train": it.train_score(c).text() if it.evaluated else "—",
        "test": it.test_score(c).text() if it.evaluated else "—",
        "race": "",
        "folder_score": None,
    }
    if it.race is not None:
        outcome = "new best" if it.became_best else "kept the best so far"
        row["race"] = f"{it.race.gain.text()}: {outcome}"
    elif it.iteration == 1 and it.evaluated:
        row["race"] = "the start"
    if run.folder and it.evaluated:
        name, cross = run.target.name, run.folder.train + run.folder.test
        cross_results = it.cross_train + it.cross_test
        scores = skill_scores(name, it.train + it.test, cross, cross_results)
        done, total = (sum(v[i] for v in scores.values()) for i in (0, 1))
        row["folder_score"] = f"{done}/{total}"
        row["skill_scores"] = [f"{skill} {p}/{t}" for skill, (p, t) in scores.items()]
        row["taken"] = taken_lines(name, cross, cross_results)
    return row


def _candidate(candidate: Candidate) -> str:
    how = (
        "survived the screening"
        if candidate.survived
        else (f"dropped after {candidate.screened_runs} run(s) a query")
    )
    return f"{how}: {candidate.description}"


def _grid(run: Optimization) -> list[dict[str, Any]]:
    """One row per query (train, then test; the skill's own, then the folder's), one cell
    per iteration."""
    sides: list[tuple[str, Sequence[EvalEntry], Callable[[Iteration], list[QueryResult]]]] = [
        ("train", run.train_entries, lambda it: it.train),
        ("test", run.test_entries, lambda it: it.test),
        ("train", [x.entry for x in run.folder.train], lambda it: it.cross_train),
        ("test", [x.entry for x in run.folder.test], lambda it: it.cross_test),
    ]
    rows = []
    for split, entries, pick in sides:
        for position, entry in enumerate(entries):
            cells = [cell_of(_at(pick(it), position)) for it in run.iterations]
            rows.append(
                {
                    "split": split,
                    "should_trigger": entry.should_trigger,
                    "query": entry.query,
                    "tip": _tip(entry, split),
                    "cells": cells,
                    "owner": entry.extra.get("owner"),
                }
            )
    return rows


def _at(results: Sequence[QueryResult], position: int) -> QueryResult | None:
    return results[position] if position < len(results) else None


def _tip(entry: EvalEntry, split: str) -> str:
    tip = ["should trigger" if entry.should_trigger else "should not trigger", f"set: {split}"]
    tip += [f"{k}: {v}" for k, v in entry.extra.items()]
    return "\n".join(tip)


def _chart(run: Optimization) -> dict[str, Any] | None:
    """The rounds as an inline SVG: each iteration's expected train and test queries right
    with their intervals, the start's level, the best so far ringed, the one written marked."""
    evaluated = run.evaluated()
    if not evaluated:
        return None
    c, box = run.confidence, CHART
    total = max(len(evaluated[0].train_side), len(evaluated[0].test_side), 1)
    inner_w = box["width"] - box["left"] - box["right"]
    inner_h = box["height"] - box["top"] - box["bottom"]
    last = max(it.iteration for it in run.iterations)

    def x(n: float) -> float:
        return round(box["left"] + inner_w * (n - 0.5) / max(last, 1), 1)

    def y(value: float, of: int) -> float:
        return round(box["top"] + inner_h * (1 - value / max(of, 1)), 1)

    best = run.best()
    points = []
    for it in evaluated:
        sides = (("train", it.train_score(c), -6), ("test", it.test_score(c), 6))
        for side, value, offset in sides:
            low, high = value.interval
            points.append(
                {
                    "side": side,
                    "x": x(it.iteration) + offset,
                    "y": y(value.expected, value.total),
                    "low": y(low, value.total),
                    "high": y(high, value.total),
                    "label": f"iteration {it.iteration}, {side}: {value.text()}",
                }
            )
    start = evaluated[0].train_score(c)
    written = best if run.improved else None
    return {
        **box,
        "points": points,
        "start_y": y(start.expected, start.total),
        "best_x": x(best.iteration),
        "written_x": x(written.iteration) if written is not None else None,
        "ticks": [{"x": x(it.iteration), "label": it.iteration} for it in run.iterations],
        "levels": [{"y": y(v * total / 4, total), "label": f"{v * 25}%"} for v in range(5)],
    }
