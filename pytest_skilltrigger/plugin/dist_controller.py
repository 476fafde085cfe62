"""The xdist controller's role, registered only when xdist distributes the run.

It runs no item and takes in what the workers' reports carry: their calls count against the
one budget, and their runs are stored here. With ``--trigger-batch`` it makes the collected
items' runs ahead, as message batches, before xdist hands out the first item.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin.controller import Controller
from pytest_skilltrigger.plugin.xdist_exchange import (
    DIST_KEY,
    LIMITS_KEY,
    LOAD_KEY,
    RUNS_AHEAD_KEY,
    RunsAheadFile,
    SharedLimitsFile,
)

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.exchange import SessionExchange
    from pytest_skilltrigger.model.outcome import QueryResult


class DistController(Controller):
    """The xdist controller: runs no item; counts and stores what workers sampled."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self.runs_ahead_file: RunsAheadFile | None = None
        self.limits_file: SharedLimitsFile | None = None
        running = self.targets and not config.option.collectonly
        if running and self.settings.batch:
            self.runs_ahead_file = RunsAheadFile()
        if running and self.settings.rate_limits.enabled:
            self.limits_file = SharedLimitsFile()  # the workers keep one rate limit
        self._made_ahead = False

    @cached_property
    def exchange(self) -> SessionExchange:
        """The engine's side of what crosses between this controller and its workers."""
        from pytest_skilltrigger.engine.exchange import SessionExchange

        return SessionExchange(self.engine)

    @pytest.hookimpl(tryfirst=True)  # before xdist starts the workers
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Make the engine, and with it each skill's request (a captured Claude Code
        context is captured and stored here once), before any worker needs it."""
        super().pytest_sessionstart(session)
        engine = self.started_engine
        if engine is not None and not engine.no_backend:
            engine.prepare([t.context() for t in self.targets])

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Tell each worker how xdist distributes (a worker's own ``--dist`` reads "no": the
        queue peek must know about ``worksteal``) and where the runs made ahead will be
        (``--trigger-batch``)."""
        node.workerinput[DIST_KEY] = self.config.getoption("dist", "load")
        if self.limits_file is not None:
            node.workerinput[LIMITS_KEY] = self.limits_file.path
        if self.runs_ahead_file is not None:
            node.workerinput[RUNS_AHEAD_KEY] = self.runs_ahead_file.path

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Once the first worker has collected, and before xdist hands out any item: make
        the collected items' runs as message batches, for every worker to read."""
        if self.runs_ahead_file is None or self._made_ahead:
            return
        self._made_ahead = True
        from pytest_skilltrigger.plugin.item_requests import requests_of_ids

        requests = requests_of_ids(self, ids, self.engine.plan)
        made = self.engine.sample_ahead(requests)
        self.runs_ahead_file.write(self.exchange.export_runs_ahead(made))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Take a worker's report of the CLI runs it kept in flight (a crashed worker has
        none)."""
        data = getattr(node, "workeroutput", {}).get(LOAD_KEY)
        if data:
            from pytest_skilltrigger.engine.load_governor import LoadReport

            self.end.gathered.worker_loads.append(LoadReport.from_dict(data))

    def finish(self, session: pytest.Session) -> None:
        try:
            super().finish(session)
        finally:
            for shared in (self.runs_ahead_file, self.limits_file):
                if shared is not None:
                    shared.remove()

    def take_worker_result(self, context_key: str | None, result: QueryResult, phase: str) -> None:
        self.exchange.take_worker_result(context_key, result, phase)
        if self.limits_file is not None:
            self._announce_limits(self.limits_file.path)

    def _announce_limits(self, path: str) -> None:
        """The rate limits the workers learnt, said once each (the workers have no terminal):
        read from the file they share."""
        from pytest_skilltrigger.backends.api.rate_limit import (
            FileLimits,
            RateLimitNotice,
            limits_known,
        )

        for cls, limits in limits_known(FileLimits(path)).items():
            if cls not in self._announced:
                self._announced.add(cls)
                self.notice(RateLimitNotice(cls, limits))

    @cached_property
    def _announced(self) -> set[str]:
        return set()
