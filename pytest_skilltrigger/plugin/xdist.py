"""Everything of pytest-xdist's on the pytest side: what crosses between the controller and
its workers, the peek at a worker's queue, and the controller's hooks.

The controller tells each worker (``workerinput``) how xdist distributes, where the rate
limits the workers share are kept, and where the runs it made ahead in message batches will
be. Those runs reach a worker through a JSON file the controller writes in a private
temporary folder before it hands out the first item (a worker's settings are fixed when it
starts, before any batch has ended); both folders are removed at the end. Each worker tells
the controller (``workeroutput``) how many CLI runs it kept in flight.

A worker starts the runs of the items queued behind its current one. xdist keeps that queue
in a structure that is not public API (:func:`~.pytest_internals.xdist_worker_queue`): where
it cannot be read the peek gives up (no runs started ahead, same verdicts, only slower).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_skilltrigger.plugin import pytest_internals

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.engine.share import ProcessShare

# workerinput keys
DIST_KEY = "skilltrigger_dist"  # the controller's --dist (xdist sets a worker's own to "no")
RUNS_AHEAD_KEY = "skilltrigger_runs_ahead"  # where the controller's runs made ahead will be
LIMITS_KEY = "skilltrigger_rate_limits"  # the file of the rate limits the workers share
SPENT_KEY = "skilltrigger_spent_usd"  # what the controller spent before the workers start
# workeroutput key
LOAD_KEY = "skilltrigger_load"  # how many CLI runs the worker kept in flight


class RunsAheadFile:
    """The controller's runs for its workers: one JSON file in a private temporary folder."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="skilltrigger-ahead-")
        self.path = os.path.join(self.folder, "runs.json")

    def write(self, exported: dict[str, Any]) -> None:
        """Write the exported runs (``SessionExchange.export_runs_ahead``)."""
        # deferred: the atomic writer loads the interrupt guard, which a worker never needs
        from pytest_skilltrigger.support.atomic import atomic_write_text

        atomic_write_text(self.path, json.dumps(exported))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class RunsAheadReader:
    """A worker's side of the runs made ahead: before its first submission it takes them
    into its engine, so the items they were made for make no call."""

    def __init__(self, workerinput: dict[str, Any]) -> None:
        self.workerinput = workerinput
        self.path: str | None = workerinput.get(RUNS_AHEAD_KEY)
        self._read = False
        self._missing: str | None = None

    def take(self, engine: TriggerSession) -> None:
        """Import the runs once; raise when the controller's file cannot be read here."""
        if not self._read:
            self._read = True
            if self.path:
                self._take(engine, str(self.path))
        if self._missing:
            # deferred: the items load the model layer, only with a skill in play
            from pytest_skilltrigger.plugin.items import TriggerRunError

            raise TriggerRunError(self._missing)

    def _take(self, engine: TriggerSession, path: str) -> None:
        if not os.path.exists(path):
            # a worker on another host, which cannot see the controller's files: running
            # the items live would pay again for what the batches made
            self._missing = (
                f"the controller's batch runs ({path}) are not readable here; "
                "--trigger-batch needs workers on the controller's host"
            )
            return
        # deferred: the engine, only when a worker samples
        from pytest_skilltrigger.engine.exchange import SessionExchange

        with open(path, encoding="utf-8") as handle:
            exported: dict[str, Any] = json.load(handle)
        SessionExchange(engine).import_runs_ahead(exported, share_of(self.workerinput).count)


class SharedLimitsFile:
    """The rate limits the workers share, in a file of a private temporary folder."""

    def __init__(self) -> None:
        # deferred: the API backend, only when rate limits are shared
        from pytest_skilltrigger.backends.api.rate_limit import shared_limits_file

        self.folder = tempfile.mkdtemp(prefix="skilltrigger-limits-")
        self.path = shared_limits_file(self.folder)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def share_of(workerinput: dict[str, Any]) -> ProcessShare:
    """A worker's place among the session's workers (``gw3`` of 4 is ``(3, 4)``), with the
    file of the rate limits they share."""
    # deferred: the engine, only when a worker samples
    from pytest_skilltrigger.engine.share import ProcessShare

    workerid = str(workerinput.get("workerid", "gw0"))
    index = int(workerid[2:]) if workerid[2:].isdigit() else 0
    count = max(1, int(workerinput.get("workercount", 1)))
    spent = float(workerinput.get(SPENT_KEY) or 0.0)
    return ProcessShare(index, count, workerinput.get(LIMITS_KEY), spent)


# -- the worker's queue ------------------------------------------------------------------


def upcoming_items(item: pytest.Item) -> list[pytest.Item]:
    """The items queued after ``item`` on this worker (empty when the queue cannot be read,
    and under ``--dist worksteal``: an item queued here may be handed to another worker, which
    would sample it again)."""
    queue = _queue(item.config)
    if queue is None:
        return []
    session = item.session
    indices = pytest_internals.xdist_pending(queue)
    return [session.items[i] for i in indices if i < len(session.items)]


_QUEUE = pytest.StashKey[object]()


def _queue(config: pytest.Config) -> Any:
    """This worker's queue of assigned items, looked up once."""
    if _QUEUE not in config.stash:
        found = None
        if _dist(config) != "worksteal":
            found = pytest_internals.xdist_worker_queue(config)
        config.stash[_QUEUE] = found
    return config.stash[_QUEUE]


def _dist(config: pytest.Config) -> str:
    """How xdist distributes: as the controller said (a worker's own option reads "no")."""
    workerinput = getattr(config, "workerinput", None) or {}
    return str(workerinput.get(DIST_KEY) or config.getoption("dist", "load"))


# -- the controller's hooks -----------------------------------------------------------------
# On a plugin of their own, registered only when xdist distributes the run: the hook names
# are unknown to pytest without xdist.


class Distributing(Protocol):
    """What the controller's hooks hand their work to (the controller's strategy)."""

    def worker_input(self) -> dict[str, Any]: ...
    def collected(self, ids: list[str]) -> None: ...
    def worker_down(self, output: dict[str, Any]) -> None: ...


class XdistControlHooks:
    """Hands xdist's controller hooks to the controller's strategy."""

    def __init__(self, control: Distributing) -> None:
        self.control = control

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput.update(self.control.worker_input())

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.control.collected(ids)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.control.worker_down(getattr(node, "workeroutput", None) or {})
