"""The terminal summary: one line per skill with verdict counts, quality numbers and cost,
each folder's routing, and the session's total."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pytest_skilltrigger.model.formatting import (
    counted,
    describe_chosen,
    display_path,
    first_few,
    format_interval,
    format_ratio,
    rate_text,
)
from pytest_skilltrigger.model.prices import Spend, format_usd
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.reports.analysis import Comparison, disagreements
from pytest_skilltrigger.reports.crowd_curve import crowd_curves
from pytest_skilltrigger.reports.routing_table import RoutingTable
from pytest_skilltrigger.reports.session_report import RunScope, SessionReport, SkillReport
from pytest_skilltrigger.reports.summary import Summary
from pytest_skilltrigger.skills.drafted_set import REVIEW
from pytest_skilltrigger.skills.harvest_file import HARVESTED

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.controls import ControlResult
    from pytest_skilltrigger.engine.estimate import Estimate
    from pytest_skilltrigger.engine.load_governor import LoadReport
    from pytest_skilltrigger.engine.session import Notice
    from pytest_skilltrigger.model.context import ProjectSetup
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.optimizer.drafting import Draft

MAX_CLASHES = 5  # the worst clashes per folder in the terminal; the JSON has them all
MAX_LISTED_QUERIES = 8  # the queries named per group of a skill's failures; the JSON has all


@dataclass(frozen=True)
class TerminalLine:
    """A line for pytest's terminal: plain, coloured, or a separator with a title."""

    text: str
    style: Literal["", "yellow", "red"] = ""
    separator: bool = False


def header_lines(
    skills: int,
    settings: Settings,
    context_label: str | None,
    estimate: Estimate | None = None,
    drafted: Sequence[Draft] = (),
) -> list[str]:
    """The report header: the eval sets drafted, what the run will do and may cost."""
    store = settings.active_store or "off"
    modes = settings.permission_modes
    mode = f", permission mode {' and '.join(modes)}" if modes and modes != ("default",) else ""
    lines = [
        f"skilltrigger: {skills} skill(s), {settings.rule.describe()}, backend "
        f"{settings.backend}, store {store}{mode}"
    ]
    if context_label:
        lines.append(f"skilltrigger: context {context_label}")
    for draft in drafted:
        positives = sum(e.should_trigger for e in draft.entries)
        new = f"{len(draft.entries)} new queries: " if draft.job.avoid else ""
        left = ""
        if draft.repeats:
            left = f"; {len(draft.repeats)} the set has already left out"
        lines.append(
            f"skilltrigger: drafted {display_path(draft.job.path)} for {draft.job.skill.name} "
            f"({new}{positives} should trigger, {len(draft.entries) - positives} should not"
            f"{left}): {REVIEW}"
        )
        lines += [f"skilltrigger:   the draft {lack}" for lack in _lacks(draft.lacks)]
    if estimate is not None and not (estimate.most_calls or estimate.round_calls):
        lines.append(f"skilltrigger: {estimate.line()}")
    elif estimate is not None:
        cap = "--trigger-budget-usd caps it"
        if settings.budget_usd is not None:
            cap = f"capped at {format_usd(settings.budget_usd)} by --trigger-budget-usd"
        lines.append(f"skilltrigger: {estimate.line()}; {cap}")
    return lines


def _lacks(lacks: Sequence[str], shown: int = 3) -> list[str]:
    """What a kept draft lacks or left out, a few lines and a count."""
    lines = list(lacks[:shown])
    if len(lacks) > shown:
        lines.append(f"left out {len(lacks) - shown} more entries")
    return lines


def load_header_line(load: LoadReport) -> str:
    """What the runs in flight were set to and why, before the first run."""
    if not load.governed:
        return f"skilltrigger: {load.backend}: {load.start} runs in flight ({load.fixed_by})"
    memory = ""
    if load.memory_holds is not None:
        measured = "" if load.process_peak else ", until one is measured"
        memory = (
            f"; memory holds about {load.memory_holds} CLI processes "
            f"({_megabytes(load.per_process)} each{measured})"
        )
    return (
        f"skilltrigger: {load.backend}: runs in flight start at {load.start} (the CPU count) "
        f"and grow while the CPU has room (up to {load.cap}){memory}"
    )


