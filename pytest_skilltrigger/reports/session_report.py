"""The session's results as one typed report, built once at the end of the session.

The gates, the terminal summary and the Markdown step summary read it as it is; only the
``--trigger-json`` edge (:mod:`~pytest_skilltrigger.reports.json_report`) turns it into plain
JSON values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_skilltrigger.model.formatting import display_path
from pytest_skilltrigger.model.listing_budget import BARE, ListingFit, fit_of
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.prices import PHASES, Price, Spend, total_of
from pytest_skilltrigger.model.verdict import Rule
from pytest_skilltrigger.reports.routing_table import RoutingTable
from pytest_skilltrigger.reports.summary import (
    SessionResults,
    SkillResults,
    Summary,
    models_used,
    summarize,
)
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.changed import Unchanged

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.controls import ControlResult
    from pytest_skilltrigger.engine.load_governor import LoadReport
    from pytest_skilltrigger.optimizer.record import RoundsRecord
    from pytest_skilltrigger.skills.lint import LintFinding


@dataclass
class SkillReport:
    """One skill: its items' results and summary, and its improvement rounds if any ran."""

    results: SkillResults
    summary: Summary
    optimization: RoundsRecord | None = None
    # how the skill's listing fits its model's listing budget (None: not worked out)
    fit: ListingFit | None = None

    @property
    def target(self) -> Target:
        return self.results.target

    @property
    def name(self) -> str:
        return self.results.target.name

    @property
    def model(self) -> str | None:
        """Its model in a matrix (None: the session's one model)."""
        return self.results.model

    @property
    def crowd(self) -> int | None:
        """The other installed skills it was asked among (None: no crowd)."""
        return self.results.crowd

    @property
    def mode(self) -> str | None:
        """Its permission mode in a matrix (None: the session's own)."""
        return self.results.mode

    @property
    def label(self) -> str:
        """The skill as reports head it: ``pdf``, in a matrix ``pdf on claude-haiku-4-5``,
        in a crowd ``pdf among 40 skills``, in another mode ``pdf in plan mode``."""
        label = f"{self.name} on {self.model}" if self.model else self.name
        label = f"{label} among {self.crowd} skills" if self.crowd else label
        return f"{label} in {self.mode} mode" if self.mode else label

    @property
    def listed_description(self) -> str | None:
        """The exact text after ``- name: `` that Claude Code lists for the skill, or None
        when it is not listed (``disable-model-invocation``)."""
        context = self.target.context()
        return context.tested.listed if context.model_invocable else None

    @property
    def listed(self) -> str:
        """How Claude Code shows the skill on its model: full, cut, bare or unlisted."""
        fit = self.fit or ListingFit(budget=0, size=0, bare=frozenset())  # no budget known
        return fit.shown_in(self.target.context())

    @property
    def listing_warning(self) -> str | None:
        """Why the model sees only the skill's name, when the listing budget says so."""
        if self.listed != BARE or self.fit is None:
            return None
        on = f" with {self.fit.model}" if self.fit.model else ""
        return (
            f"{self.name} is listed as a bare name{on}: the folder's listing passes the "
            f"budget of {self.fit.budget:,} characters by {self.fit.over_by:,}"
        )

    @property
    def listed_line(self) -> str | None:
        """The whole listing line, or None when the skill is not listed."""
        context = self.target.context()
        return context.tested.line if context.model_invocable else None


@dataclass(frozen=True)
class RunScope:
    """Which part of the session's skills this run covers: after a change
    (``--trigger-changed-since``) the skills not re-run, with why; a shard's part
    (``--trigger-shard``) with its items' results by node id, which the merge reads back;
    or the parts merged into this report (``--trigger-merge``)."""

    changed_since: str | None = None
    not_rerun: tuple[Unchanged, ...] = ()
    shard: str | None = None
    items: Mapping[str, QueryResult] = field(default_factory=dict)
    merged: tuple[str, ...] = ()


