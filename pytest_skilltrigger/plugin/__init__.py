"""The pytest layer of pytest-skilltrigger, and its entry point (``pytest11``).

Every module that imports pytest lives in this subpackage. The configure hook registers one
plugin object for the session (:mod:`.session`), which hands each hook to this process's
strategy (:mod:`.strategy`, :mod:`.control`), and the plugins the strategy needs beside it:
the terminal reporter, pytest-html's columns, xdist's controller hooks. The functions here
are only the hooks that must exist before those do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin import hookspecs, options

if TYPE_CHECKING:
    from pytest_skilltrigger.backends import BackendParts, TriggerBackend
    from pytest_skilltrigger.model.settings import Settings

PLUGIN = "skilltrigger-session"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(trylast=True)  # a conftest's or another plugin's answer comes first
def pytest_skilltrigger_make_backend(
    name: str, settings: Settings, parts: BackendParts
) -> TriggerBackend | None:
    """The built-in backends, made through the hook as any other."""
    # deferred: the backends layer is imported only when a backend is made, which a run
    # without skills never does
    from pytest_skilltrigger.backends import builtin_backend

    return builtin_backend(name, settings, parts)


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """``--trigger-export-plugin-eval`` and ``--trigger-harvest`` are commands of their own, as
    ``--markers`` is: each writes its file and ends, with no session, no worker and no call."""
    if options.value(config, "--trigger-harvest"):
        from pytest_skilltrigger.plugin.harvesting import harvest_command  # deferred

        return harvest_command(config)
    if not options.value(config, "--trigger-export-plugin-eval"):
        return None
    from pytest_skilltrigger.plugin.control import export_cases  # deferred: this command's

    return export_cases(config)


@pytest.hookimpl(trylast=True)  # after the cache plugin: the store's default lives there
def pytest_configure(config: pytest.Config) -> None:
    # deferred: the entry point loads for every pytest command (--version, --help too)
    from pytest_skilltrigger.plugin.control import strategy_for
    from pytest_skilltrigger.plugin.options import deprecated_names
    from pytest_skilltrigger.plugin.session import SkillTriggerPlugin
    from pytest_skilltrigger.support.errors import InputError

    config.addinivalue_line("markers", "skill_trigger: a skill trigger test (pytest-skilltrigger)")
    for said in deprecated_names(config):
        warning = pytest.PytestDeprecationWarning(f"pytest-skilltrigger: {said}")
        config.issue_config_time_warning(warning, stacklevel=2)
    try:
        strategy = strategy_for(config)
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(SkillTriggerPlugin(strategy), PLUGIN)
    for plugin, name in strategy.plugins():
        config.pluginmanager.register(plugin, name)
