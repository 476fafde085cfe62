"""The controllers: the strategies of the process that has the terminal and the files.

:class:`LocalRun` runs every item and reports on them; :class:`DistControl` is the xdist
controller, which runs no item and takes in what the workers' reports carry. Both draft
missing eval sets, take in the results, end the session and register the reporter. Also
here: which strategy a process gets, and ``--trigger-export-plugin-eval``, a controller's command.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin import options, pytest_internals
from pytest_skilltrigger.plugin.reporter import SkillTriggerReporter, TerminalLines
from pytest_skilltrigger.plugin.setup import SessionEngine, Setup
from pytest_skilltrigger.plugin.strategy import DistWork, SessionStopped, Strategy
from pytest_skilltrigger.plugin.xdist import (
    DIST_KEY,
    LIMITS_KEY,
    LOAD_KEY,
    RUNS_AHEAD_KEY,
    SPENT_KEY,
    RunsAheadFile,
    SharedLimitsFile,
)
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.outputs import Outputs
    from pytest_skilltrigger.conclusion.session_end import Conclusion, SessionEnd
    from pytest_skilltrigger.engine.exchange import SessionExchange
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.optimizer.drafting import Draft
    from pytest_skilltrigger.plugin.html import HtmlColumns
    from pytest_skilltrigger.plugin.results import ResultTaker, TakeWorkerResult
    from pytest_skilltrigger.skills.catalog import Found

HTML_PLUGIN = "skilltrigger-html"
REPORTER_PLUGIN = "skilltrigger-reporter"
XDIST_PLUGIN = "skilltrigger-xdist"


class Controlling(Strategy):
    """A process with the terminal and the files: it drafts missing eval sets, takes in the
    results, ends the session and reports."""

    #: the eval sets drafted this session (``--trigger-draft``), as written
    drafted: tuple[Draft, ...] = ()

    def __init__(self, setup: Setup, lines: TerminalLines) -> None:
        self.lines = lines
        super().__init__(setup, SessionEngine(setup, notices=lines.notice))
        if self.skills.targets:
            self.end.check_inputs()
            for finding in self.end.lint:  # in the warnings summary too, at the eval file
                text = f"{finding.message} [{finding.rule}]"
                line = f"line {finding.line}: " if finding.line else ""
                pytest_internals.warn_at_file(self.config, finding.path, line + text)
            for target in self.skills.targets:  # shown in the warnings summary, also with -q
                for warning in target.warnings:
                    pytest_internals.warn_at_file(self.config, target.skill.skill_md, warning)

    def _found(self) -> Found | None:
        """The skills in play; with ``--trigger-draft`` first drafts (and writes) an eval
        set for each that has none, so they are collected and run in this session. Drafting
        is a controller's work, done once, before xdist starts any worker."""
        found = super()._found()
        if found is None or not self.setup.draft or self.config.option.collectonly:
            return found
        # deferred: drafting loads the optimizer, which only a drafting session needs
        from pytest_skilltrigger.optimizer.drafting import draft_and_write, draft_jobs

        jobs = draft_jobs(self.setup.draft, found.missing, found.targets, self.setup.installed)
        if not jobs:
            return found
        # a bad output path or baseline is an error before any draft is paid for (the
        # checks that need every skill's eval set come after, in check_inputs)
        from pytest_skilltrigger.conclusion.session_end import check_before_drafts

        check_before_drafts(self.outputs, self.setup.gates)
        model = options.improve_model(self.config)
        self.drafted = tuple(draft_and_write(self.session_engine.engine, jobs, model))
        return super()._found()

    def _start(self, session: pytest.Session) -> None:
        """The engine made (see :meth:`Strategy._start`), the controls run before any item:
        a session that cannot see a trigger stops here, before the items' spend."""
        super()._start(session)
        problem = self._control_problem()
        if problem:
            raise SessionStopped(
                f"skilltrigger: {problem}. Nothing was spent on the items "
                "(--trigger-controls=off skips the controls)"
            )

    def stopped(self, reason: str) -> None:
        """Write the JSON, JUnit XML, step summary and comment of a stopped session."""
        if self.skills.targets:
            self.end.stop(reason, self.session_engine.started)

    def _control_problem(self) -> str | None:
        """Why the controls say the items cannot be trusted (None: they can, or none ran)."""
        engine = self.session_engine.started
        if engine is None or engine.no_backend or not self.skills.targets:
            return None  # (drafts may start the engine and still leave no skill to test)
        if not self._items_will_call(engine):
            return None  # nothing will be asked: the controls would be paid for nothing
        models = self.setup.settings.models or (None,)
        first = self.skills.targets[0].context()
        return engine.check_controls([first.on_model(m) for m in models])

    def _items_will_call(self, engine: TriggerSession) -> bool:
        """Whether some item of the session will make a call (not one whose skill Claude
        Code does not list, nor one its stored runs decide); True when that cannot be told."""
        # deferred: the items load the model layer, only with a skill in play
        from pytest_skilltrigger.plugin.items import ItemAxes, SessionRequests

        axes = ItemAxes.of(self.setup.settings)
        keep = self.narrowing.keeps_file if self.narrowing is not None else None
        requests = SessionRequests(self.skills, axes).of_session(engine.plan, keep)
        estimate = engine.estimate(requests)
        return estimate is None or estimate.most_calls > 0

    @cached_property
    def outputs(self) -> Outputs:
        """The files this session writes (only a controller writes)."""
        from pytest_skilltrigger.conclusion.outputs import Outputs  # deferred: with the skills

        xmlpath = getattr(self.config.option, "xmlpath", None)  # pytest's --junit-xml
        return Outputs(
            **options.outputs_fields(self.config),
            step_summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
            store_path=self.setup.settings.active_store,
            junit_path=os.path.abspath(xmlpath) if xmlpath else None,
        )

    @cached_property
    def end(self) -> SessionEnd:
        """The end of the session, made with the skills (or when the fixture first reports)."""
        # deferred: the conclusion layer, only with a skill in play
        from pytest_skilltrigger.conclusion.session_end import EndOptions, SessionEnd

        setup, skills, narrowing = self.setup, self.skills, self.narrowing
        base = str(self.config.invocation_params.dir)
        end_options = EndOptions(setup.optimize, setup.gates, self.outputs, base)
        if narrowing is not None:
            shard = str(narrowing.shard) if narrowing.shard is not None else None
            end_options = replace(
                end_options, changes=narrowing.changes, shard=shard, parts=narrowing.parts
            )
        return SessionEnd(skills.targets, skills.routing_sets, setup.settings, end_options)

    @cached_property
    def html(self) -> HtmlColumns | None:
        """pytest-html's columns, when it writes a report."""
        manager = self.config.pluginmanager
        if not (manager.hasplugin("html") and self.config.getoption("htmlpath", None)):
            return None
        # optional: pytest-html's columns, only when it writes a report
        from pytest_skilltrigger.plugin.html import HtmlColumns

        gathered = self.end.gathered
        base = str(self.config.invocation_params.dir)
        return HtmlColumns(gathered.result_of, lambda: gathered.routing_tables, base)

    @cached_property
    def taker(self) -> ResultTaker:
        from pytest_skilltrigger.plugin.results import ResultTaker  # deferred: with the skills

        return ResultTaker(
            self.end, self.session_engine, html=self.html, take_worker_result=self._worker_results()
        )

    def result_taker(self) -> ResultTaker:
        return self.taker

    def _worker_results(self) -> TakeWorkerResult | None:
        """Where results other processes sampled are paid for and stored (nowhere: this
        process samples them all)."""
        return None

    @property
    def conclusion(self) -> Conclusion | None:
        """What the session's end concluded, once it has."""
        taken: ResultTaker | None = self.__dict__.get("taker")
        return taken.conclusion if taken is not None else None

    def plugins(self) -> list[tuple[object, str]]:
        plugins: list[tuple[object, str]] = [
            (SkillTriggerReporter(self, self.lines), REPORTER_PLUGIN)
        ]
        if self.skills.targets and self.html is not None:
            plugins.append((self.html, HTML_PLUGIN))
        return plugins

    def finish(self, session: pytest.Session) -> None:
        """The end of the session (the report also when only the ``skill_trigger`` fixture
        made calls: its totals say what they cost)."""
        if self.skills.targets or self.session_engine.started is not None:
            self.taker.finish(session, log=self.lines.write)


