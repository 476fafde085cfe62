"""A look at the items an xdist worker will run next, so their runs can start now.

xdist keeps a worker's assigned items in a queue that is not public API
(:func:`~.pytest_internals.xdist_worker_queue`): where it cannot be read the peek gives up
(no runs started ahead, same verdicts, only slower).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_skilltrigger.plugin import pytest_internals


def upcoming_items(item: pytest.Item) -> list[pytest.Item]:
    """The items queued after ``item`` on this worker (empty when the queue cannot be read,
    and under ``--dist worksteal``: an item queued here may be handed to another worker, which
    would sample it again)."""
    queue = _queue(item.config)
    if queue is None:
        return []
    session = item.session
    with queue.lock() as pending:
        indices = [i for i in pending if isinstance(i, int)]
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
    from pytest_skilltrigger.plugin.xdist_exchange import DIST_KEY

    workerinput = getattr(config, "workerinput", None) or {}
    return str(workerinput.get(DIST_KEY) or config.getoption("dist", "load"))
