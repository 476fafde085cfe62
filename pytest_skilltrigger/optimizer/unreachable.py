"""Queries no description reaches: after two rounds or more, the should-trigger queries that
no candidate of any round triggered, and the should-not ones every candidate triggered.

These are the "model-fluent" requests: the model answers them its own way whatever the
description says, so no wording makes them come out right. They are shown apart from the
ordinary failures, so that the author may drop or rephrase them, and the proposer is told not
to chase them (chasing them bends the description away from the requests it can win).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.stats import wilson

FEWEST_ROUNDS = 2  # a query is called unreachable only after this many evaluated rounds


@dataclass(frozen=True)
class Unreachable:
    """One query no round got right: what it expects, and its triggers and runs in each
    round (its rate there has the Wilson interval of those counts)."""

    query: str
    should_trigger: bool
    counts: tuple[tuple[int, int], ...]  # (triggers, runs) a round

    def text(self) -> str:
        side = "should trigger, never did" if self.should_trigger else "should not, always did"
        rounds = ", ".join(f"{triggers}/{runs}" for triggers, runs in self.counts)
        triggers, runs = (sum(c[i] for c in self.counts) for i in (0, 1))
        low, high = wilson(triggers, runs)
        return (
            f"{self.query!r} ({side}: triggered {rounds} a round; over all rounds "
            f"{triggers / runs:.2f}, 95% interval {low:.2f}–{high:.2f})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "should_trigger": self.should_trigger,
            "rounds": [
                {
                    "triggers": triggers,
                    "runs": runs,
                    "rate": round(triggers / runs, 4),
                    "interval": [round(x, 4) for x in wilson(triggers, runs)],
                }
                for triggers, runs in self.counts
            ],
        }


def unreachable(rounds: Sequence[Sequence[QueryResult]]) -> tuple[Unreachable, ...]:
    """The queries each evaluated round (its own queries' results) got wrong the same way:
    never triggered though wanted, or always triggered though not; none before
    :data:`FEWEST_ROUNDS` rounds."""
    if len(rounds) < FEWEST_ROUNDS:
        return ()
    by_query: dict[tuple[str, bool], list[QueryResult]] = {}
    for results in rounds:
        for result in results:
            by_query.setdefault((result.query, result.should_trigger), []).append(result)
    found = []
    for (query, wanted), results in by_query.items():
        measured = [r for r in results if r.runs_made and not r.errors]
        if len(measured) < FEWEST_ROUNDS:
            continue
        if wanted and all(r.triggers == 0 for r in measured):
            found.append(Unreachable(query, True, _counts(measured)))
        elif not wanted and all(r.triggers == r.runs_made for r in measured):
            found.append(Unreachable(query, False, _counts(measured)))
    return tuple(found)


def _counts(results: Sequence[QueryResult]) -> tuple[tuple[int, int], ...]:
    return tuple((r.triggers, r.runs_made) for r in results)
