"""The one channel results cross xdist on: plain JSON values out, the same typed records in."""

from __future__ import annotations

import json

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, Usage
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.plugin import wire


class Report:
    """What xdist sends: attributes that survive a JSON round trip."""


def test_records_round_trip_through_json() -> None:
    outcome = RunOutcome(
        "triggered", chosen="skill:pdf", usage=Usage(5, 2, 1, 3), requests=2, model="m", batch=True
    )
    runs = (outcome, RunOutcome("error", error="boom"))
    result = QueryResult(
        "merge", True, FixedRule(3, 0.5), runs, trigger_choices=frozenset({"skill:a"})
    )
    records = [
        wire.ItemRecord("/s/pdf/SKILL.md", 4, "key", "claude-haiku-4-5", result),
        wire.RoutingRecord("/s/routing-eval.json", 1, None, None, result),
        wire.CheckRecord("key", result),
    ]
    sent = Report()
    wire.attach(sent, records)
    received = Report()
    received.skilltrigger = json.loads(json.dumps(sent.skilltrigger))  # type: ignore[attr-defined]
    assert wire.decode(received) == records


def test_reports_of_other_tests_carry_nothing() -> None:
    assert wire.decode(Report()) == []
    other = Report()
    other.skilltrigger = "not ours"  # type: ignore[attr-defined]
    assert wire.decode(other) == []
