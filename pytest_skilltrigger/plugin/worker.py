"""The xdist worker's role."""

from __future__ import annotations

import os

import pytest

from pytest_skilltrigger.plugin.batch_runs import WORKER_KEY, read_batch_runs_file
from pytest_skilltrigger.plugin.items import SamplingItem, TriggerRunError
from pytest_skilltrigger.plugin.running import ItemRunner
from pytest_skilltrigger.plugin.xdist_queue import upcoming_items


class DistWorker(ItemRunner):
    """An xdist worker: runs the items handed to it and stores nothing (the controller
    stores what the reports carry); starts the runs of the items queued behind the current
    one, and keeps only its share of the session's requests in flight and of its budget."""

    writes_store = False

    @property
    def share(self) -> tuple[int, int]:
        """This worker's place among the session's workers: ``gw3`` of 4 is ``(3, 4)``."""
        info = self.config.workerinput
        workerid = str(info.get("workerid", "gw0"))
        index = int(workerid[2:]) if workerid[2:].isdigit() else 0
        return index, max(1, int(info.get("workercount", 1)))

    _batch_runs_read = False
    _batch_missing: str | None = None

    def submit_ahead(self, items: list[pytest.Item]) -> None:
        """Before the first submission, take the runs the controller made in message batches
        (``--trigger-batch``): the items they were made for then make no call."""
        if not self._batch_runs_read:
            self._batch_runs_read = True
            path = self.config.workerinput.get(WORKER_KEY)
            if path and not self.engine.unavailable:
                if not os.path.exists(path):
                    # a worker on another host, which cannot see the controller's files:
                    # running the items live would pay again for what the batches made
                    self._batch_missing = (
                        f"the controller's batch runs ({path}) are not readable here; "
                        "--trigger-batch needs workers on the controller's host"
                    )
                else:
                    self.engine.import_batch_runs(read_batch_runs_file(path))
        if self._batch_missing:
            raise TriggerRunError(self._batch_missing)
        super().submit_ahead(items)

    def upcoming(self, item: SamplingItem) -> list[pytest.Item]:
        return upcoming_items(item)
