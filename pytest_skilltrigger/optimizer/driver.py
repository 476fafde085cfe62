"""Running the improvement rounds for every skill of a session.

The driver knows neither the SDK nor where files go: it asks through the session (whose
``ask`` is the backend's), tells ``files`` (when given) after every iteration so the HTML
report and the results folder follow the run, and returns each skill's typed
:class:`~pytest_skilltrigger.optimizer.loop.Optimization`. What becomes of SKILL.md is decided
afterwards, from those outcomes, by :func:`~pytest_skilltrigger.optimizer.accept.accept_all`.
Each round is frozen into its record (:mod:`.record`) as it ends; the terminal line, the
files and the session's report are made from the records.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import QueryResult, Usage
from pytest_skilltrigger.model.settings import OptimizerSettings
from pytest_skilltrigger.optimizer.folder import (
    competition_of,
    folder_of,
    with_sibling_description,
)
from pytest_skilltrigger.optimizer.loop import RoundsStart, optimize
from pytest_skilltrigger.optimizer.proposer import DescriptionProposer, Proposal
from pytest_skilltrigger.optimizer.record import RoundRecord, RoundsRecord, freeze, freeze_round
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt


class RoundsObserver(Protocol):
    """Told of every iteration (the files that follow the run)."""

    def save_proposal(self, skill_name: str, number: int, proposal: Proposal) -> None: ...

    def publish(self, records: Sequence[RoundsRecord]) -> None: ...


class OptimizationDriver:
    """Optimises each target in turn; ``files`` (optional) keeps the reports up to date."""

    def __init__(
        self,
        session: TriggerSession,
        options: OptimizerSettings,
        log: Callable[[str], None],
        files: RoundsObserver | None = None,
    ) -> None:
        self.session = session
        self.options = options
        self.log = log
        self.files = files
        self.runs: dict[str, Optimization] = {}
        # each skill's rounds frozen as they ended, by skill path and round number
        self.frozen: dict[str, dict[int, RoundRecord]] = {}
        self.started = time.monotonic()

    def run(
        self,
        targets: list[Target],
        initial: Mapping[str, Mapping[int, QueryResult]],
        routing_sets: Sequence[RoutingSet] = (),
    ) -> dict[str, Optimization]:
        """Optimise every target; the outcomes by skill path, in target order."""
        proposer = DescriptionProposer(self._ask)
        with sigterm_as_interrupt():
            try:
                self._run_targets(targets, initial, proposer, routing_sets)
            except KeyboardInterrupt:
                # between rounds (writing reports, which is atomic): keep what finished and
                # say it was interrupted
                if self.runs:
                    current = list(self.runs.values())[-1]
                    current.interrupted = True
                    current.exit_reason = f"interrupted ({current.exit_reason or 'rounds'})"
        if self.interrupted:
            self.log("interrupted: every SKILL.md is left unchanged")
        return self.runs

    def records(self) -> dict[str, RoundsRecord]:
        """Every skill's rounds so far, frozen, by skill path."""
        return {path: freeze(run, self.frozen.get(path, {})) for path, run in self.runs.items()}

    def _ask(self, prompt: str) -> tuple[str, Usage]:
        return self.session.ask(prompt, model=self.options.improve_model)

    @property
    def interrupted(self) -> bool:
        return any(run.interrupted for run in self.runs.values())

    def _run_targets(
        self,
        targets: list[Target],
        initial: Mapping[str, Mapping[int, QueryResult]],
        proposer: DescriptionProposer,
        routing_sets: Sequence[RoutingSet],
    ) -> None:
        """The skills in turn: each is measured against its siblings as they are by then
        (an improved sibling is listed with its new description), and also on its siblings'
        queries (see :mod:`~pytest_skilltrigger.optimizer.folder`)."""
        improved: list[Target] = []  # the targets improved so far, with their new description
        for original in targets:
            target = original
            where = os.path.dirname(original.skill.path)
            for other in improved:
                if os.path.dirname(other.skill.path) == where:
                    target = with_sibling_description(target, other.name, other.description)
            relisted = [s.name for s in target.siblings if s not in original.siblings]
            folder = folder_of(
                target, targets, routing_sets, self.options.holdout, self.options.seed
            )
            start = RoundsStart(
                # the items measured the listing as it was: a relisted skill starts afresh
                initial={} if target is not original else initial.get(target.skill.skill_md, {}),
                folder=folder,
                competition=competition_of(target, folder),
                on_iteration=self._on_iteration,
            )
            run = optimize(target, self.session, proposer, self.options, start)
            run.relisted = tuple(relisted)
            self.runs[target.skill.path] = run
            self._publish()
            if run.interrupted:
                self.log(f"{target.name}: interrupted")
                break
            if run.improved:
                improved.append(replace(target, description=run.best().description))

    def _on_iteration(self, run: Optimization, it: Iteration) -> None:
        path = run.target.skill.path
        self.runs[path] = run
        record = self.frozen.setdefault(path, {})[it.iteration] = freeze_round(run, it)
        self.log(self._line(run.target.name, record))
        if record.evaluated and record.note:
            self.log(f"  {record.note}")
        if self.files is not None and record.proposal is not None:
            self.files.save_proposal(run.target.name, record.iteration, record.proposal)
        self._publish()

    def _line(self, name: str, record: RoundRecord) -> str:
        """The terminal's line for a round that ended."""
        total = self.options.max_iterations
        if not record.evaluated:
            return (
                f"{name} iteration {record.iteration}/{total}: {record.note or 'proposal dropped'}"
            )
        elapsed = time.monotonic() - self.started
        tokens = record.usage.input_tokens + record.usage.output_tokens
        race = f"; against the best so far {record.race.sentence}" if record.race else ""
        several = len(record.candidates) > 1
        candidates = f" ({len(record.candidates)} candidates)" if several else ""
        return (
            f"{name} iteration {record.iteration}/{total}{candidates}: train "
            f"{record.train_text}, test {record.test_text}{race}, {elapsed:.1f}s, {tokens:,} tokens"
        )

    def _publish(self) -> None:
        if self.files is not None:
            self.files.publish(list(self.records().values()))