class LocalRun(Controlling):
    """A plain run: runs every item in this process and reports on them."""

    def before_items(self, session: pytest.Session) -> None:
        """Before any item: make the items' runs as message batches (``--trigger-batch``),
        or start them live, so many are in flight at once."""
        if self.config.option.collectonly or not self.skills.targets or self.merging:
            return  # (the skill_trigger fixture's checks start when a test makes them)
        engine = self.session_engine.engine
        if self.setup.settings.batch:
            # deferred: the items load the model layer, only with a skill in play
            from pytest_skilltrigger.plugin.items import requests_of_items

            engine.sample_ahead(requests_of_items(session.items, engine.plan))
        self.runner.start_runs(session.items)


class DistControl(Controlling):
    """The xdist controller: runs no item; counts and stores what the workers sampled, and
    with ``--trigger-batch`` makes the collected items' runs ahead, as message batches,
    before xdist hands out the first item."""

    runs_items = False

    def __init__(self, setup: Setup, lines: TerminalLines) -> None:
        super().__init__(setup, lines)
        running = bool(self.skills.targets) and not self.config.option.collectonly
        settings = setup.settings
        self.runs_ahead_file: RunsAheadFile | None = None
        self.limits_file: SharedLimitsFile | None = None
        if running and settings.batch:
            self.runs_ahead_file = RunsAheadFile()
        if running and settings.rate_limits.enabled:
            self.limits_file = SharedLimitsFile()  # the workers keep one rate limit
        self._made_ahead = False

    def plugins(self) -> list[tuple[object, str]]:
        # deferred: xdist's part, only under xdist
        from pytest_skilltrigger.plugin.xdist import XdistControlHooks

        return [*super().plugins(), (XdistControlHooks(self), XDIST_PLUGIN)]

    @cached_property
    def exchange(self) -> SessionExchange:
        """The engine's side of what crosses between this controller and its workers."""
        # deferred: the engine, only with a skill in play
        from pytest_skilltrigger.engine.exchange import SessionExchange

        return SessionExchange(self.session_engine.engine)

    def _start(self, session: pytest.Session) -> None:
        """Make the engine, and with it each skill's request (a captured Claude Code
        context is captured and stored here once), before any worker needs it."""
        super()._start(session)
        engine = self.session_engine.started
        if engine is not None and not engine.no_backend:
            engine.prepare([t.context() for t in self.skills.targets])

    def worker_input(self) -> dict[str, Any]:
        """What each worker is told: how xdist distributes (a worker's own ``--dist`` reads
        "no": the queue peek must know about ``worksteal``), where the shared rate limits
        and the runs made ahead (``--trigger-batch``) will be, and what this process spent
        already."""
        told: dict[str, Any] = {DIST_KEY: self.config.getoption("dist", "load")}
        engine = self.session_engine.started
        if engine is not None:  # the controls and drafts were paid from the same budget
            told[SPENT_KEY] = self.exchange.spent_before_workers()
        if self.limits_file is not None:
            told[LIMITS_KEY] = self.limits_file.path
        if self.runs_ahead_file is not None:
            told[RUNS_AHEAD_KEY] = self.runs_ahead_file.path
        return told

    def collected(self, ids: list[str]) -> None:
        """Once the first worker has collected, and before xdist hands out any item: make
        the collected items' runs as message batches, for every worker to read."""
        if self.runs_ahead_file is None or self._made_ahead:
            return
        self._made_ahead = True
        # deferred: the items load the model layer, only with a skill in play
        from pytest_skilltrigger.plugin.items import ItemAxes, SessionRequests

        engine = self.session_engine.engine
        requests = SessionRequests(self.skills, ItemAxes.of(self.setup.settings)).of_ids(
            ids, self.config.rootpath, engine.plan
        )
        made = engine.sample_ahead(requests)
        self.runs_ahead_file.write(self.exchange.export_runs_ahead(made))

    def worker_down(self, output: dict[str, Any]) -> None:
        """Take a worker's report of the CLI runs it kept in flight (a crashed worker has
        none)."""
        data = output.get(LOAD_KEY)
        if data:
            self.end.gathered.add_worker_load(data)

    def finish(self, session: pytest.Session) -> None:
        try:
            if self.session_engine.started is not None:
                self._say_new_limits(at_end=True)  # what the last second's results learnt
            super().finish(session)
        finally:
            self._remove_shared()

    def abandon(self) -> None:
        super().abandon()
        self._remove_shared()

    def _remove_shared(self) -> None:
        for shared in (self.runs_ahead_file, self.limits_file):
            if shared is not None:
                shared.remove()

    def _worker_results(self) -> TakeWorkerResult:
        return self._take_worker_result

    def _take_worker_result(self, context_key: str | None, result: QueryResult, phase: str) -> None:
        self.exchange.take_worker_result(context_key, result, phase)
        self._say_new_limits()

    def _say_new_limits(self, at_end: bool = False) -> None:
        if self.limits_file is not None:
            for notice in self.exchange.new_limits(self.limits_file.path, at_end):
                self.lines.notice(notice)


