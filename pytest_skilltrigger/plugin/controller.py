"""The controller's roles: gathering every item's result, the improvement rounds, the
reports and the gates. Only a controller writes files.

:class:`LocalController` is a plain run (it also runs the items);
:class:`~pytest_skilltrigger.plugin.dist_controller.DistController` is the xdist controller.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin import options, wire
from pytest_skilltrigger.plugin.role import Role
from pytest_skilltrigger.plugin.running import ItemRunner
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.batch_waves import BatchProgress
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.optimizer.loop import Optimization
    from pytest_skilltrigger.reports.baseline import Change
    from pytest_skilltrigger.reports.routing_table import RoutingTable
    from pytest_skilltrigger.reports.session_report import SessionReport
    from pytest_skilltrigger.reports.summary import SessionResults
    from pytest_skilltrigger.skills.catalog import Target

HTML_PLUGIN = "skilltrigger-html"


class Controller(Role):
    """What both controllers do with results, whoever ran the items."""

    def __init__(self, config: pytest.Config) -> None:
        # (workers run with the arguments and rootdir the controller settled: checked here)
        options.check_values_not_taken_for_paths(config)
        super().__init__(config)
        self.baseline: dict | None = None  # an earlier --trigger-json, checked now
        if self.gates.baseline_path:
            from pytest_skilltrigger.reports.baseline import load_baseline

            self.baseline = load_baseline(self.gates.baseline_path)
        self.gate_failures: list[str] = []
        self.regressions: list[Change] = []
        self.improvements: list[Change] = []
        self.report: SessionReport | None = None  # built once, at the end of the session
        # each trigger item's target and result, with its junitxml properties
        self._by_node: dict[str, tuple[Target, QueryResult, list[tuple[str, Any]]]] = {}
        # each folder's routing items by entry index: (entry, result, passed)
        self.routing_results: dict[str, dict[int, Any]] = {}
        self.html = None
        if not self.targets:
            return
        self._check_outputs()
        self._check_split()
        self._check_store()
        for target in self.targets:
            for warning in target.warnings:  # shown in the warnings summary, also with -q
                warn_at(config, target.skill.skill_md, warning)
        manager = config.pluginmanager
        if manager.hasplugin("html") and config.getoption("htmlpath", None):
            from pytest_skilltrigger.plugin.html import HtmlColumns

            self.html = HtmlColumns(
                self.result_of, lambda: self.routing_dicts
            )
            manager.register(self.html, HTML_PLUGIN)

    def _check_outputs(self) -> None:
        """Every file this run may write, checked now without creating anything: a path it
        cannot write is a usage error before any call, not a traceback after all of them."""
        from pytest_skilltrigger.support.atomic import write_problem

        files = [("--trigger-json", options.json_path(self.config))]
        # (the store's own check below says less well why a path cannot be used)
        files.append(("--trigger-store", self.settings.active_store))
        files.append(("GITHUB_STEP_SUMMARY", os.environ.get("GITHUB_STEP_SUMMARY") or None))
        files.append(("--trigger-report", options.report_path(self.config)))
        folders: list[tuple[str, str | None]] = []
        if self.optimize is not None:
            folders.append(("--trigger-results-dir", self.optimize.results_dir))
            # a rewritten SKILL.md goes through a temporary file beside it
            files += [("SKILL.md", t.skill.skill_md) for t in self.targets]
            folders += [("SKILL.md", t.skill.path) for t in self.targets]
        for label, path in files:
            problem = path and write_problem(path)
            if problem:
                raise InputError(path, f"{problem} ({label})")
        for label, path in folders:
            problem = path and write_problem(path, folder=True)
            if problem:
                raise InputError(path, f"{problem} ({label})")

    def _check_store(self) -> None:
        """Create (or check) the result store now, once every other input is known good, in
        this process only, so that xdist workers find it ready to read."""
        path = self.settings.active_store
        if not path:
            return
        from pytest_skilltrigger.engine.store import prepare_store

        prepare_store(path)

    def _check_split(self) -> None:
        """With --optimize-description, every skill's split must be able to measure."""
        if self.optimize is None:
            return
        from pytest_skilltrigger.optimizer.split import split_problem

        for target in self.targets:
            problem = split_problem(
                target.eval_set.entries, self.optimize.holdout, self.optimize.seed
            )
            if problem:
                raise InputError(target.eval_set.path, problem)

    # -- results -------------------------------------------------------------------------
    @cached_property
    def results(self) -> SessionResults:
        """Every item's typed result, per skill (made when the first one arrives)."""
        from pytest_skilltrigger.reports.summary import SessionResults

        return SessionResults(self.targets)

    @cached_property
    def routing_tables(self) -> list[RoutingTable]:
        """Each folder's routing table, built once the items are done (the rounds' report
        and the JSON report both show it)."""
        from pytest_skilltrigger.reports.routing_table import routing_tables

        folders: dict[str, list[str]] = {}
        for target in self.targets:  # deselected ones too: a sibling is never "other"
            folders.setdefault(os.path.dirname(target.skill.path), []).append(target.name)
        return routing_tables(self.results.ordered(), self.routing_results, folders)

    @cached_property
    def routing_dicts(self) -> list[dict[str, Any]]:
        """The routing tables as the HTML pages take them (rounds' page, pytest-html): made
        once, when the first page needs them."""
        return [table.to_dict() for table in self.routing_tables]

    def result_of(self, nodeid: str) -> tuple[Target, QueryResult] | None:
        """The typed result of a trigger item, once its report has arrived."""
        found = self._by_node.get(nodeid)
        return None if found is None else found[:2]

    @pytest.hookimpl(tryfirst=True)  # before junitxml, pytest-html and users' hooks read it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Decode an item's result once as its report arrives; its numbers become the
        report's ``user_properties`` (and the teardown's, which junitxml reads)."""
        if report.when == "teardown":
            found = self._by_node.get(report.nodeid)
            if found is not None:  # junitxml reads an item's properties from its teardown
                report.user_properties.extend(found[2])
        for record in wire.decode(report):
            if isinstance(record, wire.ItemRecord):
                self._add_item(report, record)
            elif isinstance(record, wire.RoutingRecord):
                self._add_routing(record)
            else:
                self.absorb(record.context_key, record.result, "checks")

    def _add_item(self, report: pytest.TestReport, record: wire.ItemRecord) -> None:
        """Keep a trigger item's result under its skill; its numbers go on the report."""
        self.absorb(record.context_key, record.result, "items")  # paid for, wherever it ran
        target = self.by_skill_md.get(record.skill_md)
        if target is None:  # a worker that read its skills elsewhere (xdist --tx ...//chdir)
            return
        properties = junit_properties(record.result)
        self._by_node[report.nodeid] = (target, record.result, properties)
        report.user_properties.extend(properties)
        self.results.add(target, record.index, record.result)
        if self.html is not None:
            self.html.add_extras(report, target, record.index, record.result)

    def _add_routing(self, record: wire.RoutingRecord) -> None:
        """Keep a routing item's result under its folder, with its verdict."""
        from pytest_skilltrigger.reports.routing_table import routing_verdict

        self.absorb(record.context_key, record.result, "items")  # paid for, wherever it ran
        routing = self.by_routing_path.get(record.path)
        if routing is None:
            return
        entry = routing.entries[record.index]
        ok = routing_verdict(entry.expected_skill, routing.skills, record.result)
        # keyed by entry: a report seen again (a rerun plugin) replaces, never adds
        self.routing_results.setdefault(routing.folder, {})[entry.index] = (
            entry, record.result, ok
        )

    def absorb(self, context_key: str | None, result: QueryResult, phase: str) -> None:
        """Take in a result this process did not sample (nothing to do when it did)."""

    # -- end of session ------------------------------------------------------------------
    def finish(self, session: pytest.Session) -> None:
        """Improvement rounds, the JSON report and the gates (the report also when only the
        ``skill_trigger`` fixture made calls: its totals say what they cost)."""
        if not self.targets and self.started_engine is None:
            return
        from pytest_skilltrigger.reports.json_report import report_json, write_report

        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        rounds = self._optimize(session) if self.optimize and not interrupted else None
        report = self.report = self._build_report(rounds)
        path = options.json_path(self.config)
        # the JSON edge, for the file and the baseline comparison (which reads JSON)
        data = report_json(report) if path or self.baseline is not None else {}
        if path:
            write_report(path, data)
        page = options.report_path(self.config)
        if page and self.optimize is None and report.has_results:  # (the rounds write theirs)
            from pytest_skilltrigger.reports.html_report import render_results_html
            from pytest_skilltrigger.support.atomic import atomic_write_text

            atomic_write_text(page, render_results_html(report))
        self._apply_gates(session, report, data)

    def _optimize(self, session: pytest.Session) -> dict[str, Optimization] | None:
        """Improvement rounds on the controller, after every item is done; SKILL.md files
        are written from their outcomes once all rounds are over."""
        from pytest_skilltrigger.optimizer.accept import accept_all
        from pytest_skilltrigger.optimizer.driver import OptimizationDriver
        from pytest_skilltrigger.reports.rounds import RoundFiles
        from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt

        assert self.optimize is not None  # the caller checked
        if self.engine.unavailable:
            self._log(f"skilltrigger: not optimising: {self.engine.unavailable}")
            return None
        self.engine.drop_batch_runs()  # what errored for the items is sampled afresh
        initial = {key: dict(skill.rows) for key, skill in self.results.skills.items()}
        files = None
        if self.optimize.report_path or self.optimize.results_dir:
            tables = self.routing_dicts
            files = RoundFiles(self.optimize.report_path, self.optimize.results_dir, tables)
        driver = OptimizationDriver(self.engine, self.optimize, self._log, files)
        runs = driver.run(self.targets, initial, self.routing_sets)
        if driver.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        else:
            with sigterm_as_interrupt():
                try:
                    accept_all(runs.values(), self._log)
                except KeyboardInterrupt:  # each write is atomic: a file is old or new
                    self._log("interrupted while writing: some SKILL.md files may be rewritten")
                    session.exitstatus = pytest.ExitCode.INTERRUPTED
        return runs

    def batch_progress(self, progress: BatchProgress) -> None:
        self._log(f"skilltrigger: {progress.line()}")

    def _log(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        # after the last progress mark (``[100%]``) the cursor is still on that line, which
        # write_line does not know under -q: start a line of our own
        if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):
            reporter.write("\n")
        reporter.write_line(line)

    def _build_report(self, rounds: dict[str, Optimization] | None) -> SessionReport:
        from pytest_skilltrigger.reports.session_report import build_report

        engine = self.started_engine
        return build_report(
            self.results,
            backend=engine.backend_name if engine else None,
            model=engine.model if engine else None,
            runs_per_query=self.settings.runs_per_query,
            threshold=self.settings.threshold,
            optimizations=rounds,
            prices=engine.prices if engine else None,
            spending=engine.spending() if engine else None,
            routing=self.routing_tables,
            base=str(self.config.invocation_params.dir),
        )

    def _apply_gates(
        self, session: pytest.Session, report: SessionReport, data: dict[str, Any]
    ) -> None:
        """Accuracy floors, baseline comparison (against the report's JSON, as the baseline
        is one) and the GitHub step summary."""
        from pytest_skilltrigger.reports.gates import gate_failures

        gates = self.gates
        self.gate_failures += gate_failures(
            report, gates.min_accuracy, gates.min_routing_accuracy
        )
        if self.baseline is not None:
            from pytest_skilltrigger.reports.baseline import compare

            self.regressions, self.improvements = compare(self.baseline, data)
            if gates.fail_on_regression and self.regressions:
                self.gate_failures.append(
                    f"{len(self.regressions)} regression(s) against the baseline"
                )
        if self.gate_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_file and report.has_results:
            from pytest_skilltrigger.reports.markdown import render_markdown

            os.makedirs(os.path.dirname(os.path.abspath(summary_file)), exist_ok=True)
            with open(summary_file, "a", encoding="utf-8") as handle:
                handle.write(render_markdown(report, gates.min_accuracy))

    # -- the terminal ----------------------------------------------------------------------
    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.targets:
            return []
        store = self.settings.active_store or "off"
        lines = [
            f"skilltrigger: {len(self.targets)} skill(s), {self.settings.runs_per_query} runs "
            f"per query, threshold {self.settings.threshold}, backend {self.settings.backend}, "
            f"store {store}"
        ]
        engine = self.started_engine  # made at session start (not when only collecting)
        if engine is not None and engine.unavailable is None and engine.context_label:
            lines.append(f"skilltrigger: context {engine.context_label}")
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly:
            return
        reporter = terminalreporter
        engine = self.started_engine
        if self.targets and (engine is None or engine.unavailable):
            reason = engine.unavailable if engine else "no trigger item ran"
            reporter.write_line(f"skilltrigger: trigger tests did not run: {reason}", yellow=True)
        self._report_budget(reporter)
        if self.report is not None and self.report.has_results:
            from pytest_skilltrigger.reports.terminal import summary_lines

            reporter.write_sep("=", "skill trigger summary")
            for line in summary_lines(self.report):
                reporter.write_line(line)
        for change in self.regressions:
            reporter.write_line(
                f"REGRESSED {change.skill}: {change.query!r} ({change.before} -> {change.after})"
            )
        for change in self.improvements:
            reporter.write_line(
                f"improved {change.skill}: {change.query!r} ({change.before} -> {change.after})"
            )
        for line in self.gate_failures:
            reporter.write_line(f"GATE FAILED {line}", red=True)

    def _report_budget(self, reporter: Any) -> None:
        if not self.targets:
            return
        from pytest_skilltrigger.model.prices import format_usd

        routed = [r for items in self.routing_results.values() for _e, r, _ok in items.values()]
        over_budget = sum(1 for r in [*self.results.all_results(), *routed] if r.over_budget)
        if over_budget:
            reporter.write_line(
                f"skilltrigger: the cost budget ({format_usd(self.settings.budget_usd)}) was "
                "reached; "
                f"{over_budget} queries were skipped without a call",
                yellow=True,
            )


