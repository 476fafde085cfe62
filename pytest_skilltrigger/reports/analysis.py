"""What the session's results say beyond each item: the CI gates, the changes against a
baseline, and where a model matrix's models disagree.

Analysis, not rendering: each function reads the typed report and returns typed findings,
which the renderers (terminal, JSON, Markdown, HTML) show as they are.

Against a baseline (an earlier ``--trigger-json``), queries are matched by skill name and
query text. A query *regressed* only when its settled verdict changed from pass to fail (and
*improved* the other way): a change that involves a borderline query, an error or a skip is
within the noise of the runs, never called a regression. A *skill* regressed only when a
paired exact test on its changed queries (the one-sided sign test on the regressed and
improved ones) finds more got worse than chance explains, at the session's confidence.
A baseline written before verdicts were sequential has no ``decided`` key: its passes and
failures were the reference rule's, and count as settled.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.formatting import counted, format_interval
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.stats import sign_test
from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport
from pytest_skilltrigger.support.errors import InputError

# -- the CI gates -----------------------------------------------------------------------------


def gate_failures(
    report: SessionReport,
    min_accuracy: float | None = None,
    min_routing_accuracy: float | None = None,
) -> list[str]:
    """Each skill whose share of queries passed is below ``min_accuracy``, and each folder
    whose routing accuracy (routing items and should-trigger queries) is below
    ``min_routing_accuracy``. A skill or folder with nothing decided fails no gate."""
    failures = []
    for skill in report.skills:
        limit, named = min_accuracy, "--trigger-min-accuracy"
        evals = skill.target.eval_set
        if limit is None and evals.min_accuracy is not None:
            limit, named = evals.min_accuracy, f"the accuracy target of {evals.path}"
        failure = _below(skill, limit, named)
        if failure:
            failures.append(failure)
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


def _below(skill: SkillReport, limit: float | None, named: str) -> str | None:
    """Why a skill's share of queries passed fails its floor (None: it does not)."""
    s = skill.summary
    rate = s.query_pass_rate
    if limit is None or rate is None or rate >= limit:
        return None
    interval = ""
    if s.query_pass_interval is not None:
        interval = f", {format_interval(s.query_pass_interval, s.confidence)}"
    return (
        f"{skill.label}: queries passed {rate:.4g} ({s.passed}/{s.counted}{interval})"
        f" is below {named} {limit:g}"
    )


# -- against a baseline -------------------------------------------------------------------

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
    p_better: float = 1.0  # the same test the other way: more improved than by chance
    improved_significantly: bool = False

    def line(self, confidence: float) -> str:
        """The skill's verdict against the baseline, with the test that gave it."""
        counts = f"{counted(len(self.regressed), 'query')} worse, {len(self.improved)} better"
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
    # what was compared: the queries both reports hold (of how many skills), the queries only
    # this run has, and those only the baseline has
    compared: int = 0
    compared_skills: int = 0
    only_now: int = 0
    only_before: int = 0
    # the permission modes of the baseline and of this run (None: not known)
    modes: tuple[str, str] | None = None

    @property
    def changed(self) -> bool:
        return any(s.regressed or s.improved or s.noise for s in self.skills)

    def line(self, path: str) -> str:
        """What was read and compared, and whether any verdict changed."""
        text = (
            f"baseline {path}: {self.compared} queries of {self.compared_skills} skill(s) "
            f"compared, {len(self.regressions)} regressed, {len(self.improvements)} improved, "
            f"{len(self.noise)} changed within the noise"
        )
        if not self.changed:
            text = (
                f"baseline {path}: {self.compared} queries of {self.compared_skills} skill(s) "
                "compared, no verdict changed"
            )
        extra = []
        if self.only_now:
            extra.append(f"{self.only_now} new here")
        if self.only_before:
            extra.append(f"{self.only_before} only in the baseline")
        text += f" ({', '.join(extra)}, not compared)" if extra else ""
        if self.modes is not None and self.modes[0] != self.modes[1]:
            before, now = self.modes
            text += (
                f"; the baseline asked in {before} mode, this run in {now} mode: the requests "
                "differ, so a change may be the mode's"
            )
        elif self.modes is not None and self.modes[1] != "default":
            text += f" (both in {self.modes[1]} mode)"
        return text

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

    @property
    def improved_skills(self) -> list[SkillChanges]:
        return [s for s in self.skills if s.improved_significantly]


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


Verdicts = dict[tuple[str, str], str]  # each query's status by (skill, query)


def verdicts_of_json(report: dict[str, Any]) -> Verdicts:
    """Each query's status by (skill, query) in a JSON report (a baseline file); in a model
    matrix the skill is named with its model (``pdf on claude-haiku-4-5``): a model is
    compared with itself only."""
    out = {}
    for skill in report.get("skills", []):
        name = _label_of(skill)
        for row in skill.get("results", []):
            out[(name, str(row.get("query", "")))] = _status(row)
    return out


