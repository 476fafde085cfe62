"""The session's CI gates, read from the typed report: one line per failure, naming the
number the gate compares and the option that set the floor."""

from __future__ import annotations

from pytest_skilltrigger.model.formatting import format_interval
from pytest_skilltrigger.reports.session_report import SessionReport


def gate_failures(
    report: SessionReport,
    min_accuracy: float | None = None,
    min_routing_accuracy: float | None = None,
) -> list[str]:
    """Each skill whose share of queries passed is below ``min_accuracy``, and each folder
    whose routing accuracy (routing items and should-trigger queries) is below
    ``min_routing_accuracy``. A skill or folder with nothing decided fails no gate."""
    failures = []
    if min_accuracy is not None:
        for skill in report.skills:
            s = skill.summary
            rate = s.query_pass_rate
            if rate is not None and rate < min_accuracy:
                interval = ""
                if s.query_pass_interval is not None:
                    interval = f", {format_interval(s.query_pass_interval, s.confidence)}"
                failures.append(
                    f"{skill.label}: queries passed {rate:.4g} ({s.passed}/{s.counted}{interval})"
                    f" is below --trigger-min-accuracy {min_accuracy:g}"
                )
    if min_routing_accuracy is not None:
        for table in report.routing:
            rate = table.rounded_accuracy
            if rate is not None and rate < min_routing_accuracy:
                passed, decided = table.counted
                folder = report.table_label(table)
                failures.append(
                    f"routing in {folder}: {rate:.4g} of routing items and "
                    f"should-trigger queries passed ({passed}/{decided}), "
                    f"below --trigger-min-routing-accuracy {min_routing_accuracy:g}"
                )
    return failures
