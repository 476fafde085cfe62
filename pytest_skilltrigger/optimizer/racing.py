"""Measuring candidates through the session: screening several by successive halving, and
racing one against the incumbent on the same queries.

Successive halving (:meth:`Racer.screen`): every candidate of a round is sampled on the train
queries with one run each; the better half by score is kept and sampled again with twice the
runs, and so on until one is left, which is then sampled by the session's rule. Runs are
stored, so each stage reads the runs of the one before and only tops them up.

A race (:meth:`Racer.race`) compares two descriptions on the same queries: the paired gain
(:mod:`.scoring`) from the runs made so far; while it is undecided, more runs go only to the
pairs that carry its uncertainty (where the two differ, or either is unsettled), both sides
alike, until the gain's interval excludes zero or the comparison's run budget is spent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.model.verdict import FixedRule
from pytest_skilltrigger.optimizer.scoring import Gain, expected_right, paired_gain, uncertainty
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry

RACE_STEP = 2  # more runs a race gives a pair at a time, each side
RACE_PAIRS = 6  # the most pairs a race step adds runs to
FIRST_LOOK_RUNS = 3  # a race's first sampling of each side: at most three runs a query


def halving_stages(candidates: int) -> list[tuple[int, int]]:
    """Successive halving's stages for ``candidates`` descriptions: (how many are sampled, the
    runs per query each gets); the better half goes on with twice the runs, until one is
    left (which is then sampled by the session's rule)."""
    stages, alive, runs = [], candidates, 1
    while alive > 1:
        stages.append((alive, runs))
        alive, runs = math.ceil(alive / 2), runs * 2
    return stages


@dataclass
class Race:
    """A paired comparison of two descriptions on the same queries."""

    incumbent: list[QueryResult]
    challenger: list[QueryResult]
    gain: Gain
    extra_runs: int = 0  # the runs the race added beyond the two samplings

    @property
    def verdict(self) -> str:
        return self.gain.verdict


class Racer:
    """Samples one skill's descriptions on sets of queries through the session."""

    def __init__(
        self, session: TriggerSession, target: Target, race_runs: int, model: str | None = None
    ) -> None:
        self.session = session
        self.target = target
        self.race_runs = race_runs
        self.model = model  # the model of a matrix it samples on (None: the first)

    @property
    def confidence(self) -> float:
        return self.session.plan.rule.confidence

    def first_look(self) -> SamplingPlan:
        """How a race's two sides are first sampled: three runs a query, stopped as soon as
        they settle the verdict (two when they agree). The race then spends its runs only on
        the pairs that differ or are unsettled, so runs that would settle a query both sides
        agree on are not made."""
        return SamplingPlan(
            FixedRule(
                FIRST_LOOK_RUNS,
                self.session.plan.threshold,
                curtail=True,
                confidence=self.confidence,
            )
        )

    def measure(
        self,
        description: str,
        entries: Sequence[EvalEntry],
        plan: SamplingPlan | None = None,
        *,
        independent: bool = False,
        phase: str = "rounds",
    ) -> list[QueryResult]:
        """Results for every entry, sampled concurrently (in message batches first, with
        ``--trigger-batch``)."""
        return self.measure_all([description], entries, plan, independent=independent, phase=phase)[
            0
        ]

    def measure_all(
        self,
        descriptions: Sequence[str],
        entries: Sequence[EvalEntry],
        plan: SamplingPlan | None = None,
        *,
        independent: bool = False,
        phase: str = "rounds",
    ) -> list[list[QueryResult]]:
        """:meth:`measure` for several descriptions at once: one message batch, one wave of
        concurrent requests."""
        plan = replace(plan or self.session.plan, independent=independent, phase=phase)
        results = self._sample([(d, e, plan) for d in descriptions for e in entries])
        n = len(entries)
        return [results[i * n : (i + 1) * n] for i in range(len(descriptions))]

    def _sample(self, jobs: Sequence[tuple[str, EvalEntry, SamplingPlan]]) -> list[QueryResult]:
        """Sample every (description, entry, plan): batched first, then joined or run live."""
        contexts = {
            d: self.target.context(d).on_model(self.model)
            for d in dict.fromkeys(d for d, _, _ in jobs)
        }
        work = [(contexts[d], e, plan) for d, e, plan in jobs]
        self.session.sample_ahead(work)
        futures = [self.session.submit(c, e, plan) for c, e, plan in work]
        return [f.result() for f in futures]

    def screen(
        self, descriptions: Sequence[str], entries: Sequence[EvalEntry]
    ) -> tuple[int, dict[int, int]]:
        """Successive halving on ``entries``: the index of the surviving description, and for
        each description the runs per query it reached (the stage it was dropped at)."""
        alive = list(range(len(descriptions)))
        reached: dict[int, int] = {}
        for _size, runs in halving_stages(len(descriptions)):
            plan = SamplingPlan(
                FixedRule(
                    runs, self.session.plan.threshold, curtail=False, confidence=self.confidence
                )
            )
            measured = self.measure_all([descriptions[i] for i in alive], entries, plan)
            scores = {}
            for index, results in zip(alive, measured, strict=True):
                scores[index] = expected_right(results)
                reached[index] = runs
            alive.sort(key=lambda i: (-scores[i], i))
            alive = alive[: math.ceil(len(alive) / 2)]
        return alive[0], reached

    def race(
        self,
        entries: Sequence[EvalEntry],
        incumbent: tuple[str, list[QueryResult]],
        challenger: tuple[str, list[QueryResult]],
        *,
        phase: str = "rounds",
    ) -> Race:
        """Race two descriptions (each with its results on ``entries``), see the module
        docstring; the runs a race adds are fresh ones, merged into the results they extend."""
        (first, mine), (second, theirs) = incumbent, challenger
        race = Race(list(mine), list(theirs), paired_gain(mine, theirs, self.confidence))
        while race.verdict == "undecided" and race.extra_runs < self.race_runs:
            if self.session.exhausted:
                break
            spread = [
                uncertainty(a, b) for a, b in zip(race.incumbent, race.challenger, strict=True)
            ]
            ranked = sorted(range(len(entries)), key=lambda i: -spread[i])
            chosen = [i for i in ranked[:RACE_PAIRS] if spread[i] > 1e-4]
            if not chosen:
                break
            self._extend(
                (first, race.incumbent),
                (second, race.challenger),
                entries=entries,
                chosen=chosen,
                phase=phase,
            )
            race.extra_runs += 2 * RACE_STEP * len(chosen)
            race.gain = paired_gain(race.incumbent, race.challenger, self.confidence)
        return race

    def _extend(
        self,
        *sides: tuple[str, list[QueryResult]],
        entries: Sequence[EvalEntry],
        chosen: list[int],
        phase: str,
    ) -> None:
        """``RACE_STEP`` more fresh runs for the chosen queries of each side, all in one batch
        or wave, merged into that side's results (fresh: stored runs, already counted, must
        not be read again)."""
        threshold = self.session.plan.threshold
        jobs = []
        for description, results in sides:
            for i in chosen:
                plan = SamplingPlan(
                    FixedRule(RACE_STEP, threshold, curtail=False, confidence=self.confidence),
                    independent=True,
                    trigger_choices=results[i].trigger_choices,
                    phase=phase,
                )
                jobs.append((description, entries[i], plan))
        more = iter(self._sample(jobs))
        for _, results in sides:
            for i in chosen:
                extra = next(more)
                old = results[i]
                results[i] = replace(
                    old,
                    outcomes=old.outcomes + extra.outcomes,
                    skipped=extra.skipped or old.skipped,
                )
