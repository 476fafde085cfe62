"""The plugin object: one per session, registered at configure. Its methods are the hooks
every process needs, and each hands its work to the process's strategy (:mod:`.strategy`,
:mod:`.control`); the terminal is the reporter's (:mod:`.reporter`), xdist's controller hooks
another plugin's (:mod:`.xdist`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin import wire
from pytest_skilltrigger.plugin.selection import OpenPaths

if TYPE_CHECKING:
    from pytest_skilltrigger.model.outcome import TriggerCheck
    from pytest_skilltrigger.plugin.items import RoutingFile, SkillFile
    from pytest_skilltrigger.plugin.strategy import Strategy


class SkillTriggerPlugin:
    """The session's hooks and the ``skill_trigger`` fixture."""

    def __init__(self, strategy: Strategy) -> None:
        self.strategy = strategy
        skills = strategy.skills
        self._files = {*skills.by_skill_md, *skills.by_routing_path}  # the files of items
        config = strategy.config
        self._open = OpenPaths(skills.files, config.getini("norecursedirs"))

    @pytest.hookimpl(tryfirst=True)  # before pytest's own norecursedirs answer
    def pytest_ignore_collect(self, collection_path: Any) -> bool | None:
        """Enter the folders on the way to the skills in play (``.claude`` among them),
        whatever ``norecursedirs`` says, and nothing else inside them."""
        return self._open.ignored(os.path.abspath(str(collection_path)))

    @pytest.hookimpl(tryfirst=True)  # before xdist starts its workers and pytest's header
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        try:
            self.strategy.start(session)
        except BaseException:  # pytest then skips sessionfinish: let nothing run on or stay
            self.strategy.abandon()
            raise

    def pytest_collect_file(
        self, file_path: Any, parent: pytest.Collector
    ) -> SkillFile | RoutingFile | None:
        path = os.path.abspath(str(file_path))
        runner = self.strategy.item_runner() if path in self._files else None
        return runner.collect_file(file_path, parent) if runner is not None else None

    @pytest.hookimpl(trylast=True)  # after -k, -m and --deselect chose
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Deselect the items a change, a shard or a merge leaves out."""
        narrowing = self.strategy.narrowing
        if narrowing is not None:
            narrowing.select(config, items)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self.strategy.before_items(session)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        runner = self.strategy.item_runner(made_only=True)
        if runner is not None:
            runner.attach(item, call, report)
        return report

    @pytest.hookimpl(tryfirst=True)  # before junitxml, pytest-html and users' hooks read it
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not (self.strategy.skills.targets or wire.carries(report)):
            return  # a project's own test: nothing of ours to take
        taker = self.strategy.result_taker()
        if taker is not None:
            taker.take(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Finish this process's part, then stop sampling."""
        try:
            self.strategy.finish(session)
        finally:
            self.strategy.session_engine.close()

    @pytest.fixture
    def skill_trigger(self, request: pytest.FixtureRequest) -> Callable[..., TriggerCheck]:
        """``skill_trigger(path, query, runs=None, threshold=None)`` -> rate, triggers, runs,
        triggered, chosen; shares the session's backend, store, concurrency and budget."""
        runner = self.strategy.item_runner()
        if runner is None:  # the xdist controller runs no test
            raise RuntimeError("skill_trigger is for the processes that run tests")
        nodeid = request.node.nodeid
        return lambda *args, **kwargs: runner.check(*args, nodeid=nodeid, **kwargs)
