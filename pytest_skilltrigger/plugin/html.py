"""pytest-html integration: trigger-rate columns and a per-test "what the model chose" extra
(with the result as JSON text, readable in place, not pytest-html's base64 JSON link).

Why a class registered only when pytest-html writes a report: its ``pytest_html_*`` hooks are
unknown to pytest otherwise (an unknown hook name on a registered plugin is an error), and
``pytest_html.extras`` is only importable then.

Everything here works on the controller, from the typed result the controller decoded when
the item's report arrived (from this process or an xdist worker): nothing extra crosses
xdist. The cells are raw HTML strings and extras of type html are inserted as markup by
pytest-html's page script, so every value is escaped (the expanded row's table by the
package's autoescaping template).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.formatting import (
    describe_chosen,
    display_path,
    escape_html,
    format_interval,
    format_ratio,
)
from pytest_skilltrigger.reports.html_pages import render_extra, render_routing_section
from pytest_skilltrigger.reports.json_report import dumps

if TYPE_CHECKING:
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.reports.routing_table import RoutingTable
    from pytest_skilltrigger.skills.catalog import Target

Lookup = Callable[[str], "tuple[Target, QueryResult] | None"]


def extra_payload(target: Target, index: int, result: QueryResult) -> dict[str, Any]:
    """What the extras describe (also the JSON extra's content): the JSON report's row for
    the query, with the skill, the threshold, each error's text and the entry's own keys
    (``index`` is the entry's position in its eval set)."""
    return {
        **result.summary_row(),
        "skill": target.name,
        "threshold": result.threshold,
        "confidence": result.rule.confidence,
        "chosen": dict(result.chosen),
        "errors": [o.error or "unknown error" for o in result.outcomes if o.status == "error"],
        "extra": target.eval_set.entries[index].extra,
    }


def _verdict(payload: dict[str, Any]) -> str:
    if payload["borderline"]:
        return "borderline: sampled to the end without settling; chance decides this request"
    if payload["decided"]:
        return "settled" if payload["pass"] is not None else "no verdict"
    return "no verdict"


def extra_html(payload: dict[str, Any]) -> str:
    """A small escaped table for the expanded row of a test in the pytest-html page."""
    expected = "should trigger" if payload["should_trigger"] else "should not trigger"
    rate_text = format_ratio(payload["trigger_rate"], "—")
    rows = [
        ("Skill", payload["skill"]),
        ("Query", payload["query"]),
        ("Expected", expected),
        (
            "Trigger rate",
            f"{rate_text} ({payload['triggers']}/{payload['runs']} runs, "
            f"threshold {payload['threshold']}), "
            f"{format_interval(payload['interval'], payload['confidence'])}",
        ),
        ("Verdict", _verdict(payload)),
        ("Model chose", describe_chosen(payload["chosen"])),
    ]
    if payload["errors"]:
        rows.append(("Errors", "; ".join(str(e) for e in payload["errors"])))
    if payload["skipped"]:
        rows.append(("Skipped", payload["skipped"]))
    for key, value in payload["extra"].items():
        rows.append((f"extra: {key}", value))

    return render_extra(rows, dumps(payload))


class HtmlColumns:
    """Hooks for pytest-html; ``lookup`` gives the typed result of a trigger item by node id,
    ``routing`` the routing tables of the session's report (once it is built)."""

    def __init__(
        self,
        lookup: Lookup,
        routing: Callable[[], Sequence[RoutingTable]] = list,
        base: str | None = None,
    ) -> None:
        self.lookup = lookup
        self.routing = routing
        self.base = base  # where pytest started: folders are shown relative to it

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: Any
    ) -> None:
        """The routing tables under the summary (the report is built by then: the
        controller's sessionfinish runs before pytest-html's)."""

        postfix.extend(
            render_routing_section(
                table,
                display_path(table.folder, self.base)
                + (f" on {table.model}" if table.model else ""),
            )
            for table in self.routing()
        )

    def add_extras(self, report: Any, target: Target, index: int, result: QueryResult) -> None:
        """Append the trigger extra (an HTML table, with its JSON folded below) to
        ``report.extras``.

        Appends rather than replaces so extras from the user's own hooks or the ``extras``
        fixture are kept.
        """
        # optional: pytest-html, importable only when installed
        from pytest_html import extras

        payload = extra_payload(target, index, result)
        current = list(getattr(report, "extras", None) or [])
        current.append(extras.html(extra_html(payload)))
        report.extras = current

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(2, '<th class="sortable" data-column-type="triggerRate">Trigger rate</th>')
        cells.insert(3, "<th>Triggers/runs</th>")
        cells.insert(4, "<th>Interval</th>")

    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        found = self.lookup(report.nodeid)
        rate_text = runs_text = interval_text = ""
        if found is not None:
            result = found[1]
            rate_text = format_ratio(round(result.trigger_rate, 4), "")
            runs_text = f"{result.triggers}/{result.runs_made}"
            interval_text = format_interval(result.interval)
            if result.borderline:
                interval_text += " borderline"
        cells.insert(2, f'<td class="col-triggerRate">{escape_html(rate_text)}</td>')
        cells.insert(3, f'<td class="col-triggerRuns">{escape_html(runs_text)}</td>')
        cells.insert(4, f'<td class="col-triggerInterval">{escape_html(interval_text)}</td>')