def load_summary_line(load: LoadReport) -> str:
    """How many runs were in flight: on average while any was, the most at once, where the
    limit moved, and the most memory a CLI process held (under xdist, the workers' figures
    added up)."""
    workers = f" over {load.processes} workers" if load.processes > 1 else ""
    line = (
        f"skilltrigger: {load.backend}: {load.average_in_flight:.1f} runs in flight on average"
        f"{workers}, {load.most_in_flight} at most"
    )
    if load.governed and load.lowest_limit != load.highest_limit:
        line += (
            f" (the limit moved between {load.lowest_limit} and {load.highest_limit}, "
            f"{load.final_limit} at the end)"
        )
    elif load.governed:
        line += f" (the limit stayed at {load.final_limit})"
    if load.processes > 1:  # each worker's figures at its own moments: a sum, not a reading
        line += ", each figure the workers' added up"
    if load.process_peak:
        line += f"; a CLI process held at most {_megabytes(load.process_peak)}"
    return line


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.0f} MB"


def summary_lines(report: SessionReport) -> list[str]:
    """Lines such as ``csv-cleaner: 18 passed, 2 failed, 0 errors | precision 0.90 ...``,
    read from the report already built for the session (nothing is summarised twice)."""
    lines = []
    for skill in report.skills:
        lines.append(f"{skill.label}: {_skill_line(skill.summary)}")
        if skill.listing_warning:
            lines.append(f"  warning: {skill.listing_warning}")
        lines += drafted_lines(skill)
        lines += harvested_lines(skill)
        lines += failure_lines(skill)
        lines += unreachable_lines(skill)
    split = disagreements(report.skills)
    if split:
        lines.append(f"the models disagree on {counted(len(split), 'query')}:")
        lines += [f"  {d.line()}" for d in split]
    lines += [curve.line() for curve in crowd_curves(report.skills)]
    if report.lint:
        lines.append(f"the eval sets' lint found {len(report.lint)} problem(s):")
        lines += [
            f"  {display_path(f.path)}{f':{f.line}' if f.line else ''}: {f.message} [{f.rule}]"
            for f in report.lint
        ]
    for table in report.routing:
        lines += routing_lines(table, report.table_label(table))
    if report.permission_mode is not None:
        lines.append(f"every query was asked in {report.permission_mode} mode")
    phases = report.by_phase()
    if phases:
        parts = [f"{name} {_calls(spend)}{_cost(spend)}" for name, spend in phases.items()]
        total = report.total()
        lines.append(f"session total: {_calls(total)}{_cost(total)} ({'; '.join(parts)})")
        if total.waited_seconds >= 0.5 or total.rate_limited:
            lines.append(rate_limit_line(total))
    else:  # said all the same: a rerun served from the store is the cheap case to confirm
        lines.append("session total: 0 calls, $0.00 (no call was made)")
    return lines


def rate_limit_line(total: Spend) -> str:
    """How the rate limits slowed the session: the runs' waits added up, and the 429s met."""
    minutes, seconds = divmod(round(total.waited_seconds), 60)
    waited = f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
    return (
        f"rate limits: runs waited {waited} in all for the limit; "
        f"{total.rate_limited} requests were answered 429"
    )


MARKS = {True: "✓", False: "✗"}


def drafted_lines(skill: SkillReport) -> list[str]:
    """A skill's drafted queries, headed by the warning, by kind, each with its result:
    they were written by a model, and a verdict on them is only as good as they are."""
    drafted = _marked(skill, "drafted")
    return _kind_lines(f"{REVIEW} ({len(drafted)} of {_count(skill)} queries)", drafted)


def harvested_lines(skill: SkillReport) -> list[str]:
    """A skill's queries harvested from the user's own sessions, apart: how the description
    does on what users really typed."""
    harvested = _marked(skill, "harvested")
    passed = sum(1 for r in harvested if r.passed)
    heading = f"{HARVESTED} ({len(harvested)} of {_count(skill)} queries, {passed} passed)"
    return _kind_lines(heading, harvested)