def strategy_for(config: pytest.Config) -> Strategy:
    """The worker's strategy on an xdist worker, the distributing controller's when xdist
    will distribute (its own test, read the same way), else the plain run's."""
    if hasattr(config, "workerinput"):
        return DistWork(Setup(config))
    # (workers run with the arguments and rootdir the controller settled: checked here)
    options.check_values_not_taken_for_paths(config)
    distributing = (
        config.pluginmanager.hasplugin("xdist")
        and config.getoption("dist", "no") != "no"
        and bool(config.getoption("tx", None))
        and not config.getoption("collectonly")
    )
    kind = DistControl if distributing else LocalRun
    return kind(Setup(config), TerminalLines(config))


def export_cases(config: pytest.Config) -> int:
    """Write every selected skill's cases (each checked before the first is written) and
    say in one line what was written; a bad input is a one-line usage error."""
    # deferred: the conclusion layer, only with a skill in play
    from pytest_skilltrigger.conclusion.outputs import export_plugin_eval

    try:
        folder = options.export_plugin_eval(config)
        options.check_values_not_taken_for_paths(config)
        setup = Setup(config)
        paths = setup.selection.paths
        targets = setup.find(paths).targets if paths else []
        if folder is None or not targets:
            raise InputError(
                "--trigger-export-plugin-eval", "no skill with an eval set was selected"
            )
        message = export_plugin_eval(targets, folder)
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    sys.stdout.write(message + "\n")
    return 0
