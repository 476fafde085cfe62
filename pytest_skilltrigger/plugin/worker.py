"""The xdist worker's role."""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin.items import SamplingItem, TriggerRunError
from pytest_skilltrigger.plugin.running import ItemRunner
from pytest_skilltrigger.plugin.xdist_queue import upcoming_items

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.share import ProcessShare


class DistWorker(ItemRunner):
    """An xdist worker: runs the items handed to it and stores nothing (the controller
    stores what the reports carry); starts the runs of the items queued behind the current
    one, and keeps only its share of the session's runs in flight and of its budget."""

    @cached_property
    def workerinput(self) -> dict[str, Any]:
        """What xdist and the controller told this worker."""
        found: dict[str, Any] = getattr(self.config, "workerinput", {})
        return found

    @cached_property
    def share(self) -> ProcessShare:  # type: ignore[override]
        """This worker's place among the session's workers."""
        from pytest_skilltrigger.plugin.xdist_exchange import share_of

        return share_of(self.workerinput)

    _runs_ahead_read = False
    _runs_ahead_missing: str | None = None

    def start_runs(self, items: list[pytest.Item]) -> None:
        """Before the first submission, take the runs the controller made ahead in message
        batches (``--trigger-batch``): the items they were made for then make no call."""
        if not self._runs_ahead_read:
            from pytest_skilltrigger.plugin.xdist_exchange import RUNS_AHEAD_KEY

            self._runs_ahead_read = True
            path = self.workerinput.get(RUNS_AHEAD_KEY)
            if path and not self.engine.no_backend:
                self._take_runs_ahead(str(path))
        if self._runs_ahead_missing:
            raise TriggerRunError(self._runs_ahead_missing)
        super().start_runs(items)

    def _take_runs_ahead(self, path: str) -> None:
        if not os.path.exists(path):
            # a worker on another host, which cannot see the controller's files: running
            # the items live would pay again for what the batches made
            self._runs_ahead_missing = (
                f"the controller's batch runs ({path}) are not readable here; "
                "--trigger-batch needs workers on the controller's host"
            )
            return
        from pytest_skilltrigger.engine.exchange import SessionExchange
        from pytest_skilltrigger.plugin.xdist_exchange import read_runs_ahead

        SessionExchange(self.engine).import_runs_ahead(read_runs_ahead(path), self.share.count)

    def finish(self, session: pytest.Session) -> None:
        """Tell the controller how many CLI runs were in flight here (it has the terminal
        and writes the JSON)."""
        engine = self.started_engine
        load = engine.load() if engine is not None else None
        output = getattr(self.config, "workeroutput", None)
        if load is not None and load.most_in_flight and output is not None:
            from pytest_skilltrigger.plugin.xdist_exchange import LOAD_KEY

            output[LOAD_KEY] = load.to_dict()

    def upcoming(self, item: SamplingItem) -> list[pytest.Item]:
        return upcoming_items(item)