def _marked(skill: SkillReport, mark: str) -> list[QueryResult]:
    entries = {e.index: e for e in skill.target.eval_set.entries}
    return [r for i, r in skill.results.rows.items() if entries[i].extra.get(mark)]


def _count(skill: SkillReport) -> int:
    return len(skill.results.results())


def _kind_lines(heading: str, marked: list[QueryResult]) -> list[str]:
    if not marked:
        return []
    lines = [f"  {heading}"]
    for should, kind in ((True, "should trigger"), (False, "should not trigger")):
        group = [r for r in marked if r.should_trigger == should]
        if group:
            lines.append(f"    {kind}:")
            lines += [f"      {_mark(r)} {r.query!r} ({r.triggers}/{r.runs_made})" for r in group]
    return lines


def _mark(result: QueryResult) -> str:
    if result.borderline:
        return "≈"
    if result.errors:
        return "!"
    return "–" if result.passed is None else MARKS[result.passed]


def failure_lines(skill: SkillReport) -> list[str]:
    """A skill's failures grouped, so the lesson shows at a glance: the listing line once,
    then the should-trigger queries it missed and the should-not queries it took, each
    group with what won over all its runs (the items' own reports keep the detail)."""
    results = skill.results.results()
    groups = (
        ("missed", [r for r in results if r.should_trigger and r.passed is False], True),
        ("took", [r for r in results if not r.should_trigger and r.passed is False], False),
    )
    if not any(failed for _, failed, _ in groups):
        return []
    lines = []
    if skill.listed_line:
        lines.append(f"  listed as: {skill.listed_line}")
    for verb, failed, should in groups:
        if not failed:
            continue
        of = sum(1 for r in results if r.should_trigger == should)
        kind = "should-trigger" if should else "should-not"
        chosen: dict[str, int] = {}
        for r in failed:
            for choice, count in r.chosen.items():
                chosen[choice] = chosen.get(choice, 0) + count
        own = f"skill:{skill.target.choice_id}"
        won = f"; chosen instead: {describe_chosen(chosen, exclude=own)}" if should else ""
        lines.append(f"  {verb} {len(failed)} of {of} {kind} queries{won}")
        for r in failed[:MAX_LISTED_QUERIES]:
            how = "borderline" if r.borderline else f"{r.triggers}/{r.runs_made}"
            lines.append(f"    - {r.query!r} ({how})")
        if len(failed) > MAX_LISTED_QUERIES:
            lines.append(f"    ... {len(failed) - MAX_LISTED_QUERIES} more")
    return lines


def _skill_line(s: Summary) -> str:
    skipped = f", {s.skipped} skipped" if s.skipped else ""
    borderline = f" ({s.borderline} borderline)" if s.borderline else ""
    u = s.usage
    cost = _cost_text(s.cost_usd) if s.priced else ""
    interval = ""
    if s.query_pass_interval is not None:
        interval = f", {format_interval(s.query_pass_interval, s.confidence)}"
    return (
        f"{s.passed} passed, {s.failed} failed{borderline}, {s.errors} errors{skipped} | "
        f"queries passed {s.passed}/{s.counted} ({format_ratio(s.query_pass_rate)}){interval} "
        f"| run precision {rate_text(s.precision, s.precision_interval)}, run recall "
        f"{rate_text(s.recall, s.recall_interval)}, run accuracy "
        f"{rate_text(s.accuracy, s.accuracy_interval)} | "
        f"{s.calls} calls, tokens in {u.input_tokens:,} out {u.output_tokens:,} "
        f"cache write {u.cache_creation_input_tokens:,} "
        f"read {u.cache_read_input_tokens:,}{cost}"
    )


