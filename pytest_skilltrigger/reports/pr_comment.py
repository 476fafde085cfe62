"""The pull request's comment (``--trigger-pr-comment``): the run (head) against the
baseline (base), in Markdown a reviewer reads in the PR.

Its first line is :data:`MARKER`, by which a workflow finds the comment to update instead of
adding one per push. Then the gate's verdict and a line of counts; a table of the skills
that changed or fail (queries passed with their intervals, base and head, and the paired
sign test of their flipped queries); the cost; what was not re-run. The flipped queries, the
failing ones and the skills with no change are folded into ``<details>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_skilltrigger.model.context import one_line
from pytest_skilltrigger.model.formatting import counted, format_interval
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.prices import format_usd
from pytest_skilltrigger.reports.analysis import (
    Baseline,
    BaseSkill,
    Change,
    Comparison,
    SkillChanges,
)
from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport
from pytest_skilltrigger.skills.changed import Unchanged

#: the comment's first line: what a workflow looks for to update its one comment
MARKER = "<!-- pytest-skilltrigger -->"
#: rows shown before the rest are folded
SHOWN_ROWS = 15


@dataclass(frozen=True)
class PullRequestRun:
    """What the comment says: the run's report (None: the session stopped before any item),
    the comparison with the baseline, the gate, what was not re-run, and why it stopped."""

    report: SessionReport | None
    comparison: Comparison | None = None
    baseline: Baseline | None = None
    gate_failures: Sequence[str] = ()
    not_rerun: Sequence[Unchanged] = ()
    stopped: str | None = None
    confidence: float = 0.95
    #: whether an accuracy gate decides the run (else each failing query fails it)
    gated: bool = False


def render_pr_comment(run: PullRequestRun) -> str:
    """The comment's Markdown, marker first."""
    lines = [MARKER, f"### Skill triggers: {_verdict(run)}", ""]
    if run.stopped is not None or run.report is None:
        lines += [f"The session stopped before any trigger test ran: {_text(run.stopped)}.", ""]
        return "\n".join(lines)
    report = run.report
    lines += [_counts(run), ""]
    rows = [_Row.of(skill, run) for skill in report.skills]
    # the skills that changed or fail first, then the others while there is room
    shown = [row for row in rows if row.notable][:SHOWN_ROWS]
    shown += [row for row in rows if not row.notable][: SHOWN_ROWS - len(shown)]
    shown.sort(key=rows.index)
    head = _table_head(run.confidence)
    if shown:
        lines += [*head, *(row.cells() for row in shown), ""]
    lines += _gate_lines(run)
    lines.append(_cost_line(report, run.baseline))
    if run.not_rerun:
        names = ", ".join(_text(u.name) for u in run.not_rerun)
        lines += ["", f"Not re-run ({_text(run.not_rerun[0].reason)}): {names}."]
    lines += _folded("Flipped queries", _flip_rows(run), _FLIP_HEAD)
    quiet = [row.cells() for row in rows if row not in shown]
    lines += _folded("Other skills, no change", quiet, head)
    lines += _folded("Failing queries", _failing_rows(report), _FAIL_HEAD)
    return "\n".join(lines).rstrip("\n") + "\n"


def _verdict(run: PullRequestRun) -> str:
    """The headline: stopped, the gate failed, queries errored, or how many failed (with
    an accuracy gate, its verdict)."""
    if run.stopped is not None or run.report is None:
        return "stopped :warning:"
    if run.gate_failures:
        return f"gate failed :x: ({counted(len(run.gate_failures), 'failure')})"
    results = [r for skill in run.report.skills for r in skill.results.results()]
    errored = sum(1 for r in results if r.errors)
    if errored:
        return f"{counted(errored, 'query')} errored :warning: (an error is not a verdict)"
    if run.gated:
        return "gate passed :white_check_mark:"
    failing = sum(1 for r in results if r.passed is not True and not r.skipped)
    if failing:
        return f"{failing} of {counted(len(results), 'query')} failed :x:"
    return f"all {counted(len(results), 'query')} passed :white_check_mark:"


def _counts(run: PullRequestRun) -> str:
    """``10 skills run: 1 regressed, 2 improved, 7 with no significant change (paired sign
    tests at 95%)``."""
    assert run.report is not None
    skills = run.report.skills
    said = counted(len(skills), "skill") + " run"
    comparison = run.comparison
    if comparison is None:
        return f"{said}; no baseline given (--trigger-baseline), so nothing is compared."
    worse = len(comparison.regressed_skills)
    better = len(comparison.improved_skills)
    rest = len(skills) - worse - better
    return (
        f"{said} against the baseline: {worse} regressed, {better} improved, {rest} with no "
        f"significant change (paired sign tests at {comparison.confidence:.0%})."
    )


def _table_head(confidence: float) -> list[str]:
    level = f"{confidence:.0%} interval"
    return [
        f"| skill | base: queries passed ({level}) | head: queries passed ({level}) | change |",
        "|---|---|---|---|",
    ]


_FLIP_HEAD = ["| skill | query | base | head | head runs |", "|---|---|---|---|---|"]
_FAIL_HEAD = ["| skill | query | expected | triggers/runs | interval |", "|---|---|---|---|---|"]


