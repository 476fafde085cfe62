"""Per-skill results and their summary numbers.

Precision, recall and accuracy are computed over all runs, as the reference tool does: a run of
a should-trigger query that triggered is a true positive, and so on. Errored and skipped
queries are counted apart and never enter these numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.engine.cost import cost_usd, price_of
from pytest_skilltrigger.engine.outcome import QueryResult, Usage


def format_ratio(value: Any, missing: str = "n/a") -> str:
    """A rate, precision, recall or accuracy for people: two decimals, or ``missing`` when
    undefined (None, or not a number in a report read back)."""
    return f"{value:.2f}" if isinstance(value, int | float) else missing


def summarize(
    results: Iterable[QueryResult], model: str | None = None, prices: dict | None = None
) -> dict[str, Any]:
    """The summary block of one skill's report."""
    results = list(results)
    tp = fp = fn = tn = 0
    usage = Usage()
    calls = 0
    for r in results:
        usage = usage + r.usage
        calls += r.calls
        if r.passed is None:
            continue
        misses = r.runs - r.triggers
        if r.should_trigger:
            tp, fn = tp + r.triggers, fn + misses
        else:
            fp, tn = fp + r.triggers, tn + misses
    decided = [r for r in results if r.passed is not None]
    total_runs = tp + fp + fn + tn
    summary: dict[str, Any] = {
        "total": len(results),
        "passed": sum(1 for r in decided if r.passed),
        "failed": sum(1 for r in decided if not r.passed),
        "errors": sum(1 for r in results if r.errors and not r.skipped),
        "skipped": sum(1 for r in results if r.skipped),
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
        "accuracy": round((tp + tn) / total_runs, 4) if total_runs else None,
        "calls": calls,
        **usage.to_dict(),
    }
    if model is not None:
        summary["cost_usd"] = round(cost_usd(usage, price_of(model, prices)), 6)
    return summary


@dataclass
class SkillResults:
    """What the controller gathered for one skill, in eval-file order."""

    skill_name: str
    skill_path: str
    description: str
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)

    def results(self) -> list[QueryResult]:
        return [QueryResult.from_dict(self.rows[i]["result"]) for i in sorted(self.rows)]

    def report_rows(self) -> list[dict[str, Any]]:
        rows = []
        for i in sorted(self.rows):
            record = self.rows[i]
            row = QueryResult.from_dict(record["result"]).summary_row()
            if record.get("extra"):
                row["extra"] = record["extra"]
            rows.append(row)
        return rows


class SessionResults:
    """Collects item records (plain dicts, as they arrive from any process) per skill."""

    def __init__(self, order: Iterable[str] = ()) -> None:
        self._order = list(order)
        self.skills: dict[str, SkillResults] = {}

    def add(self, record: dict[str, Any]) -> None:
        key = record["skill_md"]
        skill = self.skills.get(key)
        if skill is None:
            skill = self.skills[key] = SkillResults(
                record["skill_name"], record["skill_path"], record["description"]
            )
        skill.rows[int(record["index"])] = record

    def ordered(self) -> list[SkillResults]:
        """Skills in target order (then any others by path), whatever the arrival order."""
        rank = {k: i for i, k in enumerate(self._order)}
        keys = sorted(self.skills, key=lambda k: (rank.get(k, len(rank)), k))
        return [self.skills[k] for k in keys]
