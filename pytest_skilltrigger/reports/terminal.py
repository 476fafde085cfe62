"""The terminal summary: one line per skill with verdict counts, quality numbers and cost,
each folder's routing, and the session's total."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_skilltrigger.model.formatting import format_ratio
from pytest_skilltrigger.model.prices import Spend, format_usd
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.reports.routing_table import RoutingTable
from pytest_skilltrigger.reports.session_report import SessionReport
from pytest_skilltrigger.reports.summary import Summary

MAX_CLASHES = 5  # the worst clashes per folder in the terminal; the JSON has them all


@dataclass(frozen=True)
class TerminalLine:
    """A line for pytest's terminal: plain, coloured, or a separator with a title."""

    text: str
    style: Literal["", "yellow", "red"] = ""
    separator: bool = False


def header_lines(skills: int, settings: Settings, context_label: str | None) -> list[str]:
    """The report header: what the run will do, before any call."""
    store = settings.active_store or "off"
    lines = [
        f"skilltrigger: {skills} skill(s), {settings.runs_per_query} runs "
        f"per query, threshold {settings.threshold}, backend {settings.backend}, "
        f"store {store}"
    ]
    if context_label:
        lines.append(f"skilltrigger: context {context_label}")
    return lines


def summary_lines(report: SessionReport) -> list[str]:
    """Lines such as ``csv-cleaner: 18 passed, 2 failed, 0 errors | precision 0.90 ...``,
    read from the report already built for the session (nothing is summarised twice)."""
    lines = [f"{skill.name}: {_skill_line(skill.summary)}" for skill in report.skills]
    for table in report.routing:
        lines += routing_lines(table, report.folder_label(table.folder))
    phases = report.by_phase()
    if phases:
        parts = [f"{name} {_calls(spend)}{_cost(spend)}" for name, spend in phases.items()]
        total = report.total()
        lines.append(f"session total: {_calls(total)}{_cost(total)} ({'; '.join(parts)})")
    return lines


def _skill_line(s: Summary) -> str:
    skipped = f", {s.skipped} skipped" if s.skipped else ""
    u = s.usage
    cost = _cost_text(s.cost_usd) if s.priced else ""
    return (
        f"{s.passed} passed, {s.failed} failed, {s.errors} errors{skipped} | queries passed "
        f"{s.passed}/{s.counted} ({format_ratio(s.query_pass_rate)}) | precision "
        f"{format_ratio(s.precision)}, recall {format_ratio(s.recall)}, "
        f"run accuracy {format_ratio(s.accuracy)} | "
        f"{s.calls} calls, tokens in {u.input_tokens:,} out {u.output_tokens:,} "
        f"cache write {u.cache_creation_input_tokens:,} "
        f"read {u.cache_read_input_tokens:,}{cost}"
    )


def routing_lines(table: RoutingTable, folder: str) -> list[str]:
    """A folder's routing items and accuracy (when it has routing items), then its worst
    clashes, one line each; ``folder`` is the folder as shown."""
    lines = []
    if table.accuracy is not None:
        items = ""
        if table.items:
            passed_items = sum(1 for i in table.items if i.passed)
            items = f"routing items {passed_items}/{len(table.items)} passed, "
        passed, counted = table.counted
        lines.append(
            f"routing in {folder}: {items}routing accuracy {format_ratio(table.accuracy)} "
            f"({passed}/{counted} of routing items and should-trigger queries passed)"
        )
    if not table.clashes:
        lines.append(f"routing in {folder}: no skill took another's queries")
    for clash in table.clashes[:MAX_CLASHES]:
        lines.append(f"routing in {folder}: {clash.line()}")
    if len(table.clashes) > MAX_CLASHES:
        lines.append(f"routing in {folder}: ... {len(table.clashes) - MAX_CLASHES} more clashes")
    return lines


def _calls(spend: Spend) -> str:
    """``12 calls``, or ``12 calls (10 in batches)``: batch calls cost half."""
    batch = spend.batch_calls
    return f"{spend.calls} calls" + (f" ({batch} in batches)" if batch else "")


def _cost(spend: Spend) -> str:
    return _cost_text(None if spend.cost_usd is None else round(spend.cost_usd, 6))


def _cost_text(cost: float | None) -> str:
    """``, ~$0.0042``; ``, cost unknown`` for a model missing from the price table."""
    if cost is None:
        return ", cost unknown (model not in the price table)"
    return f", ~{format_usd(cost)}"
