"""What the rounds' files show of each skill's frozen rounds: the page (the template is
``rounds.html.j2``) and the results JSON.

Per skill: a header (path, exit reason, the line Claude Code lists, the fresh race that
decided acceptance), a chart of the rounds, the original and best descriptions, one row per
iteration (its candidates, scores with intervals, its race against the best so far), and a
grid of queries by iteration. The grid grows downwards, one row per query, so that it stays
in view at the width of a laptop screen however many queries the set holds.

Everything here formats :class:`~pytest_skilltrigger.optimizer.record.RoundsRecord` values:
the figures were computed once, when each round ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.model.formatting import display_path
from pytest_skilltrigger.optimizer.record import RoundRecord, RoundsRecord
from pytest_skilltrigger.reports.html_pages import cell_of, render
from pytest_skilltrigger.reports.json_report import rounds_document
from pytest_skilltrigger.skills.evalset import EvalEntry

CHART = {"width": 560, "height": 220, "left": 44, "right": 16, "top": 14, "bottom": 34}
TITLE = "Skill trigger report"


@dataclass(frozen=True)
class RoundsOutputs:
    """What the rounds' files hold: the page, and the results JSON's text."""

    page: str
    json_text: str


def rounds_outputs(
    records: Sequence[RoundsRecord],
    *,
    base: str | None = None,
    routing: Sequence[dict[str, Any]] = (),
    title: str = TITLE,
) -> RoundsOutputs:
    """The page (skill folders shown relative to ``base``, where pytest started; under them
    the session's routing tables) and the results JSON of the rounds so far."""
    page = {
        "skills": [skill_view(record, base) for record in records],
        "running": any(record.running for record in records),
        "routing": list(routing),
        "confidence": f"{records[0].confidence if records else 0.95:.0%}",
    }
    html = render("rounds.html.j2", title=title, refresh=page["running"], page=page)
    return RoundsOutputs(html, rounds_document(records))


def skill_view(record: RoundsRecord, base: str | None = None) -> dict[str, Any]:
    """One skill's section of the rounds' page."""
    best = next((r for r in record.rounds if r.iteration == record.best_iteration), None)
    return {
        "name": record.name,
        "anchor": "skill-" + "".join(c if c.isalnum() else "-" for c in record.name),
        "meta": _meta(record, base),
        "original": record.original,
        "best": record.best_description,
        "unchanged": record.best_description == record.original,
        "folder": bool(record.folder_train or record.folder_test),
        "chart": _chart(record),
        "rows": [_row(it, it is best) for it in record.rounds],
        "columns": [it.iteration for it in record.rounds],
        "grid": _grid(record),
    }


def _meta(record: RoundsRecord, base: str | None) -> list[tuple[str, str]]:
    meta = [
        ("Path", display_path(record.skill_path, base)),
        ("Exit reason", record.exit_text),
        ("Queries", record.sizes),
        ("Listed as", record.listed_as),
    ]
    if record.acceptance_text is not None:
        meta.append(("Acceptance", record.acceptance_text))
    if record.interrupted:
        meta.append(("Interrupted", "yes: the run stopped before it finished"))
    return meta


def _row(it: RoundRecord, best: bool) -> dict[str, Any]:
    """One iteration: its description and candidates, scores, race, and the folder's."""
    row: dict[str, Any] = {
        "number": it.iteration,
        "classes": " ".join(x for x in ("best" if best else "", it.status) if x),
        "best": best,
        "status": it.status if it.status != "evaluated" else "",
        "description": it.description,
        "note": it.note,
        "candidates": list(it.candidate_lines),
        "train": it.train_text,
        "test": it.test_text,
        "race": it.race_text,
        "folder_score": None,
    }
    if it.folder is not None:
        row["folder_score"] = f"{it.folder.passed}/{it.folder.total}"
        row["skill_scores"] = [f"{skill} {p}/{t}" for skill, p, t in it.folder.skill_scores]
        row["taken"] = list(it.folder.taken)
    return row


def _grid(record: RoundsRecord) -> list[dict[str, Any]]:
    """One row per query (train, then test; the skill's own, then the folder's), one cell
    per iteration."""
    sides: list[tuple[str, Sequence[EvalEntry], str]] = [
        ("train", record.train_entries, "train"),
        ("test", record.test_entries, "test"),
        ("train", record.folder_train, "cross_train"),
        ("test", record.folder_test, "cross_test"),
    ]
    rows = []
    for split, entries, side in sides:
        results = [getattr(it, side) for it in record.rounds]  # each round's, once a side
        for position, entry in enumerate(entries):
            cells = [cell_of(r[position] if position < len(r) else None) for r in results]
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


def _tip(entry: EvalEntry, split: str) -> str:
    tip = ["should trigger" if entry.should_trigger else "should not trigger", f"set: {split}"]
    tip += [f"{k}: {v}" for k, v in entry.extra.items()]
    return "\n".join(tip)


def _chart(record: RoundsRecord) -> dict[str, Any] | None:
    """The rounds as an inline SVG: each iteration's expected train and test queries right
    with their intervals, the start's level, the best so far ringed, the one written marked."""
    evaluated = [it for it in record.rounds if it.train_score and it.test_score]
    if not evaluated:
        return None
    box = CHART
    first = evaluated[0]
    sides = (len(first.train) + len(first.cross_train), len(first.test) + len(first.cross_test))
    total = max(*sides, 1)
    inner_w = box["width"] - box["left"] - box["right"]
    inner_h = box["height"] - box["top"] - box["bottom"]
    last = max(it.iteration for it in record.rounds)

    def x(n: float) -> float:
        return round(box["left"] + inner_w * (n - 0.5) / max(last, 1), 1)

    def y(value: float, of: int) -> float:
        return round(box["top"] + inner_h * (1 - value / max(of, 1)), 1)

    points = []
    for it in evaluated:
        for side, value, text, offset in (
            ("train", it.train_score, it.train_text, -6),
            ("test", it.test_score, it.test_text, 6),
        ):
            assert value is not None  # evaluated rounds have both
            low, high = value.interval
            points.append(
                {
                    "side": side,
                    "x": x(it.iteration) + offset,
                    "y": y(value.expected, value.total),
                    "low": y(low, value.total),
                    "high": y(high, value.total),
                    "label": f"iteration {it.iteration}, {side}: {text}",
                }
            )
    start = first.train_score
    assert start is not None
    best = record.best_iteration or first.iteration
    return {
        **box,
        "points": points,
        "start_y": y(start.expected, start.total),
        "best_x": x(best),
        "written_x": x(best) if record.improved else None,
        "ticks": [{"x": x(it.iteration), "label": it.iteration} for it in record.rounds],
        "levels": [{"y": y(v * total / 4, total), "label": f"{v * 25}%"} for v in range(5)],
    }
