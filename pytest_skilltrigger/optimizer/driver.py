"""Running the improvement rounds for every skill of a session.

The driver knows neither the SDK nor where files go: it asks through the session (whose
``ask`` is the backend's), tells ``files`` (when given) after every iteration so the HTML
report and the results folder follow the run, and returns each skill's typed
:class:`~pytest_skilltrigger.optimizer.loop.Optimization`. What becomes of SKILL.md is decided
afterwards, from those outcomes, by :func:`~pytest_skilltrigger.optimizer.accept.accept_all`.
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
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt


class RoundsObserver(Protocol):
    """Told of every iteration (the files that follow the run)."""

    def save_proposal(self, skill_name: str, number: int, proposal: Proposal) -> None: ...

    def publish(self, runs: list[Optimization]) -> None: ...


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
        self.runs[run.target.skill.path] = run
        total = self.options.max_iterations
        elapsed = time.monotonic() - self.started
        tokens = it.usage.input_tokens + it.usage.output_tokens
        if it.evaluated:
            c = run.confidence
            race = ""
            if it.race is not None:
                outcome = "the new best" if it.became_best else "kept the best so far"
                race = f"; against the best so far {it.race.gain.text()}: {outcome}"
            candidates = f" ({len(it.candidates)} candidates)" if len(it.candidates) > 1 else ""
            self.log(
                f"{run.target.name} iteration {it.iteration}/{total}{candidates}: "
                f"train {it.train_score(c).text()}, test {it.test_score(c).text()}{race}, "
                f"{elapsed:.1f}s, {tokens:,} tokens"
            )
            if it.note:
                self.log(f"  {it.note}")
        else:
            note = it.note or "proposal dropped"
            self.log(f"{run.target.name} iteration {it.iteration}/{total}: {note}")
        if self.files is not None and it.proposal is not None:
            self.files.save_proposal(run.target.name, it.iteration, it.proposal)
        self._publish()

    def _publish(self) -> None:
        if self.files is not None:
            self.files.publish(list(self.runs.values()))
