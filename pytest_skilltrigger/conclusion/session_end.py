"""The end of a session: improvement rounds and SKILL.md, the typed report, the files, the
gates and the baseline, in that order, for the controller to call once every item is done.

What the inputs need is checked when the :class:`SessionEnd` is made (at configure, before any
call): every output path, each skill's train/test split when rounds will run, the store's file
and the baseline. The result is a typed :class:`Conclusion`, which the pytest layer prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pytest_skilltrigger.conclusion.gathered import Gathered
from pytest_skilltrigger.conclusion.outputs import Outputs
from pytest_skilltrigger.engine.load_governor import side_by_side
from pytest_skilltrigger.model.options import DEFAULT_CONFIDENCE
from pytest_skilltrigger.model.prices import format_usd
from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings
from pytest_skilltrigger.optimizer.accept import accept_all
from pytest_skilltrigger.optimizer.split import split_problem
from pytest_skilltrigger.reports.analysis import (
    Baseline,
    Comparison,
    compare,
    gate_failures,
    load_baseline,
    verdicts_of,
)
from pytest_skilltrigger.reports.json_report import report_json
from pytest_skilltrigger.reports.markdown import render_markdown
from pytest_skilltrigger.reports.pr_comment import PullRequestRun, render_pr_comment
from pytest_skilltrigger.reports.session_report import (
    ReportContext,
    RunScope,
    SessionReport,
    build_report,
)
from pytest_skilltrigger.reports.stopped import StoppedRun
from pytest_skilltrigger.reports.terminal import (
    TerminalLine,
    comparison_lines,
    scope_lines,
    summary_lines,
)
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.changed import ChangeSelection
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.skills.lint import LintedSkill, LintFinding, lint_sets
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.merge import Parts
    from pytest_skilltrigger.engine.load_governor import LoadReport
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.optimizer.record import RoundsRecord

Log = Callable[[str], None]


@dataclass
class Conclusion:
    """What the session concluded: its report, the gates that failed, the changes against the
    baseline, and whether the rounds (or the writing of SKILL.md) were interrupted."""

    report: SessionReport
    gate_failures: list[str] = field(default_factory=list)
    comparison: Comparison | None = None  # against --trigger-baseline
    baseline_path: str = ""  # the baseline read
    interrupted: bool = False

    def terminal_lines(self) -> list[TerminalLine]:
        """The summary, the changes against the baseline and the failed gates."""

        lines = []
        if self.report.has_results:
            lines.append(TerminalLine("skill trigger summary", separator=True))
            lines += [TerminalLine(line) for line in summary_lines(self.report)]
        if self.comparison is not None:
            lines += comparison_lines(self.comparison, self.baseline_path)
        lines += [TerminalLine(line) for line in scope_lines(self.report.scope)]
        lines += [TerminalLine(f"GATE FAILED {line}", "red") for line in self.gate_failures]
        return lines


@dataclass(frozen=True)
class EndOptions:
    """How a session ends: with improvement rounds or not, its gates, the files it writes,
    where pytest started (folders are shown relative to it), and which part of the skills
    it covers: a change's (``changes``), a shard's (``shard``, ``K/N``), or the merged
    ``parts`` of a sharded run, whose results stand in for the engine's."""

    optimizer: OptimizerSettings | None = None
    gates: Gates = field(default_factory=Gates)
    outputs: Outputs = field(default_factory=Outputs)
    base: str | None = None
    changes: ChangeSelection | None = None
    shard: str | None = None
    parts: Parts | None = None


def check_before_drafts(outputs: Outputs, gates: Gates) -> None:
    """Raise :class:`InputError` for an output path or baseline that would fail the session
    after its drafts were paid for (the checks that need every eval set come later)."""
    outputs.check()
    if gates.baseline_path:
        load_baseline(gates.baseline_path)


# a set with this many queries of each kind is expected to split for the improvement rounds
SPLIT_LINT_FLOOR = 4


