"""A pytest process's part in the session: the base of the three strategies, and the xdist
worker's.

The plugin object (:mod:`.session`) holds one strategy per process and hands each hook to
it, as pytest-cov's plugin hands its hooks to one controller per role: :class:`DistWork` on
an xdist worker, which runs the items handed to it and stores nothing; on the process with
the terminal, a controller (:mod:`.control`). A strategy's collaborators (the item runner,
the result taker, the session's end) are made by it on first use: a project that collects no
skill makes none of them.
"""

from __future__ import annotations

from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin.options import narrows
from pytest_skilltrigger.plugin.setup import SessionEngine, Setup
from pytest_skilltrigger.plugin.xdist import LOAD_KEY, RunsAheadReader, share_of, upcoming_items
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.plugin.narrowing import Narrowing
    from pytest_skilltrigger.plugin.results import ResultTaker
    from pytest_skilltrigger.plugin.running import ItemRunner
    from pytest_skilltrigger.plugin.setup import SkillsInPlay
    from pytest_skilltrigger.skills.catalog import Found


class SessionStopped(Exception):
    """The session stops at its start, its inputs being good (a control failed, no backend
    with ``--trigger-require-backend``): a controller writes its outputs saying why, then
    pytest ends with a usage error."""


class Strategy:
    """A process's part in the session: its skills in play and its engine."""

    def __init__(self, setup: Setup, session_engine: SessionEngine) -> None:
        self.setup = setup
        self.session_engine = session_engine
        self.skills: SkillsInPlay = setup.in_play(self._found())
        self.narrowing: Narrowing | None = None
        if self.skills.targets and narrows(setup.config):
            # deferred: the items' module, only with a skill in play
            from pytest_skilltrigger.plugin.narrowing import Narrowing

            self.narrowing = Narrowing.of(setup, self.skills)

    @property
    def merging(self) -> bool:
        """Whether the items' results come from the parts of a sharded run (no engine)."""
        return self.narrowing is not None and self.narrowing.parts is not None

    @property
    def config(self) -> pytest.Config:
        return self.setup.config

    def _found(self) -> Found | None:
        paths = self.setup.selection.paths
        return self.setup.find(paths) if paths else None

    #: whether this process runs items (the xdist controller runs none)
    runs_items = True

    def item_runner(self, *, made_only: bool = False) -> ItemRunner | None:
        """What runs this process's items (None: it runs none; with ``made_only``, none was
        needed yet: a project's own test's report then costs nothing)."""
        if not self.runs_items or (made_only and "runner" not in self.__dict__):
            return None
        return self.runner

    @cached_property
    def runner(self) -> ItemRunner:
        """This process's item runner, made on first use."""
        return item_runner_for(self)

    def result_taker(self) -> ResultTaker | None:
        """What takes in the items' results (None: the reports carry them elsewhere)."""
        return None

    def plugins(self) -> list[tuple[object, str]]:
        """The plugins this strategy needs beside the plugin object, with their names."""
        return []

    def start(self, session: pytest.Session) -> None:
        """Start the session's part here (see :meth:`_start`); one that stops says why in
        one line (and a controller in its outputs)."""
        try:
            self._start(session)
        except SessionStopped as stopped:
            self.stopped(str(stopped))
            raise pytest.UsageError(str(stopped)) from None

    def _start(self, session: pytest.Session) -> None:
        """With skills in play the engine is made now, before collection and the run loop:
        every later hook finds it ready (a run that only collects does without, as does a
        merge, which makes no call). Without a backend, ``--trigger-require-backend`` ends
        the session here with one line, instead of an error for every item."""
        if not self.skills.targets or self.config.option.collectonly or self.merging:
            return
        try:
            reason = self.session_engine.engine.no_backend
        except InputError as exc:  # a backend nobody makes: bad input, before any call
            raise pytest.UsageError(str(exc)) from None
        if reason and self.setup.gates.require_backend:
            raise SessionStopped(
                f"no backend can run the trigger tests: {reason} (--trigger-require-backend is set)"
            )

    def stopped(self, reason: str) -> None:
        """The session stopped at its start (a controller writes its outputs)."""

    def before_items(self, session: pytest.Session) -> None:
        """Before the first item: nothing, but where this process runs every item."""

    def finish(self, session: pytest.Session) -> None:
        """The end of this process's part of the session."""

    def abandon(self) -> None:
        """A session that stopped before its items (a control failed, bad input): stop
        sampling and remove what was made for the items."""
        self.session_engine.close()


def item_runner_for(strategy: Strategy, **how: Any) -> ItemRunner:
    """An item runner for the strategy's skills and engine (``how``: its keywords)."""
    # deferred: the items' module loads the model layer, which a project without skills
    # never needs
    from pytest_skilltrigger.plugin.running import ItemRunner, PartResults

    narrowing = strategy.narrowing
    if narrowing is not None and narrowing.parts is not None:
        how["results"] = PartResults(narrowing.parts)
    return ItemRunner(strategy.setup, strategy.skills, strategy.session_engine, **how)


class DistWork(Strategy):
    """An xdist worker: runs the items handed to it and stores nothing (the controller
    stores what the reports carry); starts the runs of the items queued behind the current
    one, and keeps only its share of the session's runs in flight and of its budget."""

    def __init__(self, setup: Setup) -> None:
        self.workerinput: dict[str, Any] = getattr(setup.config, "workerinput", {})
        share = partial(share_of, self.workerinput)
        super().__init__(setup, SessionEngine(setup, share=share))

    @cached_property
    def runner(self) -> ItemRunner:
        reader = RunsAheadReader(self.workerinput)
        # deferred: the items' module, only with a skill in play
        from pytest_skilltrigger.plugin.running import Feeding

        return item_runner_for(self, feeding=Feeding(upcoming_items, reader.take))

    def finish(self, session: pytest.Session) -> None:
        """Tell the controller how many CLI runs were in flight here (it has the terminal
        and writes the JSON)."""
        engine = self.session_engine.started
        load = engine.load() if engine is not None else None
        output = getattr(self.config, "workeroutput", None)
        if load is not None and load.most_in_flight and output is not None:
            output[LOAD_KEY] = load.to_dict()