def routing_lines(table: RoutingTable, folder: str) -> list[str]:
    """A folder's routing items and accuracy (when it has routing items), then its worst
    clashes, one line each; ``folder`` is the folder as shown."""
    lines = []
    if table.accuracy is not None:
        items = ""
        if table.items:
            passed_items = sum(1 for i in table.items if i.passed)
            items = f"routing items {passed_items}/{len(table.items)} passed, "
        passed, counted = table.counted
        lines.append(
            f"routing in {folder}: {items}routing accuracy {format_ratio(table.accuracy)} "
            f"({passed}/{counted} of routing items and should-trigger queries passed), "
            f"{format_interval(table.interval, table.confidence)}"
        )
    if not table.clashes:
        lines.append(f"routing in {folder}: no skill took another's queries")
    for clash in table.clashes[:MAX_CLASHES]:
        lines.append(f"routing in {folder}: {clash.line()}")
    if len(table.clashes) > MAX_CLASHES:
        lines.append(f"routing in {folder}: ... {len(table.clashes) - MAX_CLASHES} more clashes")
    return lines


def _calls(spend: Spend) -> str:
    """``12 calls``, or ``12 calls (10 in batches)``: batch calls cost half."""
    batch = spend.batch_calls
    return f"{spend.calls} calls" + (f" ({batch} in batches)" if batch else "")


def _cost(spend: Spend) -> str:
    return _cost_text(None if spend.cost_usd is None else round(spend.cost_usd, 6))


def _cost_text(cost: float | None) -> str:
    """``, ~$0.0042``; ``, cost unknown`` for a model missing from the price table."""
    if cost is None:
        return ", cost unknown (model not in the price table)"
    return f", ~{format_usd(cost)}"


def comparison_lines(comparison: Comparison, path: str) -> list[TerminalLine]:
    """What the baseline held and what was compared, each query whose settled verdict
    changed, each change within the noise, then each skill's verdict against the baseline (a
    paired test on its changed queries)."""

    lines: list[TerminalLine] = [TerminalLine(comparison.line(display_path(path)))]
    for label, changes in (
        ("REGRESSED", comparison.regressions),
        ("improved", comparison.improvements),
    ):
        lines += [
            TerminalLine(f"{label} {c.skill}: {c.query!r} ({c.before} -> {c.after})")
            for c in changes
        ]
    noise = ": not settled both times, so not a regression"
    lines += [
        TerminalLine(f"noise {c.skill}: {c.query!r} ({c.before} -> {c.after}){noise}")
        for c in comparison.noise
    ]
    changed = [s for s in comparison.skills if s.regressed or s.improved]
    lines += [TerminalLine(s.line(comparison.confidence)) for s in changed]
    return lines


def notice_line(notice: Notice, planned: Estimate | None = None) -> str:
    """A notice as the terminal shows it; the first word of the rate limits also says how
    long the session's calls take at them (from the header's estimate)."""
    line = f"skilltrigger: {notice.line()}"
    limits = getattr(notice, "limits", None)
    if planned is None or not limits or getattr(notice, "waiting", None):
        return line
    low, high = planned.minutes_at(limits)
    if high <= 0:
        return line
    span = (
        f"{_minutes(low)} to {_minutes(high)}"
        if _minutes(low) != _minutes(high)
        else _minutes(high)
    )
    return f"{line}; at it this session's calls take {span} at least"


def _minutes(value: float) -> str:
    return f"{value:.1f} min" if value < 10 else f"{value:.0f} min"


def untested_lines(names: Sequence[str]) -> list[str]:
    """The skills found without an eval set: they compete in every listing but have no
    items of their own."""
    if not names:
        return []
    return [
        f"skilltrigger: no eval set, so listed but not tested: {', '.join(names)} "
        "(draft one with --trigger-draft)"
    ]


def reading_lines(notes: Sequence[tuple[str, str]]) -> list[str]:
    """What Claude Code reads differently from what a SKILL.md means (``(path, note)``),
    before any call: the text tested, and how to fix the file."""

    return [f"skilltrigger: {display_path(path)}: {note}" for path, note in notes]