def verdicts_of(report: SessionReport) -> Verdicts:
    """The same of this session's typed report, named as a baseline names them."""
    return {
        (skill.label, row["query"]): _status(row)
        for skill in report.skills
        for row in skill.results.report_rows()
    }


@dataclass(frozen=True)
class BaseSkill:
    """A skill's share of queries passed in the baseline, with its interval as written."""

    passed: int
    counted: int
    interval: tuple[float, float] | None = None


@dataclass(frozen=True)
class Baseline:
    """An earlier ``--trigger-json`` report: its verdicts by (skill, query), each skill's
    queries passed, what it cost, and which skills competed (a query of one choosing the
    other, either way)."""

    path: str
    verdicts: Verdicts
    permission_mode: str = "default"  # the mode its queries were asked in
    skills: dict[str, BaseSkill] = field(default_factory=dict)
    cost_usd: float | None = None
    neighbours: dict[str, frozenset[str]] = field(default_factory=dict)


def load_baseline(path: str) -> Baseline:
    """Read an earlier JSON report; InputError when it is not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read baseline: {exc.strerror or exc}") from None
    except ValueError as exc:  # UnicodeDecodeError included
        raise InputError(path, f"baseline is not JSON: {exc}") from None
    except RecursionError:
        raise InputError(path, "baseline is not JSON: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        raise InputError(path, "baseline is not a --trigger-json report (no 'skills' list)")
    mode = data.get("permission_mode")
    totals = data.get("totals")
    cost = totals.get("cost_usd") if isinstance(totals, dict) else None
    return Baseline(
        path,
        verdicts_of_json(data),
        mode if isinstance(mode, str) else "default",
        _base_skills(data),
        float(cost) if isinstance(cost, int | float) else None,
        _neighbours(data),
    )


def _label_of(skill: dict[str, Any]) -> str:
    name = str(skill.get("skill_name", ""))
    return f"{name} on {skill['model']}" if skill.get("model") else name


def _base_skills(report: dict[str, Any]) -> dict[str, BaseSkill]:
    """Each skill's queries passed in a JSON report, by its label."""
    found = {}
    for skill in report.get("skills", []):
        summary = skill.get("summary") if isinstance(skill, dict) else None
        if not isinstance(summary, dict):
            continue
        passed, total = summary.get("passed"), summary.get("total")
        skipped = summary.get("skipped") or 0
        if not (isinstance(passed, int) and isinstance(total, int) and isinstance(skipped, int)):
            continue
        interval = summary.get("query_pass_interval")
        pair = None
        if isinstance(interval, list) and len(interval) == 2:
            pair = (float(interval[0]), float(interval[1]))
        found[_label_of(skill)] = BaseSkill(passed, total - skipped, pair)
    return found


def _neighbours(report: dict[str, Any]) -> dict[str, frozenset[str]]:
    """Which skills competed in a JSON report: a query of one that chose the other (by the
    skills' names, a plugin skill's bare name too), both ways."""
    names = {str(s.get("skill_name", "")) for s in report.get("skills", []) if isinstance(s, dict)}
    by_bare = {name.rsplit(":", 1)[-1]: name for name in names}
    pairs: dict[str, set[str]] = {}
    for skill in report.get("skills", []):
        name = str(skill.get("skill_name", "")) if isinstance(skill, dict) else ""
        for row in skill.get("results", []) if name else []:
            chosen = row.get("chosen") if isinstance(row, dict) else None
            for key in chosen if isinstance(chosen, dict) else ():
                kind, _, other = str(key).partition(":")
                other = other if other in names else by_bare.get(other, "")
                if kind == "skill" and other and other != name:
                    pairs.setdefault(name, set()).add(other)
                    pairs.setdefault(other, set()).add(name)
    return {name: frozenset(found) for name, found in pairs.items()}


def compare(before: Verdicts, now: Verdicts, confidence: float = 0.95) -> Comparison:
    """What changed ``now`` against ``before``, query by query and skill by skill."""
    changes: dict[str, dict[str, list[Change]]] = {}
    for key, after in now.items():
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
        worse, better = len(kinds["regressed"]), len(kinds["improved"])
        p, p_better = sign_test(worse, better), sign_test(better, worse)
        alpha = 1 - confidence
        skills.append(
            SkillChanges(
                skill,
                kinds["regressed"],
                kinds["improved"],
                kinds["noise"],
                p,
                p <= alpha,
                p_better,
                p_better <= alpha,
            )
        )
    both = [key for key in now if key in before]
    return Comparison(
        confidence,
        skills,
        compared=len(both),
        compared_skills=len({skill for skill, _query in both}),
        only_now=len(now) - len(both),
        only_before=sum(1 for key in before if key not in now),
    )


# -- a model matrix --------------------------------------------------------------------------


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
            f"{model} {r.status} {r.triggers}/{r.runs_made} "
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
                    "runs": r.runs_made,
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
        if skill.model and skill.results.variant.base:  # a crowd's, a mode's: not a model
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
