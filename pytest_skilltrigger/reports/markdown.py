"""A Markdown summary per skill, for ``$GITHUB_STEP_SUMMARY`` in GitHub Actions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.context import one_line
from pytest_skilltrigger.model.formatting import (
    describe_chosen,
    format_interval,
    format_ratio,
    rate_text,
)
from pytest_skilltrigger.model.prices import format_usd
from pytest_skilltrigger.reports.routing_table import choice_label

if TYPE_CHECKING:
    from pytest_skilltrigger.reports.routing_table import RoutingTable
    from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport


def _cell(text: Any) -> str:
    """Table-safe text: no line breaks, pipes escaped, HTML-significant characters escaped."""
    value = one_line(str(text))
    for char, repl in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        value = value.replace(char, repl)
    return value


def render_markdown(report: SessionReport, min_accuracy: float | None = None) -> str:
    """One section per skill: the share of queries passed (what the gate compares), run
    accuracy, precision, recall, cost and the failing queries; then each folder's routing."""
    lines = ["## Skill trigger results", "", *_skills_table(report)]
    if min_accuracy is not None:
        lines += [
            "",
            f"Required share of queries passed per skill (--trigger-min-accuracy): "
            f"{min_accuracy:g}",
        ]
    for table in report.routing:
        lines += _routing_section(table, report.table_label(table))
    for skill in report.skills:
        lines += _failing_queries(skill)
    return "\n".join(lines) + "\n"


def _skills_table(report: SessionReport) -> list[str]:
    if not report.skills:
        return []
    lines = [
        "| skill | passed | failed | borderline | errors | queries passed | interval | "
        "run accuracy | precision | recall | cost |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for skill in report.skills:
        s = skill.summary
        cost = format_usd(s.cost_usd) if s.priced else "n/a"
        interval = "n/a"
        if s.query_pass_interval is not None:
            interval = format_interval(s.query_pass_interval, s.confidence)
        lines.append(
            f"| {_cell(skill.label)} | {s.passed} | {s.failed} | {s.borderline} | {s.errors} | "
            f"{format_ratio(s.query_pass_rate)} | {interval} | "
            f"{rate_text(s.accuracy, s.accuracy_interval)} | "
            f"{rate_text(s.precision, s.precision_interval)} | "
            f"{rate_text(s.recall, s.recall_interval)} | {cost} |"
        )
    return lines


def _routing_section(table: RoutingTable, folder: str) -> list[str]:
    """A folder's routing accuracy, its table, its clashes and its failing routing items."""
    lines = ["", f"### Routing in {_cell(folder)}", ""]
    passed, counted = table.counted
    if table.accuracy is not None:
        lines += [
            f"Routing accuracy {format_ratio(table.accuracy)}: {passed}/{counted} of "
            "routing items and should-trigger queries passed "
            f"({format_interval(table.interval, table.confidence)}).",
            "",
        ]
    columns = table.columns()
    lines.append(
        "| queries of | kind | "
        + " | ".join(_cell(choice_label(c, table.project_skills)) for c in columns)
        + " | errors |"
    )
    lines.append("|---|---|" + "---|" * (len(columns) + 1))
    for row in table.rows:
        kind = "should trigger" if row.should_trigger else "should not"
        cells = " | ".join(str(row.chosen.get(c, 0)) for c in columns)
        lines.append(f"| {_cell(row.skill)} | {kind} | {cells} | {row.errors} |")
    lines += [f"- {_cell(clash.line())}" for clash in table.clashes]
    failing = [i for i in table.items if i.passed is not True]
    if failing:
        lines += ["", "| routing query | expected | chosen |", "|---|---|---|"]
        for item in failing:
            expected = item.entry.expected_skill or "no skill of the folder"
            result = item.result
            chosen = "error" if result.errors else describe_chosen(dict(result.chosen))
            lines.append(f"| {_cell(item.entry.query)} | {_cell(expected)} | {_cell(chosen)} |")
    return lines


def _failing_queries(skill: SkillReport) -> list[str]:
    failing = [r for r in skill.results.results() if r.passed is not True]
    if not failing:
        return []
    lines = ["", f"### {_cell(skill.label)}: failing queries", ""]
    lines += [
        "| query | expected | triggers/runs | rate, interval | chosen |",
        "|---|---|---|---|---|",
    ]
    for r in failing:
        expected = "trigger" if r.should_trigger else "no trigger"
        observed = f"error: {r.error}" if r.error else f"{r.triggers}/{r.runs_made}"
        if r.borderline:
            observed += " (borderline)"
        rate = f"{format_ratio(r.trigger_rate)}, {format_interval(r.interval)}"
        chosen = describe_chosen(dict(r.chosen))
        lines.append(
            f"| {_cell(r.query)} | {expected} | {_cell(observed)} | {rate} | {_cell(chosen)} |"
        )
    return lines
