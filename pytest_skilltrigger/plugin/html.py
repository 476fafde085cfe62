"""pytest-html integration: trigger-rate columns and a per-test "what the model chose" extra.

Why a class registered only when pytest-html is loaded: its ``pytest_html_*`` hooks are
unknown to pytest otherwise (an unknown hook name on a registered plugin is an error), and
``pytest_html.extras`` is only importable then.

Why the values are taken from the report and not the item: pytest-html builds its rows on the
controller, from reports that may come from an xdist worker; only what ``PluginRuntime.make_report``
put on the report (plain values) crosses over. The cells are raw HTML strings and extras of
type html are inserted as markup by pytest-html's page script, so every value is escaped.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import pytest

from pytest_skilltrigger.engine.outcome import format_chosen
from pytest_skilltrigger.reports.html_report import escape_html
from pytest_skilltrigger.reports.summary import format_ratio

__all__ = ["PytestHtmlHooks", "add_extras", "trigger_properties"]

PROPERTY_KEYS = ("trigger_rate", "triggers", "runs", "chosen")


def trigger_properties(report: Any) -> dict[str, Any]:
    """The plugin's entries of ``report.user_properties`` as a dict (empty for other tests).

    Entries are tuples in-process but lists after an xdist round trip: accept both.
    """
    found: dict[str, Any] = {}
    for entry in getattr(report, "user_properties", None) or []:
        if isinstance(entry, (tuple, list)) and len(entry) == 2 and entry[0] in PROPERTY_KEYS:
            found[entry[0]] = entry[1]
    return found


def _chosen(value: Any) -> dict[str, Any]:
    """The ``chosen`` property: JSON text (a dict from reports of older versions)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _extra_payload(report: Any) -> dict[str, Any] | None:
    """What the extras describe, from ``report.skilltrigger``; None for other tests."""
    record = getattr(report, "skilltrigger", None)
    if not isinstance(record, dict):
        return None
    result = record.get("result") or {}
    props = trigger_properties(report)
    outcomes = result.get("outcomes") or []
    errors = [
        o.get("error") for o in outcomes if isinstance(o, dict) and o.get("status") == "error"
    ]
    return {
        "skill": record.get("skill_name"),
        "query": result.get("query"),
        "should_trigger": result.get("should_trigger"),
        "trigger_rate": props.get("trigger_rate"),
        "triggers": props.get("triggers"),
        "runs": props.get("runs"),
        "threshold": result.get("threshold"),
        "chosen": _chosen(props.get("chosen")),
        "errors": [e or "unknown error" for e in errors],
        "skipped": result.get("skipped"),
        "extra": record.get("extra") or {},
    }


def _extra_html(payload: dict[str, Any]) -> str:
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
            f"threshold {payload['threshold']})",
        ),
        ("Model chose", format_chosen(payload["chosen"])),
    ]
    if payload["errors"]:
        rows.append(("Errors", "; ".join(str(e) for e in payload["errors"])))
    if payload["skipped"]:
        rows.append(("Skipped", payload["skipped"]))
    for key, value in (payload["extra"] or {}).items():
        rows.append((f"extra: {key}", value))
    body = "".join(f"<tr><th>{escape_html(k)}</th><td>{escape_html(v)}</td></tr>" for k, v in rows)
    return f'<table class="skilltrigger-extra">{body}</table>'


def add_extras(report: Any) -> None:
    """Append the trigger extras (an HTML table and a JSON link) to ``report.extras``.

    Appends rather than replaces so extras from the user's own hooks or the ``extras`` fixture
    are kept. Does nothing for reports without the plugin's record.
    """
    payload = _extra_payload(report)
    if payload is None:
        return
    from pytest_html import extras

    current = list(getattr(report, "extras", None) or [])
    current.append(extras.html(_extra_html(payload)))
    current.append(extras.json(payload, name="skilltrigger"))
    report.extras = current


class PytestHtmlHooks:
    """Hooks for pytest-html; register only when ``config.pluginmanager.hasplugin("html")``."""

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(2, '<th class="sortable" data-column-type="triggerRate">Trigger rate</th>')
        cells.insert(3, "<th>Triggers/runs</th>")

    def pytest_html_results_table_row(self, report: Any, cells: list[str]) -> None:
        props = trigger_properties(report)
        rate_text = format_ratio(props.get("trigger_rate"), "")
        runs_text = (
            f"{props['triggers']}/{props['runs']}"
            if "triggers" in props and "runs" in props
            else ""
        )
        cells.insert(2, f'<td class="col-triggerRate">{escape_html(rate_text)}</td>')
        cells.insert(3, f'<td class="col-triggerRuns">{escape_html(runs_text)}</td>')

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        # Registered after plugin.py, so this wrapper is outside the plugin's own: the
        # runtime has put its values on the report by the time this runs.
        report = yield
        add_extras(report)
        return report
