"""Running trigger items in a process: collecting them, feeding their queries to the engine
ahead of time, and putting each result on its report. The plain run and each xdist worker
have one :class:`ItemRunner`; the xdist controller, which runs no item, has none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.model.outcome import TriggerCheck
from pytest_skilltrigger.model.verdict import with_runs
from pytest_skilltrigger.plugin import wire
from pytest_skilltrigger.plugin.items import (
    BackendRequiredError,
    ItemAxes,
    RoutingFile,
    SamplingItem,
    SkillFile,
    TriggerRunError,
)
from pytest_skilltrigger.skills.catalog import load_context
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.merge import Parts
    from pytest_skilltrigger.engine.session import TriggerSession
    from pytest_skilltrigger.model.context import TriggerContext
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.plugin.setup import SessionEngine, Setup, SkillsInPlay

#: the items this process will run after one, whose runs may start now
Upcoming = Callable[[SamplingItem], "list[pytest.Item]"]


def nothing_upcoming(item: SamplingItem) -> list[pytest.Item]:
    """A plain run's: every item's runs started with the run loop."""
    return []


@dataclass(frozen=True)
class Feeding:
    """How a process feeds its items' runs to the engine: ``upcoming`` names the items whose
    runs may start with an item's own (an xdist worker's queue), ``before_runs`` is called
    before each submission (a worker takes the runs its controller made ahead there)."""

    upcoming: Upcoming = nothing_upcoming
    before_runs: Callable[[TriggerSession], None] | None = None


class PartResults:
    """A merge's source of the items' results (``--trigger-merge``): each item's result as
    the shard that ran it reported it, with no call."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    def result_for(self, item: SamplingItem) -> QueryResult:
        return self.parts.results[item.nodeid]  # (the narrowing kept only the parts' items)


