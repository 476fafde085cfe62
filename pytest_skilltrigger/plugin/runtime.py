"""The plugin's state for one pytest process, and the work behind each hook.

``plugin.py`` only forwards hooks here. This module is the one place that knows both pytest
and the engine: it loads targets at configure time (bad input becomes a usage error before
anything runs), feeds items' queries to the sampler ahead of time so many runs are in flight,
turns results into plain values on reports, and on the controller gathers them into the JSON
report and the terminal summary.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
from concurrent.futures import Future
from typing import Any

import pytest

from pytest_skilltrigger.engine.cost import load_prices
from pytest_skilltrigger.engine.outcome import QueryResult
from pytest_skilltrigger.engine.sampler import BUDGET_REACHED, SamplingPlan
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.optimizer.driver import OptimizationDriver
from pytest_skilltrigger.plugin import options
from pytest_skilltrigger.plugin.html import PytestHtmlHooks
from pytest_skilltrigger.plugin.items import (
    BackendRequiredError,
    SkillFile,
    TriggerCheck,
    TriggerItem,
    TriggerRunError,
)
from pytest_skilltrigger.reports.baseline import Change, compare
from pytest_skilltrigger.reports.json_report import build_report, write_report
from pytest_skilltrigger.reports.markdown import render_markdown
from pytest_skilltrigger.reports.summary import SessionResults
from pytest_skilltrigger.reports.terminal import summary_lines
from pytest_skilltrigger.skills.catalog import Target, load_context, load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.support.errors import InputError

RUNTIME_KEY = pytest.StashKey["PluginRuntime"]()
RUNTIME_HOOKS = "skilltrigger-runtime"
HTML_HOOKS = "skilltrigger-html"


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class PluginRuntime:
    """Everything the hooks of one process share."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.worker = is_worker(config)
        given, ini = options.skill_paths(config)
        self.given_paths = given
        self.ini_paths = ini = self._ini_in_play(given, ini)
        cache = getattr(config, "cache", None)
        default_store = None
        if cache is not None:
            default_store = os.path.join(str(cache.mkdir("skilltrigger")), "results.sqlite")
        settings = options.settings_from_config(config, default_store)
        if self.worker and settings.budget_usd is not None:
            # every worker keeps its own guard: each gets an equal share of the budget
            share = settings.budget_usd / max(1, int(config.workerinput.get("workercount", 1)))
            settings = dataclasses.replace(settings, budget_usd=share)
        self.settings = settings
        load_prices(settings.prices_path)  # a bad price file is bad input: fail now
        self.optimize = options.optimize_options(config)
        self.gates = options.gates(config)
        self.gate_failures: list[str] = []
        self.regressions: list[Change] = []
        self.improvements: list[Change] = []
        self.targets: list[Target] = []
        if given or ini:
            self.targets = load_targets(
                given + [p for p in ini if p not in given],
                eval_set=config.getoption("eval_set"),
                description=config.getoption("skill_description"),
            )
        self.by_skill_md = {t.skill.skill_md: t for t in self.targets}
        if self.targets and not self.worker:
            self._open_store()
        self.session: TriggerSession | None = None
        self.results = SessionResults(order=[t.skill.skill_md for t in self.targets])
        self.report: dict[str, Any] | None = None  # built once, at the end of the session
        self._submitted: dict[str, Future[QueryResult]] = {}

    def _ini_in_play(self, given: list[str], ini: list[str]) -> list[str]:
        """The skills of the ``skill_paths`` ini folders this run will collect.

        Only those are loaded (see :meth:`_adjust_args`): a broken eval file under ``skills/``
        must not stop ``pytest tests/test_app.py`` or ``pytest skills/other``, which never
        collect it.
        """
        if not _explicit(self.config):
            return [] if given else ini  # --skill-path alone collects only those skills
        in_play: list[str] = []
        for chosen in _arg_paths(self.config.args):
            for path in ini:
                if _within(path, chosen):  # the argument holds the whole ini folder
                    found = path
                elif _within(chosen, path):  # the argument is inside it: just that skill
                    found = _skill_folder(chosen, path)
                else:
                    continue
                if found not in in_play:
                    in_play.append(found)
        return in_play

    def _open_store(self) -> None:
        """Create (or check) the result store now, in this process only, so that a path
        that cannot hold it is a usage error, and xdist workers find it ready to read."""
        path = self.settings.store_path
        if self.settings.cache_mode == "off" or not path:
            return
        try:
            ResultStore(path).close()
        except (OSError, sqlite3.Error) as exc:
            raise InputError(path, f"cannot use as the result store: {exc}") from None

    # -- configure ---------------------------------------------------------------------
    @classmethod
    def configure(cls, config: pytest.Config) -> PluginRuntime:
        config.addinivalue_line(
            "markers", "skill_trigger: a skill trigger test (pytest-skilltrigger)"
        )
        try:
            runtime = cls(config)
        except InputError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[RUNTIME_KEY] = runtime
        runtime._adjust_args()
        if not runtime.worker:
            for target in runtime.targets:
                for warning in target.warnings:  # shown in the warnings summary, also with -q
                    config.issue_config_time_warning(pytest.PytestConfigWarning(warning), 2)
        return runtime

    def _adjust_args(self) -> None:
        """Make pytest collect the skills.

        ``--skill-path`` alone collects only those skills; with explicit paths it adds them.
        Skills from the ``skill_paths`` ini key join a run without explicit paths (``pytest``)
        and follow pytest's own selection otherwise (``pytest tests/test_x.py`` leaves them).
        """
        explicit = _explicit(self.config)
        if self.given_paths:
            args = list(self.config.args) if explicit else []
            extra = self.given_paths
        elif self.ini_paths and not explicit:
            args = list(self.config.args)
            extra = self.ini_paths
        else:
            return
        covered = _arg_paths(args)
        for path in extra:
            if not any(_within(path, c) for c in covered):
                args.append(path)
        self.config.args[:] = args

    def start_session(self) -> None:
        """Create the engine session lazily: only when there are trigger items to run."""
        if self.session is None:
            self.session = TriggerSession(self.settings, write_store=not self.worker)

    # -- collection --------------------------------------------------------------------
    def collect_file(self, file_path: Any, parent: pytest.Collector) -> SkillFile | None:
        target = self.by_skill_md.get(os.path.abspath(str(file_path)))
        if target is None:
            return None
        node = SkillFile.from_parent(parent, path=file_path)
        node.target = target
        node.runtime = self
        return node

    # -- running -----------------------------------------------------------------------
    def begin_run(self, session: pytest.Session) -> None:
        """Plain run, before any item: start every item's runs. (An xdist worker starts its
        items' runs as they are handed to it, see :func:`upcoming_items`.)"""
        if not self.worker and not self.config.option.collectonly:
            self.prefetch(session.items)

    def register(self, hooks: object) -> None:
        """Register the hooks that receive no ``config`` (bound to this runtime), and the
        pytest-html columns when an HTML report is being written."""
        manager = self.config.pluginmanager
        manager.register(hooks, RUNTIME_HOOKS)
        if manager.hasplugin("html") and self.config.getoption("htmlpath", None):
            manager.register(PytestHtmlHooks(), HTML_HOOKS)

    def unregister(self) -> None:
        manager = self.config.pluginmanager
        for name in (RUNTIME_HOOKS, HTML_HOOKS):
            hooks = manager.get_plugin(name)
            if hooks is not None:
                manager.unregister(hooks)

    def prefetch(self, items: list[pytest.Item]) -> None:
        """Submit the queries of these items so they run concurrently ahead of the items."""
        trigger_items = [i for i in items if isinstance(i, TriggerItem)]
        if not trigger_items:
            return
        self.start_session()
        assert self.session is not None
        if self.session.unavailable:
            return
        for item in trigger_items:
            if item.nodeid not in self._submitted:
                self._submitted[item.nodeid] = self.session.submit(
                    item.target.context(), item.entry
                )

    def check_available(self) -> None:
        """Skip (or, with --trigger-require-backend, error) when no backend can run."""
        self.start_session()
        assert self.session is not None
        if not self.session.unavailable:
            return
        if self.gates.require_backend:
            raise BackendRequiredError(
                f"{self.session.unavailable} (--trigger-require-backend is set)"
            )
        pytest.skip(self.session.unavailable)

    def check(self, path: str, query: str, runs: int | None = None,
              threshold: float | None = None) -> TriggerCheck:
        """The ``skill_trigger`` fixture's work: sample one query for one skill."""
        self.check_available()
        assert self.session is not None
        plan = SamplingPlan(
            self.settings.runs_per_query if runs is None else runs,
            self.settings.threshold if threshold is None else threshold,
            self.settings.curtail,
        )
        if plan.runs < 1 or not 0.0 <= plan.threshold <= 1.0:
            raise ValueError("runs must be >= 1 and threshold within 0..1")
        try:
            context = load_context(os.path.abspath(path))
        except InputError as exc:
            raise ValueError(str(exc)) from None
        entry = EvalEntry(index=-1, query=query, should_trigger=True, extra={})
        result = self.session.submit(context, entry, plan).result()
        if result.skipped:
            pytest.skip(result.skipped)
        if result.errors:
            raise TriggerRunError(result.error)
        return TriggerCheck.from_result(result)

    def result_for(self, item: TriggerItem) -> QueryResult:
        """Wait for the item's result (submitting it and its queued followers if needed)."""
        self.prefetch([item, *upcoming_items(item)])
        assert self.session is not None
        self.check_available()
        result = self._submitted[item.nodeid].result()
        sampler = self.session.sampler
        if sampler is not None and sampler.fatal:
            item.session.shouldstop = f"stopping: {sampler.fatal}"
        return result

    def make_report(self, item: pytest.Item, report: pytest.TestReport) -> None:
        """Put the item's numbers on its report as plain values (they cross xdist)."""
        if not isinstance(item, TriggerItem) or item.result is None:
            return
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        result = item.result
        properties = [
            ("trigger_rate", round(result.trigger_rate, 4)),
            ("triggers", result.triggers),
            ("runs", result.runs),
            # JSON text: junitxml writes str(value), which for a dict would be Python's repr
            ("chosen", json.dumps(dict(result.chosen), sort_keys=True, ensure_ascii=False)),
        ]
        report.user_properties.extend(properties)
        # later reports copy the item's list: junitxml reads them from the teardown report
        item.user_properties.extend(properties)
        assert self.session is not None
        target = item.target
        report.skilltrigger = {  # type: ignore[attr-defined]
            "skill_name": target.name,
            "skill_path": target.skill.path,
            "skill_md": target.skill.skill_md,
            "description": target.description,
            "eval_path": target.eval_set.path,
            "index": item.entry.index,
            "extra": item.entry.extra,
            "context_key": self.session.sampler.context_key(target.context())
            if self.session.sampler
            else None,
            "result": result.to_dict(),
        }

    def log_report(self, report: pytest.TestReport) -> None:
        """Controller side: gather records; count and store the runs workers made."""
        record = getattr(report, "skilltrigger", None)
        if record is None or self.worker:
            return
        self.results.add(record)
        if getattr(report, "node", None) is None:
            return  # made in this process: its sampler has counted and stored its runs
        self.start_session()
        assert self.session is not None
        result = QueryResult.from_dict(record["result"])
        if self.session.guard is not None:  # one budget for the session, workers' calls too
            self.session.guard.add(result.usage, result.calls)
        store = self.session.store
        if store is None or not record.get("context_key") or self.session.backend is None:
            return
        store.record(
            self.session.backend.name,
            self.session.backend.model or "",
            record["context_key"],
            result.query,
            result.outcomes,
        )

    # -- end of session ----------------------------------------------------------------
    def finish(self, session: pytest.Session) -> None:
        """Controller: improvement rounds, reports and gates. Everyone: stop sampling."""
        try:
            if not self.worker and self.targets:
                interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
                extra = self._optimize(session) if self.optimize and not interrupted else None
                report = self.report = self.build_report(extra)
                path = options.json_path(self.config)
                if path:
                    write_report(path, report)
                self._apply_gates(session, report)
        finally:
            if self.session is not None:
                self.session.close(wait=False)

    def _apply_gates(self, session: pytest.Session, report: dict[str, Any]) -> None:
        """Accuracy floor, baseline comparison and the GitHub step summary."""
        gates = self.gates
        if gates.min_accuracy is not None:
            for skill in report["skills"]:
                s = skill["summary"]
                counted = s["total"] - s["skipped"]
                if not counted:
                    continue
                accuracy = s["passed"] / counted
                if accuracy < gates.min_accuracy:
                    self.gate_failures.append(
                        f"{skill['skill_name']}: query accuracy {accuracy:.2f} "
                        f"({s['passed']}/{counted}) is below --trigger-min-accuracy "
                        f"{gates.min_accuracy:.2f}"
                    )
        if gates.baseline is not None:
            self.regressions, self.improvements = compare(gates.baseline, report)
            if gates.fail_on_regression and self.regressions:
                self.gate_failures.append(
                    f"{len(self.regressions)} regression(s) against the baseline"
                )
        if self.gate_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary_file and report["skills"]:
            with open(summary_file, "a", encoding="utf-8") as handle:
                handle.write(render_markdown(report, gates.min_accuracy))

    def _optimize(self, session: pytest.Session) -> dict[str, dict[str, Any]] | None:
        """Improvement rounds on the controller, after every worker is done."""
        self.start_session()
        assert self.session is not None and self.optimize is not None
        log = self._log
        if self.session.unavailable:
            log(f"skilltrigger: not optimising: {self.session.unavailable}")
            return None
        initial = {
            key: {i: QueryResult.from_dict(row["result"]) for i, row in skill.rows.items()}
            for key, skill in self.results.skills.items()
        }
        driver = OptimizationDriver(self.session, self.optimize, log)
        extra = driver.run(self.targets, initial)
        if driver.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        return extra

    def _log(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

    def build_report(self, extra_by_skill: dict[str, dict[str, Any]] | None = None) -> dict:
        session = self.session
        return build_report(
            self.results,
            backend=session.backend_name if session else None,
            model=session.model if session else None,
            runs_per_query=self.settings.runs_per_query,
            threshold=self.settings.threshold,
            extra_by_skill=extra_by_skill,
            prices=session.prices if session else None,
        )

    def header_lines(self) -> list[str]:
        if not self.targets:
            return []
        lines = [
            f"skilltrigger: {len(self.targets)} skill(s), {self.settings.runs_per_query} runs "
            f"per query, threshold {self.settings.threshold}, backend {self.settings.backend}"
        ]
        return lines

    def terminal_summary(self, reporter: Any) -> None:
        if self.worker:
            return
        session = self.session
        if self.config.option.collectonly:
            return
        if self.targets and (session is None or session.unavailable):
            reason = session.unavailable if session else "no trigger item ran"
            reporter.write_line(f"skilltrigger: trigger tests did not run: {reason}", yellow=True)
        over_budget = sum(
            1
            for skill in self.results.skills.values()
            for row in skill.rows.values()
            if (row["result"].get("skipped") or "").startswith(BUDGET_REACHED)
        )
        if over_budget:
            reporter.write_line(
                f"skilltrigger: the cost budget (${self.settings.budget_usd:.4f}) was reached; "
                f"{over_budget} queries were skipped without a call",
                yellow=True,
            )
        if not self.report or not self.report["skills"]:
            return
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


def upcoming_items(item: pytest.Item) -> list[pytest.Item]:
    """Items this process will run next, so their runs can start now.

    In a plain run that is every item after this one. Under xdist it is the worker's queue of
    assigned items, which xdist keeps on its worker plugin (read under its lock).
    """
    session = item.session
    if not is_worker(item.config):
        return []  # plain runs prefetch everything at the start of the run loop
    for plugin in item.config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):
            with queue.lock() as pending:
                indices = [i for i in pending if isinstance(i, int)]
            return [session.items[i] for i in indices if i < len(session.items)]
    return []


def runtime_of(config: pytest.Config) -> PluginRuntime | None:
    return config.stash.get(RUNTIME_KEY, None)


def _explicit(config: pytest.Config) -> bool:
    """True when the command line named what to run (pytest's own selection applies)."""
    return config.args_source == pytest.Config.ArgsSource.ARGS


def _arg_paths(args: list[str]) -> list[str]:
    """The file system paths of pytest arguments (``path::node`` ids included), absolute."""
    return [os.path.abspath(a.split("::")[0]) for a in args]


def _within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _skill_folder(chosen: str, root: str) -> str:
    """The skill folder holding ``chosen`` (a file or folder below the ini folder ``root``),
    or ``chosen`` itself when it is a folder of skills."""
    folder = chosen if os.path.isdir(chosen) else os.path.dirname(chosen)
    probe = folder
    while _within(probe, root):
        if os.path.isfile(os.path.join(probe, "SKILL.md")):
            return probe
        if probe == root:
            break
        probe = os.path.dirname(probe)
    return folder
