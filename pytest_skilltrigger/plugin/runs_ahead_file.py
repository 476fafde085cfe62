"""The runs the xdist controller made ahead in message batches, on their way to the workers.

A worker's settings are fixed when it starts, before any batch has ended, so the runs reach
it through a JSON file the controller writes in a private temporary folder (its path travels
in ``workerinput``) before it hands out the first item, and removes at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

WORKER_KEY = "skilltrigger_runs_ahead"  # workerinput: where the controller's runs will be


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
