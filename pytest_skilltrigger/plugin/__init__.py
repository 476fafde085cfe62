"""The pytest layer of pytest-skilltrigger, and its entry point (``pytest11``).

Every module that imports pytest lives in this subpackage. The configure hook registers one
role object for the process, whose methods are the hooks (see :mod:`.role`); the functions
here are only the hooks that must exist before a role does. (The ``skill_trigger`` fixture is
a method of the roles that run tests.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin import options

if TYPE_CHECKING:
    from pytest_skilltrigger.backends import BackendParts, TriggerBackend
    from pytest_skilltrigger.model.settings import Settings
    from pytest_skilltrigger.plugin.role import Role

ROLE_PLUGIN = "skilltrigger-role"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_skilltrigger.plugin import hookspecs  # only pytest: as cheap as this module

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


@pytest.hookimpl(trylast=True)  # a conftest's or another plugin's answer comes first
def pytest_skilltrigger_make_backend(
    name: str, settings: Settings, parts: BackendParts
) -> TriggerBackend | None:
    """The built-in backends, made through the hook as any other."""
    # the backends layer is imported only when a backend is made: a run without skills
    # never pays for it
    from pytest_skilltrigger.backends import builtin_backend

    return builtin_backend(name, settings, parts)


@pytest.hookimpl(trylast=True)  # after the cache plugin: the store's default lives there
def pytest_configure(config: pytest.Config) -> None:
    from pytest_skilltrigger.support.errors import InputError

    config.addinivalue_line("markers", "skill_trigger: a skill trigger test (pytest-skilltrigger)")
    try:
        role = _role_class(config)(config)
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(role, ROLE_PLUGIN)


def _role_class(config: pytest.Config) -> type[Role]:
    """The worker's role on an xdist worker, the distributing controller's when xdist will
    distribute (its own test, read the same way), else the plain run's."""
    if hasattr(config, "workerinput"):
        from pytest_skilltrigger.plugin.worker import DistWorker

        return DistWorker
    distributing = (
        config.pluginmanager.hasplugin("xdist")
        and config.getoption("dist", "no") != "no"
        and bool(config.getoption("tx", None))
        and not config.getoption("collectonly")
    )
    if distributing:
        from pytest_skilltrigger.plugin.dist_controller import DistController

        return DistController
    from pytest_skilltrigger.plugin.controller import LocalController

    return LocalController
