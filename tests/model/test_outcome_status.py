"""A result's one-word status, which every report shows: a skip or an error is never a miss,
and a skip comes first, as the item reports it."""

from __future__ import annotations

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.verdict import SequentialRule

HIT = RunOutcome("triggered", chosen="skill:pdf")
MISS = RunOutcome("not_triggered", chosen="text")
FAILED = RunOutcome("error", error="HTTP 529 overloaded")


def result(outcomes: list[RunOutcome], should: bool = True, **extra: object) -> QueryResult:
    return QueryResult("q", should, SequentialRule(), tuple(outcomes), **extra)  # type: ignore[arg-type]


def test_each_status_and_their_order() -> None:
    assert result([HIT] * 4).status == "pass"
    assert result([MISS] * 4).status == "fail"
    assert result([MISS] * 4, should=False).status == "pass"
    assert result([HIT, MISS] * 7 + [HIT]).status == "borderline"
    assert result([HIT, FAILED]).status == "error"
    assert result([HIT, FAILED], skipped="budget").status == "skipped"  # a skip first
    assert result([], skipped="budget").status == "skipped"
    assert result([]).status == "none"
    assert result([], unlisted="disable-model-invocation").status == "fail"
    assert result([], should=False, unlisted="disable-model-invocation").status == "pass"