class LocalController(Controller, ItemRunner):
    """A plain run: runs every item in this process and reports on them."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Before any item: make the items' runs as message batches (``--trigger-batch``),
        or start them live, so many are in flight at once."""
        if self.config.option.collectonly:
            return
        if self.targets and self.settings.batch:
            from pytest_skilltrigger.plugin.batch_runs import requests_of_items

            self.engine.run_batches(requests_of_items(session.items, self.engine.plan))
        self.submit_ahead(session.items)

    def upcoming(self, item: Any) -> list[pytest.Item]:
        return []  # every item's runs started with the run loop


def junit_properties(result: QueryResult) -> list[tuple[str, Any]]:
    """An item's numbers as junitxml properties (``chosen`` as JSON text: junitxml writes
    ``str(value)``, which for a dict would be Python's repr)."""
    import json

    return [
        ("trigger_rate", round(result.trigger_rate, 4)),
        ("triggers", result.triggers),
        ("runs", result.runs),
        ("chosen", json.dumps(dict(result.chosen), sort_keys=True, ensure_ascii=False)),
    ]


def warn_at(config: pytest.Config, path: str, text: str) -> None:
    """A configuration warning located at the file it is about (a SKILL.md), not at this
    module: as ``Config.issue_config_time_warning`` does it, with pytest's warning filters
    (``-W``, ``filterwarnings``) applied, but with an explicit location."""
    import warnings

    from _pytest.config import apply_warning_filters

    if config.pluginmanager.is_blocked("warnings"):
        return
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always", pytest.PytestConfigWarning)
        apply_warning_filters(
            config.getini("filterwarnings"), config.known_args_namespace.pythonwarnings or []
        )
        warnings.warn_explicit(pytest.PytestConfigWarning(text), None, filename=path, lineno=1)
    if records:
        config.hook.pytest_warning_recorded.call_historic(
            kwargs={
                "warning_message": records[0],
                "when": "config",
                "nodeid": "",
                "location": (path, 1, "SKILL.md"),
            }
        )
