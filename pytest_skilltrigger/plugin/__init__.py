"""The pytest hooks of pytest-skilltrigger. Each one only delegates to the runtime."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.plugin import options
from pytest_skilltrigger.plugin.items import TriggerCheck
from pytest_skilltrigger.plugin.runtime import PluginRuntime, runtime_of


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


class RuntimeHooks:
    """Hooks that receive no ``config``: registered per configured runtime."""

    def __init__(self, runtime: PluginRuntime) -> None:
        self.runtime = runtime

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.runtime.log_report(report)


@pytest.hookimpl(trylast=True)  # after the cache plugin: the store's default lives there
def pytest_configure(config: pytest.Config) -> None:
    runtime = PluginRuntime.configure(config)
    runtime.register(RuntimeHooks(runtime))


def pytest_unconfigure(config: pytest.Config) -> None:
    runtime = runtime_of(config)
    if runtime:
        runtime.unregister()


def pytest_report_header(config: pytest.Config) -> list[str]:
    runtime = runtime_of(config)
    return runtime.header_lines() if runtime else []


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Any:
    runtime = runtime_of(parent.config)
    return runtime.collect_file(file_path, parent) if runtime else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    runtime = runtime_of(session.config)
    if runtime:
        runtime.begin_run(session)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    runtime = runtime_of(item.config)
    if runtime:
        runtime.make_report(item, report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    runtime = runtime_of(session.config)
    if runtime:
        runtime.finish(session)


@pytest.fixture
def skill_trigger(request: pytest.FixtureRequest) -> Callable[..., TriggerCheck]:
    """``skill_trigger(path, query, runs=None, threshold=None)`` -> rate, triggers, runs,
    triggered, chosen; shares the session's backend, store, concurrency and budget."""
    runtime = runtime_of(request.config)
    assert runtime is not None
    return runtime.check


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    runtime = runtime_of(config)
    if runtime:
        runtime.terminal_summary(terminalreporter)
