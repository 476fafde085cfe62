"""The controller's roles: hooks and pytest's terminal, around the pytest-free end of session.

:class:`LocalController` is a plain run (it also runs the items);
:class:`~pytest_skilltrigger.plugin.dist_controller.DistController` is the xdist controller.
What they do with results, and at the end of the session, is
:class:`~pytest_skilltrigger.conclusion.session_end.SessionEnd`'s: gathering the typed results,
the improvement rounds and SKILL.md, the report, its files, the gates and the baseline. Here
are only the hooks that feed it and the lines pytest's terminal shows. Only a controller
writes files.
"""

from __future__ import annotations

import os
import threading
from functools import cached_property
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from pytest_skilltrigger.plugin import options, pytest_internals, wire
from pytest_skilltrigger.plugin.role import Role, warn_at
from pytest_skilltrigger.plugin.running import ItemRunner

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.outputs import Outputs
    from pytest_skilltrigger.conclusion.session_end import Conclusion, SessionEnd
    from pytest_skilltrigger.engine.estimate import Estimate
    from pytest_skilltrigger.engine.load_governor import LoadReport
    from pytest_skilltrigger.engine.session import Notice, TriggerSession
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.optimizer.drafting import Draft
    from pytest_skilltrigger.reports.terminal import TerminalLine
    from pytest_skilltrigger.skills.catalog import Found, Target

HTML_PLUGIN = "skilltrigger-html"
_LOG_LOCK = threading.Lock()


GATE_FAILED = "gate failed"  # the word pytest's last line counts a failed gate under


