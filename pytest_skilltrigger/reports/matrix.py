"""A model matrix side by side: the queries whose verdicts differ between models.

Why only the disagreements: the per-model summaries already say how each model does; what
an author shipping one description to users of every model needs is where it works on one
model and not on another (a query that passes on the default model and fails on a small
one), each with its rate on every model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.model.formatting import format_interval, format_ratio
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.reports.session_report import SkillReport


@dataclass(frozen=True)
class Disagreement:
    """One query of one skill whose verdict differs between the models."""

    skill: str
    query: str
    should_trigger: bool
    by_model: tuple[tuple[str, QueryResult], ...]  # in the matrix's order

    def line(self) -> str:
        """``pdf: 'merge these' (should trigger): claude-opus-5-5 pass 4/4 (95% interval
        0.51–1.00), ... fail 0/4 (...)``."""
        kind = "should trigger" if self.should_trigger else "should not trigger"
        cells = ", ".join(
            f"{model} {r.status} {r.triggers}/{r.runs} "
            f"({format_interval(r.interval, r.rule.confidence)})"
            for model, r in self.by_model
        )
        return f"{self.skill}: {self.query!r} ({kind}): {cells}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "query": self.query,
            "should_trigger": self.should_trigger,
            "by_model": {
                model: {
                    "pass": r.passed,
                    "verdict": r.status,
                    "triggers": r.triggers,
                    "runs": r.runs,
                    "trigger_rate": round(r.trigger_rate, 4),
                    "interval": [round(x, 4) for x in r.interval],
                }
                for model, r in self.by_model
            },
        }


def disagreements(skills: Sequence[SkillReport]) -> list[Disagreement]:
    """Every query of every skill whose verdict is not the same on all the models it ran on
    (skills in report order, queries in eval-file order)."""
    by_target: dict[str, list[SkillReport]] = {}
    for skill in skills:
        if skill.model:
            by_target.setdefault(skill.target.skill.skill_md, []).append(skill)
    found = []
    for group in by_target.values():
        if len(group) < 2:
            continue
        indices = sorted({i for s in group for i in s.results.rows})
        for index in indices:
            cells = [
                (s.model or "", s.results.rows[index]) for s in group if index in s.results.rows
            ]
            if len(cells) > 1 and len({r.status for _, r in cells}) > 1:
                first = cells[0][1]
                found.append(
                    Disagreement(group[0].name, first.query, first.should_trigger, tuple(cells))
                )
    return found


def rate_cell(result: QueryResult) -> str:
    """A model's cell in the side-by-side table: ``fail 0.00 (0/4, 95% interval 0.00–0.49)``."""
    rate = format_ratio(result.trigger_rate)
    interval = format_interval(result.interval, result.rule.confidence)
    return f"{result.status} {rate} ({result.triggers}/{result.runs}, {interval})"
