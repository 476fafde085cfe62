"""The HTML pages, rendered from the typed results with the package's Jinja2 templates.

Why templates: the layout lives in ``templates/`` and can change without touching Python; Jinja2
(installed with pytest-html) escapes every value by default, and everything on these pages is
untrusted text (queries come from eval files anyone can contribute to, descriptions are
written by a model). Each page is self-contained: inline CSS, no scripts, nothing fetched, so
it works offline. This module only turns the typed results into what the templates show.

Three pages and two fragments: a plain run's results (:func:`render_results_page`), the
improvement rounds' (:mod:`.rounds_view`), a folder's routing table under
pytest-html's summary (:func:`render_routing_section`) and a trigger item's expanded row on
pytest-html's page (:func:`render_extra`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.formatting import (
    describe_chosen,
    display_path,
    format_interval,
    format_ratio,
    rate_text,
)
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.prices import format_usd
from pytest_skilltrigger.reports.analysis import disagreements
from pytest_skilltrigger.reports.crowd_chart import crowd_chart
from pytest_skilltrigger.reports.crowd_curve import crowd_curves
from pytest_skilltrigger.reports.routing_table import RoutingTable, choice_label
from pytest_skilltrigger.skills.drafted_set import REVIEW

if TYPE_CHECKING:
    import jinja2

    from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """The templates shipped in the package, autoescaped, undefined names an error."""
    # deferred: jinja2, only when a page is rendered
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_skilltrigger.reports", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render(template: str, **values: Any) -> str:
    """One template of the package, rendered."""
    return _environment().get_template(template).render(**values)


@dataclass(frozen=True)
class Cell:
    """One query's outcome as a cell shows it: a mark, the rate, triggers/runs, and in its
    tooltip what was chosen and why there is no verdict."""

    kind: str  # pass, fail, borderline, error, skipped, none
    mark: str
    label: str
    rate: str
    triggers: int
    runs: int
    detail: str | None
    tooltip: str
    # the rate and its interval drawn as a bar, in percent of 0..1, and the threshold's tick
    bar: tuple[float, float, float, float] | None = None
    interval: str = ""


# a result's status (QueryResult.status): its mark in a cell, and its label
MARKS = {
    "skipped": ("–", "skipped"),
    "error": ("!", "error"),
    "borderline": ("≈", "borderline"),
    "pass": ("✓", "pass"),
    "fail": ("✗", "fail"),
    "none": ("?", "no verdict"),
}


def cell_of(result: QueryResult | None) -> Cell | None:
    """A result's cell (None: the query did not run). A skip or an error comes before the
    verdict, as neither is a miss."""
    if result is None:
        return None
    kind = result.status
    mark, label = MARKS[kind]
    detail = {
        "skipped": f"skipped: {result.skipped}",
        "error": f"errors: {result.errors}; {result.error or 'unknown error'}",
        "borderline": "sampled to the end without settling: chance decides this request",
    }.get(kind)
    rate = format_ratio(round(result.trigger_rate, 4), "—")
    interval = format_interval(result.interval, result.rule.confidence)
    tip = [label, f"trigger rate {rate} ({result.triggers}/{result.runs_made} runs), {interval}"]
    tip.append(f"chose: {describe_chosen(dict(result.chosen))}")
    if detail:
        tip.append(detail)
    bar = None
    if result.runs_made:
        low, high = result.interval
        bar = (
            round(low * 100, 1),
            round(max(high - low, 0.01) * 100, 1),
            round(result.trigger_rate * 100, 1),
            round(result.threshold * 100, 1),
        )
    return Cell(
        kind,
        mark,
        label,
        rate,
        result.triggers,
        result.runs_made,
        detail,
        "\n".join(tip),
        bar,
        format_interval(result.interval) if result.runs_made else "",
    )


# -- routing ---------------------------------------------------------------------------------
def routing_view(table: RoutingTable, folder: str | None = None) -> dict[str, Any]:
    """A folder's table as the templates show it: headed by what was chosen (``other skill
    X`` for a skill not of the folder), one row per skill and kind, the clashes below."""
    columns = table.columns()
    return {
        "folder": folder or table.folder,
        "headings": [choice_label(c, table.project_skills) for c in columns],
        "rows": [
            {
                "skill": row.skill,
                "kind": "should trigger" if row.should_trigger else "should not",
                "counts": [row.chosen.get(c, 0) for c in columns],
                "errors": row.errors,
            }
            for row in table.rows
        ],
        "clashes": [clash.line() for clash in table.clashes],
    }


def render_routing_section(table: RoutingTable, folder: str | None = None) -> str:
    """A folder's routing table as an HTML fragment (under pytest-html's summary); ``folder``
    is the folder as shown (relative to where pytest started)."""
    return render("routing_section.html.j2", table=routing_view(table, folder))


# -- a plain run's page ----------------------------------------------------------------------
def render_results_page(report: SessionReport, title: str = "Skill trigger results") -> str:
    """The page of a plain run (``--trigger-report`` without ``--trigger-optimize``)."""
    meta = [
        ("Backend", report.backend or "—"),
        ("Model", report.model or "—"),
        ("Verdicts", report.rule_text),
        ("Threshold", report.threshold),
    ]
    if report.spending:  # every call of the session, the fixture's checks included
        total = report.total()
        meta.append(("Session", f"{total.calls} calls, cost {format_usd(total.cost_usd)}"))
    page = {
        "meta": meta,
        "skills": [_results_skill(skill, report.base) for skill in report.skills],
        "empty": not report.has_results,
        "routing": [routing_view(t, report.table_label(t)) for t in report.routing],
        "matrix": _matrix_view(report),
        "crowds": [crowd_chart(curve) for curve in crowd_curves(report.skills)],
    }
    return render("results.html.j2", title=title, refresh=False, page=page)


def _matrix_view(report: SessionReport) -> dict[str, Any] | None:
    """A model matrix's side-by-side table: one row per query the models disagree on, one
    column per model (None without a matrix)."""
    models = list(dict.fromkeys(s.model for s in report.skills if s.model))
    if len(models) < 2:
        return None
    rows = []
    for d in disagreements(report.skills):
        by_model = dict(d.by_model)
        cells = [rate_cell(by_model[m]) if m in by_model else "—" for m in models]
        rows.append(
            {"skill": d.skill, "query": d.query, "should_trigger": d.should_trigger, "cells": cells}
        )
    return {"models": models, "rows": rows}


def _results_skill(skill: SkillReport, base: str | None = None) -> dict[str, Any]:
    """One skill: what Claude Code lists for it, its summary, and its queries (failing
    first, each group in eval-file order); a drafted set headed by its warning, its queries
    by kind."""
    target, s = skill.target, skill.summary
    skipped = f", {s.skipped} skipped" if s.skipped else ""
    borderline = f" ({s.borderline} borderline)" if s.borderline else ""
    interval = ""
    if s.query_pass_interval is not None:
        interval = f", {format_interval(s.query_pass_interval, s.confidence)}"
    u = s.usage
    listed = skill.listed_line
    meta = [
        ("Path", display_path(target.skill.path, base)),
        ("Listed as", listed or f"not listed: {target.skill.unlisted_reason}"),
        *([("Listing budget", skill.listing_warning)] if skill.listing_warning else []),
        (
            "Queries passed",
            f"{s.passed}/{s.counted} ({format_ratio(s.query_pass_rate)})"
            f"{interval}; {s.failed} failed{borderline}, {s.errors} "
            f"errors{skipped}",
        ),
        ("Precision", rate_text(s.precision, s.precision_interval)),
        ("Recall", rate_text(s.recall, s.recall_interval)),
        ("Run accuracy", rate_text(s.accuracy, s.accuracy_interval)),
        (
            "Calls",
            f"{s.calls} (tokens in {u.input_tokens:,}, out {u.output_tokens:,}, "
            f"cache write {u.cache_creation_input_tokens:,}, "
            f"read {u.cache_read_input_tokens:,})",
        ),
        ("Cost", format_usd(s.cost_usd) if s.priced else "n/a (no model priced)"),
    ]
    extras = {e.index: e.extra for e in target.eval_set.entries}
    rows = [_result_row(i, r, extras.get(i) or {}) for i, r in sorted(skill.results.rows.items())]
    rows.sort(key=lambda row: not row["failing"])
    drafted = sorted((row for row in rows if row["drafted"]), key=lambda r: r["number"])
    kinds = []
    for kind, should in (("should trigger", True), ("should not trigger", False)):
        group = [r for r in drafted if r["should_trigger"] == should]
        if group:
            kinds.append((kind, group))
    return {
        "name": skill.label,
        "meta": meta,
        "listed": bool(listed),
        "rows": rows,
        "drafted": kinds,
        "review": REVIEW,
    }


def _result_row(index: int, result: QueryResult, extra: dict[str, Any]) -> dict[str, Any]:
    cell = cell_of(result)
    assert cell is not None
    detail = f"not listed: {result.unlisted}" if result.unlisted else cell.detail
    return {
        "number": index + 1,
        "query": result.query,
        "tip": "\n".join(f"{k}: {v}" for k, v in extra.items()),
        "should_trigger": result.should_trigger,
        "cell": cell,
        "failing": cell.kind != "pass",
        "detail": detail,
        "chosen": describe_chosen(dict(result.chosen)),
        "drafted": bool(extra.get("drafted")),
    }


# -- pytest-html's expanded row --------------------------------------------------------------
def render_extra(rows: Sequence[tuple[str, Any]], data: str = "") -> str:
    """A small table of (label, value) rows for a trigger item's expanded row, and ``data``
    (the row as JSON text) folded below it."""
    return render("pytest_html_extra.html.j2", rows=rows, data=data).strip()


def rate_cell(result: QueryResult) -> str:
    """A model's cell in the side-by-side table: ``fail 0.00 (0/4, 95% interval 0.00–0.49)``."""
    rate = format_ratio(result.trigger_rate)
    interval = format_interval(result.interval, result.rule.confidence)
    return f"{result.status} {rate} ({result.triggers}/{result.runs_made}, {interval})"