class Controller(Role):
    """What both controllers do with results, whoever ran the items."""

    #: the eval sets drafted this session (``--draft-eval-set``), as written
    drafted: tuple[Draft, ...] = ()

    def __init__(self, config: pytest.Config) -> None:
        # (workers run with the arguments and rootdir the controller settled: checked here)
        options.check_values_not_taken_for_paths(config)
        export = options.export_plugin_eval(config)  # before the targets: they may draft
        super().__init__(config)
        self.conclusion: Conclusion | None = None
        self.html = None
        if not self.targets:
            return
        if export is not None:
            self._export_plugin_eval(export)
        self.end.check_inputs()
        for target in self.targets:
            for warning in target.warnings:  # shown in the warnings summary, also with -q
                warn_at(config, target.skill.skill_md, warning)
        manager = config.pluginmanager
        if manager.hasplugin("html") and config.getoption("htmlpath", None):
            from pytest_skilltrigger.plugin.html import HtmlColumns

            gathered = self.end.gathered
            self.html = HtmlColumns(
                gathered.result_of,
                lambda: gathered.routing_tables,
                str(config.invocation_params.dir),
            )
            manager.register(self.html, HTML_PLUGIN)

    def _export_plugin_eval(self, folder: str) -> NoReturn:
        """``--export-plugin-eval``: every selected skill's eval set as ``claude plugin
        eval`` cases in ``folder``, each checked before the first is written; then the
        session ends without a call."""
        from pytest_skilltrigger.conclusion.outputs import export_plugin_eval

        pytest.exit(export_plugin_eval(self.targets, folder), returncode=0)

    def find_targets(self, paths: list[str]) -> Found:
        """The skills in play; with ``--draft-eval-set`` first drafts (and writes) an eval
        set for each that has none, so they are collected and run in this session. Drafting
        is a controller's work, done once, before xdist starts any worker."""
        found = super().find_targets(paths)
        if not self.draft or self.config.option.collectonly:
            return found
        from pytest_skilltrigger.optimizer.drafting import draft_and_write, draft_jobs

        jobs = draft_jobs(self.draft, found.missing, found.targets, self.installed)
        if not jobs:
            return found
        # a bad output path or baseline is an error before any draft is paid for (the
        # checks that need every skill's eval set come after, in check_inputs)
        self.outputs.check()
        if self.gates.baseline_path:
            from pytest_skilltrigger.reports.analysis import load_baseline

            load_baseline(self.gates.baseline_path)
        model = options.improve_model(self.config)
        self.drafted = tuple(draft_and_write(self.engine, jobs, model))
        return super().find_targets(paths)

    @cached_property
    def outputs(self) -> Outputs:
        """The files this session writes (only a controller writes)."""
        from pytest_skilltrigger.conclusion.outputs import Outputs

        return Outputs(
            **options.outputs_fields(self.config),
            step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
            store_path=self.settings.active_store,
        )

    @cached_property
    def end(self) -> SessionEnd:
        """The end of the session, made with the skills (or when the fixture first reports)."""
        from pytest_skilltrigger.conclusion.session_end import EndOptions, SessionEnd

        base = str(self.config.invocation_params.dir)
        options = EndOptions(self.optimize, self.gates, self.outputs, base)
        return SessionEnd(self.targets, self.routing_sets, self.settings, options)

    @pytest.hookimpl(tryfirst=True)  # before junitxml, pytest-html and users' hooks read it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Decode an item's result once as its report arrives; its numbers become the
        report's ``user_properties`` (and the teardown's, which junitxml reads)."""
        from_teardown = report.when == "teardown"
        if from_teardown and (found := self._gathered_result(report.nodeid)) is not None:
            report.user_properties.extend(_properties(found[1]))
        for record in wire.decode(report):
            phase = "checks" if isinstance(record, wire.CheckRecord) else "items"
            self.take_worker_result(record.context_key, record.result, phase)
            if isinstance(record, wire.ItemRecord):
                self._add_item(report, record)
            elif isinstance(record, wire.RoutingRecord):
                self.end.gathered.add_routing(
                    record.path, record.index, record.result, record.model
                )

    def _gathered_result(self, nodeid: str) -> tuple[Target, QueryResult] | None:
        return self.end.gathered.result_of(nodeid) if self.targets else None

    def _add_item(self, report: pytest.TestReport, record: wire.ItemRecord) -> None:
        """Keep a trigger item's result under its skill; its numbers go on the report."""
        gathered = self.end.gathered
        target = gathered.add_item(
            report.nodeid, record.skill_md, record.index, record.result, record.model
        )
        if target is None:  # a worker that read its skills elsewhere (xdist --tx ...//chdir)
            return
        report.user_properties.extend(_properties(record.result))
        self._said_waiting(record.result)
        if self.html is not None:
            self.html.add_extras(report, target, record.index, record.result)

    def take_worker_result(self, context_key: str | None, result: QueryResult, phase: str) -> None:
        """Take in a result a worker sampled: it is paid for and stored here (nothing to do
        when this process sampled it)."""

    def finish(self, session: pytest.Session) -> None:
        """The end of the session (the report also when only the ``skill_trigger`` fixture
        made calls: its totals say what they cost)."""
        if not self.targets and self.started_engine is None:
            return
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        conclusion = self.conclusion = self.end.finish(
            self.started_engine, interrupted=interrupted, log=self._log
        )
        if conclusion.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif conclusion.gate_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if conclusion.gate_failures:
            # pytest's last line counts what its stats hold: "10 passed, 1 gate failed", not a
            # green "10 passed" on a session that exits 1
            reporter = self.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.stats.setdefault(GATE_FAILED, []).append(conclusion)

    # -- the terminal ----------------------------------------------------------------------
    #: the header's estimate of the session's calls (the rate limit's notice times them)
    planned: Estimate | None = None
    _item_running = False  # an item runs in this process now (its output is captured)
    _waited = 0.0  # what the items' runs waited for the rate limit, so far
    _waiting_said = float("-inf")

    def notice(self, notice: Notice) -> None:
        """A notice from the engine. One from another thread while an item runs waits for
        the item's end: its output is captured until then, and the line would be lost."""
        from pytest_skilltrigger.reports.terminal import notice_line

        line = notice_line(notice, self.planned)
        if self._item_running and threading.current_thread() is not threading.main_thread():
            with _LOG_LOCK:
                self._notices.append(line)
        else:
            self._log(line)

    @cached_property
    def _notices(self) -> list[str]:
        return []

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._item_running = True

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self._item_running = False
        with _LOG_LOCK:
            lines, self._notices[:] = list(self._notices), []
        for line in lines:
            self._log(line)

    def _said_waiting(self, result: QueryResult) -> None:
        """Every half a minute or so, how long the runs have waited for the rate limit."""
        import time

        self._waited += sum(o.waited for o in result.outcomes)
        now = time.monotonic()
        if self._waited >= 1.0 and now - self._waiting_said >= 30.0:
            self._waiting_said = now
            self._log(
                f"skilltrigger: runs are waiting on the rate limit: {self._waited:.0f}s so far"
            )

    def _log(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        with _LOG_LOCK:  # a matrix's batches report from a thread each
            # after the last progress mark (``[100%]``) the cursor is still on that line,
            # which write_line does not know under -q: start a line of our own
            if pytest_internals.line_in_progress(reporter):
                reporter.write("\n")
            reporter.write_line(line)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if not self.targets:
            return []
        from pytest_skilltrigger.reports.terminal import (
            not_collected_lines,
            reading_lines,
            untested_lines,
        )
        from pytest_skilltrigger.skills.skill import reading_note

        not_collected = [(n.folder, n.reason) for n in self.not_collected]
        skills = [t.skill for t in self.targets] + list(self.untested)
        notes = [(s.skill_md, note) for s in skills if (note := reading_note(s))]
        return (
            self._header_lines()
            + reading_lines(notes)
            + untested_lines([s.id for s in self.untested])
            + not_collected_lines(not_collected, str(config.invocation_params.dir))
        )

    def _header_lines(self) -> list[str]:
        from pytest_skilltrigger.reports.terminal import header_lines

        engine = self.started_engine  # made at session start (not when only collecting)
        if engine is None or engine.no_backend:
            return header_lines(len(self.targets), self.settings, None)
        return self._header(engine) + self._load_header(engine)

    def _header(self, engine: TriggerSession) -> list[str]:
        """The header of a session with a backend: what it runs and may cost."""
        from pytest_skilltrigger.plugin.item_requests import requests_of_session
        from pytest_skilltrigger.reports.terminal import header_lines

        requests = requests_of_session(self, engine.plan)
        estimate = engine.estimate(requests)
        if estimate is not None and self.optimize is not None:
            from pytest_skilltrigger.optimizer.spend_bound import rounds_bound

            estimate = estimate.with_rounds(
                *rounds_bound(self.targets, self.routing_sets, self.settings, self.optimize)
            )
        self.planned = estimate
        return header_lines(
            len(self.targets), self.settings, engine.context_label, estimate, self.drafted
        )

    @staticmethod
    def _load(engine: TriggerSession | None) -> LoadReport | None:
        """How many runs the claude-code backend keeps in flight (None: another backend)."""
        return engine.load() if engine is not None else None

    def _load_header(self, engine: TriggerSession) -> list[str]:
        """What the claude-code backend's runs in flight start at, and why."""
        from pytest_skilltrigger.reports.terminal import load_header_line

        load = self._load(engine)
        return [load_header_line(load)] if load is not None else []

    def _load_summary(self) -> list[TerminalLine]:
        """How many of its runs were in flight, here or in the xdist workers (none: no line)."""
        from pytest_skilltrigger.reports.terminal import TerminalLine, load_summary_line

        load = self.end.load(self.started_engine)
        if load is None or not load.most_in_flight:
            return []
        return [TerminalLine(load_summary_line(load))]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.config.option.collectonly:
            return
        if not self.targets and self.conclusion is None:
            return
        lines = self.end.status_lines(self.started_engine)
        if self.conclusion is not None:
            lines += self.conclusion.terminal_lines()
        lines += self._load_summary()
        for line in lines:
            if line.separator:
                terminalreporter.write_sep("=", line.text)
            else:
                terminalreporter.write_line(line.text, **({line.style: True} if line.style else {}))


class LocalController(Controller, ItemRunner):
    """A plain run: runs every item in this process and reports on them."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Before any item: make the items' runs as message batches (``--trigger-batch``),
        or start them live, so many are in flight at once."""
        if self.config.option.collectonly:
            return
        if self.targets and self.settings.batch:
            from pytest_skilltrigger.plugin.item_requests import requests_of_items

            self.engine.sample_ahead(requests_of_items(session.items, self.engine.plan))
        self.start_runs(session.items)

    def upcoming(self, item: Any) -> list[pytest.Item]:
        return []  # every item's runs started with the run loop


def _properties(result: QueryResult) -> list[tuple[str, Any]]:
    from pytest_skilltrigger.conclusion.gathered import junit_properties

    return junit_properties(result)
