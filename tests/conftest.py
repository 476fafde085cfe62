"""Shared fixtures for the plugin's own tests."""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Iterator

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import PROXY_VARIABLES, UNUSED_PLUGINS

pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose subprocess runs start without the plugins they never use."""
    original = pytester.runpytest_subprocess
    monkeypatch.setattr(
        pytester, "runpytest_subprocess", functools.partial(original, *UNUSED_PLUGINS)
    )
    inline = pytester.runpytest_inprocess  # an inner run keeps pytest's own order
    monkeypatch.setattr(
        pytester, "runpytest_inprocess", functools.partial(inline, "-p", "no:randomly")
    )
    return pytester


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesAPI]:
    """A fresh fake Messages API, with the SDK's environment pointed at it.

    Why via the environment: the plugin must work offline exactly as a user would configure
    it (ANTHROPIC_BASE_URL), and a stray ANTHROPIC_AUTH_TOKEN must not leak into the tests.
    """
    with FakeMessagesAPI() as api:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
        for name in PROXY_VARIABLES:  # a proxy from the developer's shell must not see them
            monkeypatch.delenv(name, raising=False)
        yield api


@pytest.fixture(autouse=True)
def _private_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The default result store lives in the user's cache folder: every test gets its own
    (pytester also gives each inner run a HOME of its own), never the developer's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("user-cache")))


@pytest.fixture(autouse=True)
def _own_signal_handlers() -> Iterator[None]:
    """Every test starts with the process's Ctrl-C and termination handlers as they were, and
    leaves them so: a test that installs one (a session's interrupt handling) must not change
    how the next one is interrupted, whatever ran before it in its process."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in kept.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


@pytest.fixture(autouse=True)
def _no_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite counts calls exactly and scripts its stand-ins per query: the controls run
    (two more queries a model) where a test asks for them with --trigger-controls=on
    (``tests/plugin/test_controls.py``)."""
    monkeypatch.setenv("SKILLTRIGGER_CONTROLS", "off")


@pytest.fixture(autouse=True)
def _no_claude_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--trigger-context auto`` captures Claude Code's request when ``claude`` is on PATH:
    the suite must behave the same on a developer's machine that has the CLI installed, so
    PATH loses the folders that hold one (the CLI tests pass the pinned binary explicitly)."""
    path = os.environ.get("PATH", "")
    kept = [d for d in path.split(os.pathsep) if not os.path.exists(os.path.join(d, "claude"))]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))


def pytest_configure(config: pytest.Config) -> None:
    """Register ``slow``: the tests that drive the real Claude Code CLI take tens of seconds,
    so they must be easy to deselect (``-m "not slow"``)."""
    config.addinivalue_line("markers", "slow: drives the real Claude Code CLI (-m 'not slow')")