@dataclass(frozen=True)
class _Row:
    """One skill's row: base and head, and what changed."""

    label: str
    base: str
    head: str
    change: str
    notable: bool

    @classmethod
    def of(cls, skill: SkillReport, run: PullRequestRun) -> _Row:
        s = skill.summary
        head = _passed(s.passed, s.counted, s.query_pass_interval)
        base_skill = run.baseline.skills.get(skill.label) if run.baseline else None
        base = _base_cell(base_skill, run.baseline is not None)
        changes = _changes_of(run.comparison, skill.label)
        change, flipped = _change_cell(changes, run.comparison, base_skill is None)
        failing = any(skill.label in line for line in run.gate_failures)
        return cls(skill.label, base, head, change, flipped or failing or base_skill is None)

    def cells(self) -> str:
        return f"| {_text(self.label)} | {self.base} | {self.head} | {self.change} |"


def _passed(passed: int, of: int, interval: tuple[float, float] | None) -> str:
    if not of:
        return "nothing decided"
    shown = f" ({format_interval(interval)})" if interval is not None else ""
    return f"{passed}/{of}{shown}"


def _base_cell(base: BaseSkill | None, have_baseline: bool) -> str:
    if base is None:
        return "new" if have_baseline else "n/a"
    return _passed(base.passed, base.counted, base.interval)


def _changes_of(comparison: Comparison | None, label: str) -> SkillChanges | None:
    if comparison is None:
        return None
    return next((s for s in comparison.skills if s.skill == label), None)


def _change_cell(
    changes: SkillChanges | None, comparison: Comparison | None, new: bool
) -> tuple[str, bool]:
    """The change in words, with its test; whether any query flipped."""
    if comparison is None or new:
        return ("n/a" if comparison is None else "not in the baseline"), False
    if changes is None:
        return "no query changed", False
    counts = f"{len(changes.regressed)} worse, {len(changes.improved)} better"
    noise = f", {len(changes.noise)} within the noise" if changes.noise else ""
    if changes.significant:
        return f"**regressed**: {counts}{noise} (sign test p = {changes.p_value:.3g})", True
    if changes.improved_significantly:
        return f"**improved**: {counts}{noise} (sign test p = {changes.p_better:.3g})", True
    flipped = bool(changes.regressed or changes.improved or changes.noise)
    p = min(changes.p_value, changes.p_better)
    return f"{counts}{noise}: not significant (p = {p:.3g})", flipped


def _gate_lines(run: PullRequestRun) -> list[str]:
    if not run.gate_failures:
        return []
    return ["**Gate failures**", "", *(f"- {_text(line)}" for line in run.gate_failures), ""]


def _cost_line(report: SessionReport, baseline: Baseline | None) -> str:
    total = report.total()
    cost = format_usd(total.cost_usd) if total.cost_usd is not None else "cost unknown"
    line = f"Cost: {cost} for {counted(total.calls, 'call')}"
    if baseline is not None and baseline.cost_usd is not None:
        line += f" (the baseline's run: {format_usd(baseline.cost_usd)})"
    return line + "."


def _flip_rows(run: PullRequestRun) -> list[str]:
    if run.comparison is None or run.report is None:
        return []
    results = _results_by_query(run.report)
    changes: list[Change] = [
        c for s in run.comparison.skills for c in (*s.regressed, *s.improved, *s.noise)
    ]
    rows = []
    for change in changes:
        result = results.get((change.skill, change.query))
        runs = "n/a"
        if result is not None:
            runs = f"{result.triggers}/{result.runs_made} ({format_interval(result.interval)})"
        rows.append(
            f"| {_text(change.skill)} | {_text(change.query)} | {change.before} | "
            f"{change.after} | {runs} |"
        )
    return rows


def _results_by_query(report: SessionReport) -> dict[tuple[str, str], QueryResult]:
    return {
        (skill.label, result.query): result
        for skill in report.skills
        for result in skill.results.results()
    }


def _failing_rows(report: SessionReport) -> list[str]:
    rows = []
    for skill in report.skills:
        for r in skill.results.results():
            if r.passed is True:
                continue
            expected = "trigger" if r.should_trigger else "no trigger"
            observed = f"error: {r.error}" if r.error else f"{r.triggers}/{r.runs_made}"
            rows.append(
                f"| {_text(skill.label)} | {_text(r.query)} | {expected} | {_text(observed)} | "
                f"{format_interval(r.interval)} |"
            )
    return rows


def _folded(title: str, rows: list[str], head: list[str]) -> list[str]:
    if not rows:
        return []
    return [
        "",
        f"<details><summary>{title} ({len(rows)})</summary>",
        "",
        *head,
        *rows,
        "",
        "</details>",
    ]


def _text(value: object) -> str:
    """User-supplied text made safe in a table cell and in the PR's HTML: one line, pipes
    and HTML-significant characters escaped, backticks dropped."""
    text = one_line(str(value)).replace("`", "'")
    for char, repl in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        text = text.replace(char, repl)
    return text