def not_collected_lines(cases: Sequence[tuple[str, str]], base: str | None = None) -> list[str]:
    """The ``claude plugin eval`` cases found that are not trigger checks: a line for them,
    then one per case with why (its folder as the person running pytest reads it)."""
    if not cases:
        return []

    lines = [f"skilltrigger: {len(cases)} claude plugin eval case(s) not collected:"]
    lines += [f"  {display_path(folder, base)}: {reason}" for folder, reason in cases]
    return lines


def case_grader_lines(cases: Sequence[tuple[str, Any]], base: str | None = None) -> list[str]:
    """The ``claude plugin eval`` cases collected for their Skill grader whose other graders
    a trigger test does not measure, or which lost a grader no run can pass: a line for
    them, then one per case (``cases``: each case's folder with its entry's ``extra``)."""
    shown = []
    for folder, extra in cases:
        parts = []
        if extra.get("not_measured"):
            parts.append("not measured here: " + ", ".join(extra["not_measured"]))
        parts += list(extra.get("left_out") or ())
        if parts:
            shown.append(f"  {display_path(folder, base)}: {'; '.join(parts)}")
    if not shown:
        return []
    head = (
        f"skilltrigger: {len(shown)} claude plugin eval case(s) collected for their tool_used "
        "grader on Skill alone (a trigger test measures that grader, not what the answer, "
        "the trace or the files show):"
    )
    return [head, *shown]


def control_lines(
    on: bool | str, results: Sequence[ControlResult], spend: Spend | None = None
) -> list[str]:
    """What the controls found before the items, and what they cost (none on a rerun: the
    store holds their runs), or that they are off (``on``: True, else what turned them off,
    the option or the environment variable)."""
    if on is not True:
        by = on or "--trigger-controls"
        return [
            f"skilltrigger: controls off ({by}): nothing checks that this "
            "session can see a trigger before the items' spend"
        ]
    if not results:
        return [
            "skilltrigger: controls not run: no item will call (the listing or the stored runs "
            "decide every one)"
        ]
    lines = []
    for control in results:
        on_model = f" on {control.model}" if control.model else ""
        positive, negative = control.positive, control.negative
        lines.append(
            f"skilltrigger: controls{on_model}: the positive triggered "
            f"{positive.triggers}/{positive.runs_made}, the negative "
            f"{negative.triggers}/{negative.runs_made}"
        )
    if lines and spend is not None:
        lines[-1] += f" ({_calls(spend)}{_cost(spend)})"
    return lines


def unreachable_lines(skill: SkillReport) -> list[str]:
    """The queries no description of the improvement rounds got right, apart from the
    failures: the author may drop or rephrase them."""
    found = skill.optimization.unreachable if skill.optimization is not None else ()
    if not found:
        return []
    reached = counted(len(found), "query")
    lines = [f"  no description reached {reached} in any round (drop or rephrase):"]
    return lines + [f"    - {u.text()}" for u in found]


def setup_lines(project: ProjectSetup, builtin: bool) -> list[str]:
    """What of the project's own setup the runs are under, and what the builtin context
    cannot give them (MCP servers run only where Claude Code runs)."""
    held = [name for name, _ in project.files if not name.startswith(".claude/hooks/")]
    if project.claude_md is not None:
        held.insert(0, "CLAUDE.md")
    lines = [f"skilltrigger: under the project's setup: {', '.join(held)}"]
    if builtin and ".mcp.json" in held:
        lines.append(
            "skilltrigger: the builtin context adds CLAUDE.md and runs the UserPromptSubmit "
            "hooks; the project's MCP servers need the claude-code backend or "
            "--trigger-context=claude-code"
        )
    return lines


def scope_lines(scope: RunScope) -> list[str]:
    """What a run covering part of the skills did not re-run, and the parts it merged."""
    lines = []
    if scope.not_rerun:
        names = first_few([u.name for u in scope.not_rerun], 20)
        lines.append(
            f"skilltrigger: {counted(len(scope.not_rerun), 'skill')} not re-run "
            f"({scope.not_rerun[0].reason}): {names}"
        )
    if scope.merged:
        lines.append(f"skilltrigger: merged {counted(len(scope.merged), 'part')}, no call made")
    return lines
