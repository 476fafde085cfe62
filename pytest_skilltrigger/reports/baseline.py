"""Comparing a run with an earlier ``--trigger-json``: what regressed, what improved, and what
is noise.

Queries are matched by skill name and query text, so reordering the eval file does not
matter. A query *regressed* only when its settled verdict changed from pass to fail (and
*improved* the other way): a change that involves a borderline query, an error or a skip is
within the noise of the runs and is said to be so, never called a regression. A *skill*
regressed only when a paired exact test on its queries that changed (McNemar's exact test,
the one-sided sign test on the regressed and improved queries) finds more got worse than
chance explains, at the session's confidence: one query out of twenty flipping is not a
regression of the skill. Queries new to the eval set are neither.

A baseline written before verdicts were sequential has no ``decided`` key: its passes and
failures were the reference rule's, and count as settled.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.stats import sign_test
from pytest_skilltrigger.support.errors import InputError

SETTLED = ("pass", "fail")


@dataclass(frozen=True)
class Change:
    skill: str
    query: str
    before: str  # pass, fail, borderline, error or skipped
    after: str


@dataclass(frozen=True)
class SkillChanges:
    """One skill's changed queries and whether they add up to a regression."""

    skill: str
    regressed: list[Change] = field(default_factory=list)
    improved: list[Change] = field(default_factory=list)
    noise: list[Change] = field(default_factory=list)
    p_value: float = 1.0  # the sign test's, for more regressed than improved by chance
    significant: bool = False

    def line(self, confidence: float) -> str:
        """The skill's verdict against the baseline, with the test that gave it."""
        counts = f"{len(self.regressed)} queries worse, {len(self.improved)} better"
        test = f"sign test p = {self.p_value:.3g}"
        if self.significant:
            return (
                f"{self.skill}: regressed against the baseline: {counts} ({test}, "
                f"below {1 - confidence:.2g})"
            )
        return (
            f"{self.skill}: {counts} against the baseline ({test}): not a regression at "
            f"{confidence:.0%}, within the noise of the runs"
        )


@dataclass(frozen=True)
class Comparison:
    """Every skill's changes against the baseline, at a confidence."""

    confidence: float
    skills: list[SkillChanges] = field(default_factory=list)

    @property
    def regressions(self) -> list[Change]:
        return [c for s in self.skills for c in s.regressed]

    @property
    def improvements(self) -> list[Change]:
        return [c for s in self.skills for c in s.improved]

    @property
    def noise(self) -> list[Change]:
        return [c for s in self.skills for c in s.noise]

    @property
    def regressed_skills(self) -> list[SkillChanges]:
        return [s for s in self.skills if s.significant]


def _status(row: dict[str, Any]) -> str:
    if row.get("skipped"):
        return "skipped"
    if row.get("borderline"):
        return "borderline"
    verdict = row.get("pass")
    if verdict is True:
        return "pass"
    if verdict is False:
        return "fail" if row.get("decided", True) else "borderline"
    return "error"


def _statuses(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    """Each query's status by (skill, query); in a model matrix the skill is named with its
    model (``pdf on claude-haiku-4-5``): a model is compared with itself only."""
    out = {}
    for skill in report.get("skills", []):
        name = str(skill.get("skill_name", ""))
        if skill.get("model"):
            name = f"{name} on {skill['model']}"
        for row in skill.get("results", []):
            out[(name, row.get("query", ""))] = _status(row)
    return out


def load_baseline(path: str) -> dict[str, Any]:
    """Read an earlier JSON report; InputError when it is not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read baseline: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(path, f"baseline is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        raise InputError(path, "baseline is not a --trigger-json report (no 'skills' list)")
    return data


def compare(
    baseline: dict[str, Any], current: dict[str, Any], confidence: float = 0.95
) -> Comparison:
    """What changed in ``current`` against ``baseline``, query by query and skill by skill."""
    before = _statuses(baseline)
    changes: dict[str, dict[str, list[Change]]] = {}
    for key, after in _statuses(current).items():
        old = before.get(key)
        if old is None or old == after:
            continue
        change = Change(key[0], key[1], old, after)
        kinds = changes.setdefault(key[0], {"regressed": [], "improved": [], "noise": []})
        if old in SETTLED and after in SETTLED:
            kinds["regressed" if old == "pass" else "improved"].append(change)
        else:
            kinds["noise"].append(change)
    skills = []
    for skill, kinds in changes.items():
        p = sign_test(len(kinds["regressed"]), len(kinds["improved"]))
        skills.append(
            SkillChanges(
                skill, kinds["regressed"], kinds["improved"], kinds["noise"], p, p <= 1 - confidence
            )
        )
    return Comparison(confidence, skills)