@dataclass
class SessionReport:
    """Every skill's report, every folder's routing table, and what the session spent.

    Each skill's ``summary`` covers its items (the eval entries run as tests); ``spending``
    covers every call of the session, by phase: the items, the ``skill_trigger`` fixture's
    checks, the improvement rounds' trigger runs, the proposals (``improve``) and the
    confirmation runs.
    """

    backend: str | None
    model: str | None
    runs_per_query: int
    threshold: float
    skills: list[SkillReport] = field(default_factory=list)
    routing: list[RoutingTable] = field(default_factory=list)
    spending: Mapping[str, Spend] = field(default_factory=dict)
    #: where pytest was started: folders are shown relative to it
    base: str | None = None
    #: the verdict rule of the session's items
    rule: Rule | None = None
    #: the claude-code backend's runs in flight in this process (None: another backend)
    load: LoadReport | None = None
    #: what the eval sets' lint found (``--trigger-lint``)
    lint: tuple[LintFinding, ...] = ()
    #: the controls run before the items (``--trigger-controls``)
    controls: tuple[ControlResult, ...] = ()
    #: the permission mode every query is asked in (None: the CLI's default); a matrix's
    #: further modes are each skill report's ``mode``
    permission_mode: str | None = None
    #: which part of the skills the run covers (a change's, a shard's, the parts merged)
    scope: RunScope = field(default_factory=RunScope)

    @property
    def mode_name(self) -> str:
        """The session's permission mode, as the CLI names it."""
        return self.permission_mode or "default"

    @property
    def rule_text(self) -> str:
        """The verdict rule in words, for the reports' headers."""
        if self.rule is not None:
            return self.rule.describe()
        return f"{self.runs_per_query} runs per query, threshold {self.threshold:g}"

    def folder_label(self, folder: str) -> str:
        """A folder as the person who ran pytest reads it."""

        return display_path(folder, self.base)

    def table_label(self, table: RoutingTable) -> str:
        """A routing table's folder as shown, with its model in a matrix."""
        folder = self.folder_label(table.folder)
        return f"{folder} on {table.model}" if table.model else folder

    @property
    def has_results(self) -> bool:
        """Whether any item reported (a skill's trigger items or a folder's routing items)."""
        return bool(self.skills or self.routing)

    def by_phase(self) -> dict[str, Spend]:
        """The session's spending by phase, the known phases in a fixed order first."""
        by_phase = {p: self.spending[p] for p in PHASES if p in self.spending}
        by_phase.update({p: s for p, s in self.spending.items() if p not in by_phase})
        return by_phase

    def total(self) -> Spend:
        """Everything the session spent."""
        return total_of(self.by_phase().values())


@dataclass(frozen=True)
class ReportContext:
    """What the report says of the session beyond its results: where the runs went, the
    verdict rule (``runs_per_query`` and ``threshold`` as the reference tool names them),
    the prices and what was spent, the routing tables, and where pytest was started."""

    backend: str | None = None
    model: str | None = None
    runs_per_query: int = 3
    threshold: float = 0.5
    rule: Rule | None = None
    prices: dict[str, Price] | None = None
    spending: Mapping[str, Spend] = field(default_factory=dict)
    routing: Sequence[RoutingTable] = ()
    base: str | None = None
    # how many CLI runs the claude-code backend kept in flight in this process, and why
    load: LoadReport | None = None
    crowd_usage: float = 0.0  # the skill under test's usage in a crowd (--trigger-crowd-usage)
    lint: tuple[LintFinding, ...] = ()  # what the eval sets' lint found
    controls: tuple[ControlResult, ...] = ()  # the controls run before the items
    permission_mode: str | None = None  # the session's own mode (None: the default)
    scope: RunScope = field(default_factory=RunScope)  # which part of the skills it covers


def build_report(
    results: SessionResults,
    context: ReportContext,
    optimizations: Mapping[str, RoundsRecord] | None = None,
) -> SessionReport:
    """The session's report. ``optimizations`` are the improvement rounds by skill folder;
    the model named is the one that really answered, when the runs say so."""
    used = models_used(results.all_results())
    model = used[0] if used else context.model
    first = results.first_model()  # a matrix's rounds run on its first model
    skills = [
        SkillReport(
            skill,
            summarize(skill.results(), skill.model or model, context.prices),
            (optimizations or {}).get(skill.target.skill.path)
            if skill.model == first and skill.variant.base
            else None,
            fit_of(skill.target.crowded(skill.crowd, context.crowd_usage), skill.model or model),
        )
        for skill in results.ordered()
    ]
    return SessionReport(
        context.backend,
        model,
        context.runs_per_query,
        context.threshold,
        skills,
        list(context.routing),
        dict(context.spending),
        context.base,
        context.rule,
        context.load,
        context.lint,
        context.controls,
        context.permission_mode,
        context.scope,
    )
