"""How a skill holds up as the install around it grows (``--trigger-crowd``): recall and
precision against the number of other installed skills, each with its interval, and how the
skill was listed at each size (full, cut, bare).

Computed once from the session's report into frozen points; the terminal, the JSON and the
results page only format them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.formatting import rate_text
from pytest_skilltrigger.model.options import DEFAULT_CONFIDENCE
from pytest_skilltrigger.model.stats import wilson

if TYPE_CHECKING:
    from pytest_skilltrigger.reports.session_report import SkillReport


@dataclass(frozen=True)
class CrowdPoint:
    """One crowd size (0: the skill with its folder's skills alone): the should-trigger
    queries that triggered (recall) and the triggers that were wanted (precision)."""

    crowd: int
    hits: int  # should trigger, and did
    wanted: int  # should trigger, with a verdict
    false_alarms: int  # should not trigger, and did
    listed: str  # full, cut, bare or unlisted
    confidence: float = DEFAULT_CONFIDENCE  # the session's: its intervals' level

    @property
    def recall(self) -> float | None:
        return self.hits / self.wanted if self.wanted else None

    @property
    def precision(self) -> float | None:
        triggered = self.hits + self.false_alarms
        return self.hits / triggered if triggered else None

    def intervals(self) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
        """Recall's and precision's Wilson intervals at the session's confidence (None:
        nothing to measure)."""
        recall = wilson(self.hits, self.wanted, self.confidence) if self.wanted else None
        triggered = self.hits + self.false_alarms
        precision = wilson(self.hits, triggered, self.confidence) if triggered else None
        return recall, precision

    def to_dict(self) -> dict[str, Any]:
        recall, precision = self.intervals()
        return {
            "crowd": self.crowd,
            "recall": _rounded(self.recall),
            "recall_interval": [round(x, 4) for x in recall] if recall else None,
            "precision": _rounded(self.precision),
            "precision_interval": [round(x, 4) for x in precision] if precision else None,
            "listed": self.listed,
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class CrowdCurve:
    """One skill's (on one model) points, by crowd size."""

    skill: str
    model: str | None
    points: tuple[CrowdPoint, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "model": self.model,
            "points": [p.to_dict() for p in self.points],
        }

    def line(self) -> str:
        """The curve in one terminal line."""
        on = f" on {self.model}" if self.model else ""
        parts = [_point_text(p) for p in self.points]
        level = f"; {self.points[0].confidence:.0%} intervals" if self.points else ""
        return f"skilltrigger: {self.skill}{on} in a crowd: " + "; ".join(parts) + level


def crowd_curves(skills: Sequence[SkillReport]) -> list[CrowdCurve]:
    """The curve of every skill (and model) that ran among crowds; none without crowds."""
    groups: dict[tuple[str, str | None, str | None], list[SkillReport]] = {}
    for skill in skills:  # a permission mode of a matrix draws its own curve
        key = (skill.target.skill.skill_md, skill.model, skill.mode)
        groups.setdefault(key, []).append(skill)
    curves = []
    for (_path, model, mode), group in groups.items():
        if all(s.crowd is None for s in group):
            continue
        points = sorted((_point(s) for s in group), key=lambda p: p.crowd)
        name = f"{group[0].name} in {mode} mode" if mode else group[0].name
        curves.append(CrowdCurve(name, model, tuple(points)))
    return curves


def _point(skill: SkillReport) -> CrowdPoint:
    results = [r for r in skill.results.results() if r.passed is not None]
    hits = sum(1 for r in results if r.should_trigger and r.passed)
    wanted = sum(1 for r in results if r.should_trigger)
    # should not trigger, and did (a borderline one is undecided, not an alarm)
    false_alarms = sum(1 for r in results if not r.should_trigger and r.verdict == "triggered")
    confidence = results[0].rule.confidence if results else DEFAULT_CONFIDENCE
    return CrowdPoint(skill.crowd or 0, hits, wanted, false_alarms, skill.listed, confidence)


def _point_text(point: CrowdPoint) -> str:
    recall, precision = point.intervals()
    size = f"{point.crowd} skills" if point.crowd else "alone"
    text = f"{size}: query recall {rate_text(point.recall, recall)}"
    text += f", query precision {rate_text(point.precision, precision)}"
    return text + f" ({point.listed})"


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None
