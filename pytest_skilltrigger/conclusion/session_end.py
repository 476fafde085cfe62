"""The end of a session: improvement rounds and SKILL.md, the typed report, the files, the
gates and the baseline, in that order, for the controller to call once every item is done.

What the inputs need is checked when the :class:`SessionEnd` is made (at configure, before any
call): every output path, each skill's train/test split when rounds will run, the store's file
and the baseline. The result is a typed :class:`Conclusion`, which the pytest layer prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.conclusion.gathered import Gathered
from pytest_skilltrigger.conclusion.outputs import Outputs
from pytest_skilltrigger.model.options import DEFAULT_CONFIDENCE
from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings
from pytest_skilltrigger.reports.baseline import Comparison, compare, load_baseline
from pytest_skilltrigger.reports.gates import gate_failures
from pytest_skilltrigger.reports.json_report import report_json
from pytest_skilltrigger.reports.session_report import SessionReport, build_report
from pytest_skilltrigger.reports.terminal import TerminalLine
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.optimizer.rounds import Optimization

Log = Callable[[str], None]


@dataclass
class Conclusion:
    """What the session concluded: its report, the gates that failed, the changes against the
    baseline, and whether the rounds (or the writing of SKILL.md) were interrupted."""

    report: SessionReport
    gate_failures: list[str] = field(default_factory=list)
    comparison: Comparison | None = None  # against --trigger-baseline
    interrupted: bool = False

    def terminal_lines(self) -> list[TerminalLine]:
        """The summary, the changes against the baseline and the failed gates."""
        from pytest_skilltrigger.reports.terminal import summary_lines

        lines = []
        if self.report.has_results:
            lines.append(TerminalLine("skill trigger summary", separator=True))
            lines += [TerminalLine(line) for line in summary_lines(self.report)]
        if self.comparison is not None:
            lines += _comparison_lines(self.comparison)
        lines += [TerminalLine(f"GATE FAILED {line}", "red") for line in self.gate_failures]
        return lines


def _comparison_lines(comparison: Comparison) -> list[TerminalLine]:
    """Each query whose settled verdict changed, each change within the noise, then each
    skill's verdict against the baseline (a paired test on its changed queries)."""
    lines = []
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


class SessionEnd:
    """The controller's end-of-session work, with the inputs it needs checked up front."""

    def __init__(
        self,
        targets: Sequence[Target],
        routing_sets: Sequence[RoutingSet],
        settings: Settings,
        *,
        optimizer: OptimizerSettings | None = None,
        gates: Gates | None = None,
        outputs: Outputs | None = None,
        base: str | None = None,
    ) -> None:
        self.targets = list(targets)
        self.routing_sets = list(routing_sets)
        self.settings = settings
        self.optimizer = optimizer
        self.gates = gates or Gates()
        self.outputs = outputs or Outputs()
        self.base = base  # where pytest started: folders are shown relative to it
        self.baseline: dict[str, Any] | None = None
        self.gathered = Gathered(self.targets, self.routing_sets, settings.models)

    def check_inputs(self) -> None:
        """Raise :class:`InputError` for bad input, before any call: an output path that
        cannot be written, a split that cannot measure an improvement, a store that cannot
        be used, a baseline that is not a report."""
        self.outputs.check(rewritten=self.targets if self.optimizer else ())
        if self.optimizer is not None:
            from pytest_skilltrigger.optimizer.split import split_problem

            for target in self.targets:
                problem = split_problem(
                    target.eval_set.entries, self.optimizer.holdout, self.optimizer.seed
                )
                if problem:
                    raise InputError(target.eval_set.path, problem)
        if self.gates.baseline_path:
            self.baseline = load_baseline(self.gates.baseline_path)
        if self.settings.active_store:  # once every other input is known good
            from pytest_skilltrigger.engine.store import prepare_store

            prepare_store(self.settings.active_store)

    def status_lines(self, engine: TriggerSession | None) -> list[TerminalLine]:
        """What kept the trigger tests from running, and queries the budget skipped."""
        from pytest_skilltrigger.model.prices import format_usd

        lines: list[TerminalLine] = []
        if not self.targets:
            return lines
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
        rounds: dict[str, Optimization] | None = None
        stopped = False
        if self.optimizer is not None and not interrupted and engine is not None:
            rounds, stopped = self._improve(engine, log)
        report = build_report(
            self.gathered.results,
            backend=engine.backend.name if engine and engine.backend else None,
            model=engine.backend.model if engine and engine.backend else None,
            runs_per_query=self.settings.min_runs,
            threshold=self.settings.threshold,
            optimizations=rounds,
            prices=engine.prices if engine else None,
            spending=engine.spending() if engine else None,
            routing=self.gathered.routing_tables,
            base=self.base,
            rule=self.settings.rule,
        )
        conclusion = Conclusion(report, interrupted=stopped)
        # the JSON edge, for the file and the baseline comparison (which reads JSON)
        needs_json = self.outputs.json_path or self.baseline is not None
        data = report_json(report) if needs_json else {}
        self.outputs.write_json(data)
        if self.optimizer is None and report.has_results:  # (the rounds write their own)
            self._write_results_page(report, data)
        self._gate(conclusion, data)
        if report.has_results:
            from pytest_skilltrigger.reports.markdown import render_markdown

            self.outputs.append_step_summary(render_markdown(report, self.gates.min_accuracy))
        return conclusion

    def _improve(
        self, engine: TriggerSession, log: Log
    ) -> tuple[dict[str, Optimization] | None, bool]:
        """The improvement rounds after every item is done; SKILL.md files are written from
        their outcomes once all rounds are over. Whether they were interrupted."""
        from pytest_skilltrigger.optimizer.accept import accept_all
        from pytest_skilltrigger.optimizer.driver import OptimizationDriver
        from pytest_skilltrigger.reports.round_files import RoundFiles
        from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt

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
            return runs, True
        with sigterm_as_interrupt():
            try:
                accept_all(runs.values(), log)
            except KeyboardInterrupt:  # each write is atomic: a file is old or new
                log("interrupted while writing: some SKILL.md files may be rewritten")
                return runs, True
        return runs, False

    def _write_results_page(self, report: SessionReport, data: dict[str, Any]) -> None:
        """A plain run's page of the items' results (``--trigger-report``), and with
        ``--trigger-results-dir`` a time-stamped folder holding it and the JSON."""
        from pytest_skilltrigger.reports.html_pages import render_results_page
        from pytest_skilltrigger.reports.json_report import write_report
        from pytest_skilltrigger.reports.round_files import stamped_folder
        from pytest_skilltrigger.support.atomic import atomic_write_text

        page = (
            render_results_page(report)
            if (self.outputs.report_path or self.outputs.results_dir)
            else ""
        )
        self.outputs.write_page(page)
        if self.outputs.results_dir:
            folder = stamped_folder(self.outputs.results_dir)
            atomic_write_text(os.path.join(folder, "report.html"), page)
            write_report(os.path.join(folder, "results.json"), data or report_json(report))

    def _gate(self, conclusion: Conclusion, data: dict[str, Any]) -> None:
        """Accuracy floors and the comparison with the baseline (against the report's JSON,
        as the baseline is one)."""
        gates = self.gates
        conclusion.gate_failures += gate_failures(
            conclusion.report, gates.min_accuracy, gates.min_routing_accuracy
        )
        if self.baseline is None:
            return
        confidence = self.settings.confidence or DEFAULT_CONFIDENCE
        comparison = conclusion.comparison = compare(self.baseline, data, confidence)
        if gates.fail_on_regression:
            conclusion.gate_failures += [s.line(confidence) for s in comparison.regressed_skills]
