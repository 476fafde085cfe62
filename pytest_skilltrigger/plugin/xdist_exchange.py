"""What crosses between the xdist controller and its workers, on the pytest side.

The controller tells each worker (``workerinput``) how xdist distributes, where the rate
limits the workers share are kept, and where the runs it made ahead in message batches will
be. Those runs reach a worker through a JSON file the controller writes in a private
temporary folder before it hands out the first item (a worker's settings are fixed when it
starts, before any batch has ended); both folders are removed at the end. Each worker tells
the controller (``workeroutput``) how many CLI runs it kept in flight.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.share import ProcessShare

# workerinput keys
DIST_KEY = "skilltrigger_dist"  # the controller's --dist (xdist sets a worker's own to "no")
RUNS_AHEAD_KEY = "skilltrigger_runs_ahead"  # where the controller's runs made ahead will be
LIMITS_KEY = "skilltrigger_rate_limits"  # the file of the rate limits the workers share
# workeroutput key
LOAD_KEY = "skilltrigger_load"  # how many CLI runs the worker kept in flight


class RunsAheadFile:
    """The controller's runs for its workers: one JSON file in a private temporary folder."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="skilltrigger-ahead-")
        self.path = os.path.join(self.folder, "runs.json")

    def write(self, exported: dict[str, Any]) -> None:
        """Write the exported runs (``SessionExchange.export_runs_ahead``)."""
        from pytest_skilltrigger.support.atomic import atomic_write_text

        atomic_write_text(self.path, json.dumps(exported))

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def read_runs_ahead(path: str) -> dict[str, Any]:
    """The runs the controller exported, for the worker's engine to import."""
    with open(path, encoding="utf-8") as handle:
        exported: dict[str, Any] = json.load(handle)
    return exported


class SharedLimitsFile:
    """The rate limits the workers share, in a file of a private temporary folder."""

    def __init__(self) -> None:
        from pytest_skilltrigger.backends.api.rate_limit import shared_limits_file

        self.folder = tempfile.mkdtemp(prefix="skilltrigger-limits-")
        self.path = shared_limits_file(self.folder)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def share_of(workerinput: dict[str, Any]) -> ProcessShare:
    """A worker's place among the session's workers (``gw3`` of 4 is ``(3, 4)``), with the
    file of the rate limits they share."""
    from pytest_skilltrigger.engine.share import ProcessShare

    workerid = str(workerinput.get("workerid", "gw0"))
    index = int(workerid[2:]) if workerid[2:].isdigit() else 0
    count = max(1, int(workerinput.get("workercount", 1)))
    return ProcessShare(index, count, workerinput.get(LIMITS_KEY))
