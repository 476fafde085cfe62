"""The peek at an xdist worker's queue: written for xdist 3 only (any other version, or a
version it cannot read, gives no peek), never under ``--dist worksteal``, the queue found
once per session and read afresh on every peek (only item indices, only those in range)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import execnet.gateway_base
import pytest
import xdist
from xdist import remote as xdist_remote  # (its TestQueue is no test class of ours)

from pytest_skilltrigger.plugin import pytest_internals
from pytest_skilltrigger.plugin.xdist import upcoming_items


def real_queue(entries: Iterable[object]) -> xdist_remote.TestQueue:
    """xdist's own queue class, as a worker's WorkerInteractor holds it."""
    queue = xdist_remote.TestQueue(execnet.gateway_base.get_execmodel("thread"))
    for entry in entries:
        queue.put(entry)  # type: ignore[arg-type]
    return queue


class Plugins:
    """A plugin manager whose plugins a test sets; counts the lookups."""

    def __init__(self, *plugins: object) -> None:
        self.plugins = list(plugins)
        self.lookups = 0

    def get_plugins(self) -> list[object]:
        self.lookups += 1
        return list(self.plugins)


def worker_item(*plugins: object, dist: str = "load", items: int = 6) -> Any:
    """An item of a worker session of ``items`` items (the first one), whose config holds a
    real stash, the ``--dist`` mode and ``plugins``."""
    config = SimpleNamespace(
        stash=pytest.Stash(),
        pluginmanager=Plugins(*plugins),
        getoption=lambda name, default=None: dist if name == "dist" else default,
    )
    session = SimpleNamespace(items=[f"item-{i}" for i in range(items)])
    return SimpleNamespace(config=config, session=session)


def interactor(*entries: object) -> SimpleNamespace:
    return SimpleNamespace(torun=real_queue(entries))


def test_the_installed_xdist_is_one_the_peek_was_written_for() -> None:
    assert int(xdist.__version__.split(".")[0]) in pytest_internals.XDIST_MAJORS
    assert pytest_internals.XDIST_SUPPORTED is True


@pytest.mark.parametrize(
    "version,supported",
    [
        ("3.8.0", True),
        ("3.0", True),
        ("4.0.0", False),
        ("2.5.0", False),
        ("dev", False),
        ("", False),
        ("v3.1", False),
    ],
)
def test_the_version_guard_accepts_only_known_majors(
    monkeypatch: pytest.MonkeyPatch, version: str, supported: bool
) -> None:
    monkeypatch.setattr(xdist, "__version__", version)
    assert pytest_internals.xdist_supported() is supported


def test_an_xdist_without_a_version_or_not_importable_is_not_supported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(xdist, "__version__")
    assert pytest_internals.xdist_supported() is False
    monkeypatch.setitem(sys.modules, "xdist", None)  # import xdist raises ImportError
    assert pytest_internals.xdist_supported() is False


def test_an_unsupported_xdist_gives_no_peek(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pytest_internals, "XDIST_SUPPORTED", False)
    plugin = interactor(2, 3, 4)
    item = worker_item(plugin)
    assert upcoming_items(item) == []
    assert item.config.pluginmanager.lookups == 0  # not even looked for
    with plugin.torun.lock() as pending:
        assert list(pending) == [2, 3, 4]  # and left as it was


def test_the_queued_items_are_the_upcoming_ones_in_queue_order() -> None:
    plugin = interactor(4, 2, 3, xdist_remote.Marker.SHUTDOWN)
    item = worker_item(object(), plugin)
    assert upcoming_items(item) == ["item-4", "item-2", "item-3"]
    with plugin.torun.lock() as pending:
        assert list(pending) == [4, 2, 3, xdist_remote.Marker.SHUTDOWN]  # a peek takes nothing


def test_indices_past_the_session_items_are_left_out() -> None:
    item = worker_item(interactor(1, 6, 99, 5), items=6)
    assert upcoming_items(item) == ["item-1", "item-5"]


def test_worksteal_gives_no_peek() -> None:
    """Under --dist worksteal a queued item may be stolen by another worker, which would
    sample it again: nothing is peeked, however full the queue."""
    item = worker_item(interactor(1, 2, 3), dist="worksteal")
    assert upcoming_items(item) == []
    assert item.config.pluginmanager.lookups == 0


def test_no_plugin_with_a_lockable_queue_gives_no_peek() -> None:
    not_a_queue = SimpleNamespace(torun=[1, 2, 3])  # no lock(): not xdist's queue
    item = worker_item(object(), SimpleNamespace(torun=None), not_a_queue)
    assert upcoming_items(item) == []


def test_the_queue_is_found_once_and_read_on_every_peek() -> None:
    plugin = interactor(1, 2)
    item = worker_item(plugin)
    assert upcoming_items(item) == ["item-1", "item-2"]
    assert plugin.torun.get() == 1  # the worker takes its next item
    plugin.torun.put(5)
    item.config.pluginmanager.plugins = [interactor(3)]  # never looked at again
    assert upcoming_items(item) == ["item-2", "item-5"]
    assert item.config.pluginmanager.lookups == 1


def test_no_queue_found_is_remembered_too() -> None:
    item = worker_item(object())
    assert upcoming_items(item) == []
    item.config.pluginmanager.plugins = [interactor(1)]
    assert upcoming_items(item) == []
    assert item.config.pluginmanager.lookups == 1


CONFTEST = """
import json
import time

import pytest

from pytest_skilltrigger.plugin.xdist import upcoming_items


def worker_queue(config):
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):
            return queue
    raise AssertionError("no xdist queue on this worker")


@pytest.fixture
def peek(request):
    def take():
        queue = worker_queue(request.config)
        deadline = time.monotonic() + 20
        while True:
            with queue.lock() as pending:  # (xdist's lock is reentrant)
                queued = [i for i in pending if isinstance(i, int)]
                if queued or time.monotonic() > deadline:
                    upcoming = [i.nodeid for i in upcoming_items(request.node)]
                    break
            time.sleep(0.01)
        items = request.session.items
        data = {"queued": [items[i].nodeid for i in queued], "upcoming": upcoming,
                "me": request.node.nodeid}
        with open("peek.json", "w") as f:
            json.dump(data, f)
    return take
"""

TESTS = """
import pytest

@pytest.mark.parametrize("n", range(12))
def test_n(n, peek):
    if n == 0:
        peek()
"""


@pytest.mark.parametrize("dist", ["load", "worksteal"])
def test_a_real_worker_peeks_its_queue_except_under_worksteal(
    pytester: pytest.Pytester, dist: str
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_queue=TESTS)
    result = pytester.runpytest_subprocess("-n", "1", "--dist", dist, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=12)
    peek = json.loads((pytester.path / "peek.json").read_text())
    assert peek["queued"], "the worker had nothing queued behind its first item"
    assert peek["me"] not in peek["queued"]
    assert peek["upcoming"] == (peek["queued"] if dist == "load" else [])