class ItemRunner:
    """Collects a process's trigger items, samples their queries and the ``skill_trigger``
    fixture's, and puts each result on its report; it is the items' :class:`ResultSource`.

    ``feeding`` says how the runs are started ahead of the items (an xdist worker's
    :class:`Feeding`); ``results``, when given, is where the items take their results
    instead (a merge's parts): nothing is then sampled.
    """

    def __init__(
        self,
        setup: Setup,
        skills: SkillsInPlay,
        engine: SessionEngine,
        *,
        feeding: Feeding = Feeding(),
        results: PartResults | None = None,
    ) -> None:
        self.setup = setup
        self.results = results
        self.skills = skills
        self.session_engine = engine
        self.feeding = feeding
        self._submitted: dict[str, Future[QueryResult]] = {}
        self._keys: dict[str, str | None] = {}  # each item's context key, for its record
        # the skill_trigger fixture's results per test, until its report carries them
        self._checks: dict[str, list[wire.CheckRecord]] = {}
        self._contexts: dict[str, TriggerContext] = {}  # the fixture's skills, by path

    @property
    def engine(self) -> TriggerSession:
        return self.session_engine.engine

    def collect_file(
        self, file_path: Any, parent: pytest.Collector
    ) -> SkillFile | RoutingFile | None:
        """A skill's SKILL.md or a folder's routing eval set, as a file of items."""
        path = os.path.abspath(str(file_path))
        gates, models = self.setup.gates, self.setup.settings.models
        routing = self.skills.by_routing_path.get(path)
        if routing is not None:
            return RoutingFile.from_parent(
                parent,
                path=file_path,
                routing=routing,
                contexts=self.skills.routing_contexts(routing),
                source=self.results or self,
                soft_misses=gates.min_routing_accuracy is not None,
                models=models,
            )
        target = self.skills.by_skill_md.get(path)
        if target is None:
            return None
        return SkillFile.from_parent(
            parent,
            path=file_path,
            target=target,
            source=self.results or self,
            soft_misses=gates.min_accuracy is not None or target.eval_set.min_accuracy is not None,
            axes=ItemAxes.of(self.setup.settings),
        )

    def start_runs(self, items: list[pytest.Item]) -> None:
        """Submit the queries of these items so they run concurrently ahead of the items."""
        sampling = [i for i in items if isinstance(i, SamplingItem)]
        if not sampling or self.results is not None or self.engine.no_backend:
            return
        if self.feeding.before_runs is not None:
            self.feeding.before_runs(self.engine)
        for item in sampling:
            if item.nodeid not in self._submitted:
                context, entry, plan = item.request(self.engine.plan)
                self._submitted[item.nodeid] = self.engine.submit(context, entry, plan)
                self._keys[item.nodeid] = self.engine.context_key(context)

    def _check_available(self) -> None:
        """Skip (or, with --trigger-require-backend, error) when no backend can run."""
        reason = self.engine.no_backend
        if not reason:
            return
        if self.setup.gates.require_backend:
            raise BackendRequiredError(f"{reason} (--trigger-require-backend is set)")
        pytest.skip(reason)

    def result_for(self, item: SamplingItem) -> QueryResult:
        """Wait for the item's result (submitting it and its queued followers if needed)."""
        self._check_available()
        self.start_runs([item, *self.feeding.upcoming(item)])
        result = self._submitted[item.nodeid].result()
        if self.engine.stopped:
            item.session.shouldstop = f"stopping: {self.engine.stopped}"
        return result

    def attach(
        self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport
    ) -> None:
        """Put the item's result on its report (call, or a setup that did not pass), and a
        test's fixture results on the report of the phase that made them."""
        if isinstance(item, SamplingItem) and report.when == "setup" and call.excinfo:
            # pytest renders a setup error as a traceback: keep ours as short as a failure
            short = item.short_failure(call.excinfo)
            if short is not None:
                report.longrepr = short
        # the fixture's checks made so far: in a fixture's setup or teardown too
        records: list[wire.Record] = list(self._checks.pop(item.nodeid, []))
        decided = report.when == "call" or (report.when == "setup" and not report.passed)
        if isinstance(item, SamplingItem) and item.result is not None and decided:
            records.append(item.record(self._keys.get(item.nodeid)))
        if records:
            wire.attach(report, records)

    def check(
        self,
        path: str,
        query: str,
        runs: int | None = None,
        threshold: float | None = None,
        *,
        nodeid: str | None = None,
    ) -> TriggerCheck:
        """The ``skill_trigger`` fixture's work: sample one query for one skill. A relative
        ``path`` is read from rootdir (where the ``skill_paths`` ini key's are read from)."""

        self._check_available()
        if (runs is not None and runs < 1) or (threshold is not None and not 0 <= threshold <= 1):
            raise ValueError("runs must be >= 1 and threshold within 0..1")
        # the session's rule, or the runs this call names
        rule = with_runs(self.engine.plan.rule, runs, threshold)
        if rule.sequential and not rule.margin < rule.threshold < 1 - rule.margin:  # type: ignore[union-attr]
            raise ValueError(
                f"threshold {threshold} is too near 0 or 1 for the sequential rule: "
                "name the runs too (runs=...)"
            )
        plan = replace(self.engine.plan, rule=rule, phase="checks")
        full = os.path.join(
            self.setup.config.rootpath, path
        )  # the project's, wherever pytest started
        context = self._contexts.get(full)
        if context is None:  # read once a session: a suite may check many queries of a skill
            try:
                context = self._contexts[full] = load_context(full, self.setup.installed)
            except InputError as exc:
                raise ValueError(str(exc)) from None
        entry = EvalEntry(index=-1, query=query, should_trigger=True, extra={})
        result = self.engine.submit(context, entry, plan).result()
        if nodeid is not None:
            key = self.engine.context_key(context)
            self._checks.setdefault(nodeid, []).append(wire.CheckRecord(key, result))
        if result.skipped:
            pytest.skip(result.skipped)
        if result.errors:
            raise TriggerRunError(result.error)
        return TriggerCheck.from_result(result)