class SessionEnd:
    """The controller's end-of-session work, with the inputs it needs checked up front."""

    def __init__(
        self,
        targets: Sequence[Target],
        routing_sets: Sequence[RoutingSet],
        settings: Settings,
        options: EndOptions | None = None,
    ) -> None:
        options = options or EndOptions()
        self.targets = list(targets)
        self.routing_sets = list(routing_sets)
        self.settings = settings
        self.optimizer = options.optimizer
        self.gates = options.gates
        self.outputs = options.outputs
        self.base = options.base
        self.changes = options.changes
        self.shard = options.shard
        self.parts = options.parts
        self.baseline: Baseline | None = None
        self.gathered = Gathered(self.targets, self.routing_sets, settings.models)
        #: what the eval sets' lint found (``--trigger-lint``), once the inputs are checked
        self.lint: tuple[LintFinding, ...] = ()

    def check_inputs(self) -> None:
        """Raise :class:`InputError` for bad input, before any call: an output path that
        cannot be written, a split that cannot measure an improvement, a store that cannot
        be used, a baseline that is not a report."""
        self.outputs.check(rewritten=self.targets if self.optimizer else ())
        if self.optimizer is not None:
            for target in self.targets:
                problem = split_problem(
                    target.eval_set.entries, self.optimizer.holdout, self.optimizer.seed
                )
                if problem:
                    raise InputError(target.eval_set.path, problem)
        if self.gates.baseline_path:
            self.baseline = load_baseline(self.gates.baseline_path)
        self.lint = self._lint()
        if self.settings.active_store:  # once every other input is known good
            # deferred: sqlite3, only when a store is used
            from pytest_skilltrigger.engine.store import prepare_store

            prepare_store(self.settings.active_store)

    def _lint(self) -> tuple[LintFinding, ...]:
        """The eval sets' lint (``--trigger-lint``): findings to report, or with ``error``
        an InputError naming the first, before any call."""
        if self.gates.lint == "off":
            return ()
        rounds = self.optimizer or OptimizerSettings()

        def split(entries: Sequence[EvalEntry]) -> str | None:
            """The rounds' split, for a set large enough to expect one that works (with
            ``--trigger-optimize`` a bad split is an error already)."""
            positives = sum(e.should_trigger for e in entries)
            if min(positives, len(entries) - positives) < SPLIT_LINT_FLOOR:
                return None
            problem = split_problem(entries, rounds.holdout, rounds.seed)
            return f"the improvement rounds' split: {problem}" if problem else None

        skills = [
            LintedSkill(
                tuple(dict.fromkeys(n for n in (t.name, t.skill.name, t.skill.alias) if n)),
                t.eval_set,
                os.path.dirname(t.skill.path),
            )
            for t in self.targets
        ]
        findings = tuple(lint_sets(skills, split))
        if findings and self.gates.lint == "error":
            first = findings[0]
            where = f"{first.path}:{first.line}" if first.line else first.path
            said = [f"{first.message} [{first.rule}]"] + [f.text() for f in findings[1:10]]
            more = f"; and {len(findings) - 10} more" if len(findings) > 10 else ""
            raise InputError(where, "; ".join(said) + more + "; --trigger-lint=error")
        return findings

    def status_lines(self, engine: TriggerSession | None) -> list[TerminalLine]:
        """What kept the trigger tests from running, and queries the budget skipped."""

        lines: list[TerminalLine] = []
        if not self.targets:
            return lines
        if self.parts is not None:
            return lines  # (the header said so; no item was to run here)
        if engine is None or engine.no_backend:
            reason = engine.no_backend if engine else "no trigger item ran"
            lines.append(
                TerminalLine(f"skilltrigger: trigger tests did not run: {reason}", "yellow")
            )
        over_budget = self.gathered.over_budget()
        if over_budget:
            lines.append(
                TerminalLine(
                    f"skilltrigger: the cost budget ({format_usd(self.settings.budget_usd)}) was "
                    f"reached; {over_budget} queries were skipped without a call",
                    "yellow",
                )
            )
        return lines

    def finish(self, engine: TriggerSession | None, *, interrupted: bool, log: Log) -> Conclusion:
        """Rounds (unless the session was interrupted), the report, its files and the gates."""
        rounds: dict[str, RoundsRecord] | None = None
        stopped = False
        if self.optimizer is not None and not interrupted and engine is not None:
            rounds, stopped = self._improve(engine, log)
        report = build_report(self.gathered.results, self._report_context(engine), rounds)
        conclusion = Conclusion(report, interrupted=stopped)
        if self.outputs.json_path:  # the JSON edge
            self.outputs.write_json(report_json(report))
        if self.optimizer is None and report.has_results:  # (the rounds write their own)
            self._write_results_page(report)
        self._gate(conclusion)
        if report.has_results:
            self.outputs.append_step_summary(render_markdown(report, self.gates.min_accuracy))
        if self.outputs.pr_comment_path:
            self.outputs.write_pr_comment(render_pr_comment(self._pull_request_run(conclusion)))
        return conclusion

    def _pull_request_run(self, conclusion: Conclusion) -> PullRequestRun:
        return PullRequestRun(
            conclusion.report,
            conclusion.comparison,
            self.baseline,
            tuple(conclusion.gate_failures),
            conclusion.report.scope.not_rerun,
            confidence=self.settings.confidence or DEFAULT_CONFIDENCE,
            gated=self.gates.min_accuracy is not None
            or any(t.eval_set.min_accuracy is not None for t in self.targets),
        )

    def stop(self, reason: str, engine: TriggerSession | None) -> None:
        """A session stopped at its start (a control failed, no backend): its JSON, JUnit
        XML, step summary and comment say why, so a workflow finds them."""
        reason = reason.removeprefix("skilltrigger: ")
        spending = engine.spending() if engine is not None else {}
        stopped = StoppedRun(reason, spending, self.settings.first_mode or "default")
        comment = render_pr_comment(PullRequestRun(None, stopped=reason))
        self.outputs.write_stopped(stopped, comment)

    def _scope(self) -> RunScope:
        """Which part of the skills the run covers."""
        changes, parts = self.changes, self.parts
        if parts is not None:
            return RunScope(parts.changed_since, parts.not_rerun, merged=parts.paths)
        items = dict(self.gathered.by_node) if self.shard else {}
        if changes is None:
            return RunScope(shard=self.shard, items=items)
        return RunScope(changes.since, changes.unchanged, self.shard, items)

    def _improve(
        self, engine: TriggerSession, log: Log
    ) -> tuple[dict[str, RoundsRecord] | None, bool]:
        """The improvement rounds after every item is done; SKILL.md files are written from
        their outcomes once all rounds are over. Whether they were interrupted."""
        # deferred: the optimizer, only for --trigger-optimize
        from pytest_skilltrigger.conclusion.round_files import RoundFiles
        from pytest_skilltrigger.optimizer.driver import OptimizationDriver

        assert self.optimizer is not None  # the caller checked
        if engine.no_backend:
            log(f"skilltrigger: not optimising: {engine.no_backend}")
            return None, False
        engine.forget_runs_ahead()  # what errored for the items is sampled afresh
        files = None
        if self.outputs.report_path or self.outputs.results_dir:
            files = RoundFiles(
                self.outputs.report_path,
                self.outputs.results_dir,
                self.gathered.routing_tables,
                self.base,
            )
        driver = OptimizationDriver(engine, self.optimizer, log, files)
        runs = driver.run(self.targets, self.gathered.starting_results(), self.routing_sets)
        if driver.interrupted:
            return driver.records(), True
        with sigterm_as_interrupt():
            try:
                accept_all(runs.values(), log)
            except KeyboardInterrupt:  # each write is atomic: a file is old or new
                log("interrupted while writing: some SKILL.md files may be rewritten")
                return driver.records(), True
        return driver.records(), False

    def load(self, engine: TriggerSession | None) -> LoadReport | None:
        """How many claude-code runs were in flight: this process's if it made any, else its
        xdist workers' together (None: no CLI run was made)."""

        here = engine.load() if engine is not None else None
        if here is not None and here.most_in_flight:
            return here
        return side_by_side(self.gathered.worker_loads)

    def _report_context(self, engine: TriggerSession | None) -> ReportContext:
        if self.parts is not None:
            return self._merged_context(self.parts)
        backend = engine.backend if engine is not None else None
        return ReportContext(
            backend=backend.name if backend else None,
            model=backend.model if backend else None,
            runs_per_query=self.settings.min_runs,
            threshold=self.settings.threshold,
            rule=self.settings.rule,
            prices=engine.prices if engine else None,
            spending=engine.spending() if engine else {},
            routing=self.gathered.routing_tables,
            base=self.base,
            load=self.load(engine),
            crowd_usage=self.settings.crowd_usage,
            lint=self.lint,
            controls=engine.control_results if engine else (),
            permission_mode=self.settings.first_mode,
            scope=self._scope(),
        )

    def _merged_context(self, parts: Parts) -> ReportContext:
        """A merge's: what the parts said of their session, and what they spent together."""
        # deferred: the price table, only when a report is made
        from pytest_skilltrigger.model.prices import load_prices

        return ReportContext(
            backend=parts.backend,
            model=parts.model,
            runs_per_query=self.settings.min_runs,
            threshold=self.settings.threshold,
            rule=self.settings.rule,
            prices=load_prices(self.settings.prices_path),
            spending=parts.spending,
            routing=self.gathered.routing_tables,
            base=self.base,
            crowd_usage=self.settings.crowd_usage,
            lint=self.lint,
            permission_mode=parts.permission_mode,
            scope=self._scope(),
        )

    def _write_results_page(self, report: SessionReport) -> None:
        """A plain run's page of the items' results (``--trigger-report``), and with
        ``--trigger-results-dir`` a time-stamped folder holding it and the JSON."""
        if not (self.outputs.report_path or self.outputs.results_dir):
            return
        # deferred: jinja2, only when a page is written
        from pytest_skilltrigger.reports.html_pages import render_results_page

        page = render_results_page(report)
        self.outputs.write_page(page)
        self.outputs.write_results_folder(page, report_json(report))

    def _gate(self, conclusion: Conclusion) -> None:
        """Accuracy floors and the comparison with the baseline."""
        gates = self.gates
        conclusion.gate_failures += gate_failures(
            conclusion.report, gates.min_accuracy, gates.min_routing_accuracy
        )
        if self.baseline is None:
            return
        confidence = self.settings.confidence or DEFAULT_CONFIDENCE
        comparison = compare(self.baseline.verdicts, verdicts_of(conclusion.report), confidence)
        comparison = replace(
            comparison, modes=(self.baseline.permission_mode, conclusion.report.mode_name)
        )
        conclusion.comparison = comparison
        conclusion.baseline_path = self.baseline.path
        if gates.fail_on_regression:
            conclusion.gate_failures += [s.line(confidence) for s in comparison.regressed_skills]
