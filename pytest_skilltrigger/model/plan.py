"""How a query is sampled: the plan a sampling follows, and how many runs it makes next.

A value type shared by the engine (the sampler, message batches), the optimizer and the
pytest layer (which builds each item's plan); the verdict rule it applies is
:mod:`pytest_skilltrigger.model.verdict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pytest_skilltrigger.model.outcome import RunOutcome
from pytest_skilltrigger.model.verdict import FixedRule, Rule, SequentialRule, rule_from_dict


@dataclass(frozen=True)
class SamplingPlan:
    """How each query is sampled: the verdict rule (sequential, or the reference rule's fixed
    runs), and what counts as a trigger.

    ``independent`` asks for an independent measurement: stored runs are not reused, a
    sampling of the same query already made in this session is not shared, and its runs are
    not stored (they must not become the runs a later cached rerun of the description
    reuses). The optimizer re-measures its winner this way.

    ``trigger_choices`` are the choices that count as a trigger, when that is not the
    context's own skill (a routing entry that no skill of a folder should take counts any of
    them).
    """

    rule: Rule = field(default_factory=SequentialRule)
    independent: bool = False
    trigger_choices: frozenset[str] | None = None
    # what the calls are counted under (see ``prices.PHASES``); not part of what makes two
    # samplings the same: a later submission that joins a sampling pays nothing
    phase: str = field(default="items", compare=False)

    @property
    def max_runs(self) -> int:
        """The most runs a query may take."""
        return self.rule.max_runs

    @property
    def threshold(self) -> float:
        return self.rule.threshold

    def hit(self, outcome: RunOutcome) -> bool:
        """Whether a run counts as a trigger under this plan."""
        if self.trigger_choices is None:
            return outcome.triggered
        return outcome.chosen in self.trigger_choices

    def next_runs(self, outcomes: Sequence[RunOutcome]) -> int:
        """How many runs of a query to make next: none after an error or once the rule is
        done, else as many as cannot be wasted. Live runs and message batches both sample in
        these waves."""
        if any(o.status == "error" for o in outcomes):
            return 0
        triggers = sum(1 for o in outcomes if self.hit(o))
        return self.rule.next_runs(triggers, len(outcomes) - triggers)

    def runs_to_go(self, outcomes: Sequence[RunOutcome] = ()) -> tuple[int, int]:
        """The fewest and the most runs still to make after ``outcomes``: the fewest if every
        further run reads the same way (the quicker way of the two), the most up to the rule's
        last. ``(0, 0)`` when the runs already decide (a rerun from the store)."""
        if self.next_runs(outcomes) == 0:
            return 0, 0
        triggers = sum(1 for o in outcomes if self.hit(o))
        misses = len(outcomes) - triggers
        fewest = min(
            _runs_one_way(self.rule, triggers, misses, hit=True),
            _runs_one_way(self.rule, triggers, misses, hit=False),
        )
        return fewest, self.max_runs - len(outcomes)

    def usable(self, stored: Sequence[RunOutcome]) -> list[RunOutcome]:
        """The stored runs a sampling starts from: in order, up to the point where the rule
        would have stopped (a rerun whose stored runs already decide makes no call, and its
        verdict is the one those runs gave when they were made)."""
        taken: list[RunOutcome] = []
        for outcome in stored:
            if self.next_runs(taken) == 0:
                break
            taken.append(outcome)
        return taken

    def ident(self) -> tuple[Any, ...]:
        """What makes two samplings of a query under one context the same (JSON-able)."""
        return self._ident

    @cached_property
    def _ident(self) -> tuple[Any, ...]:
        """The ident, worked out once: every run's sampling key reads it."""
        rule = tuple(sorted(self.rule.to_dict().items()))
        return (
            rule,
            self.independent,
            tuple(sorted(self.trigger_choices)) if self.trigger_choices is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        trigger_choices = sorted(self.trigger_choices) if self.trigger_choices is not None else None
        return {
            "rule": self.rule.to_dict(),
            "independent": self.independent,
            "trigger_choices": trigger_choices,
            "phase": self.phase,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SamplingPlan:
        trigger_choices = data.get("trigger_choices")
        return cls(
            rule_from_dict(data["rule"]),
            bool(data.get("independent")),
            frozenset(trigger_choices) if trigger_choices is not None else None,
            str(data.get("phase", "items")),
        )


def _runs_one_way(rule: Rule, triggers: int, misses: int, *, hit: bool) -> int:
    """The runs the rule makes from here when every further run is a trigger (or a miss)."""
    made = 0
    while (more := rule.next_runs(triggers, misses)) > 0:
        made += more
        if hit:
            triggers += more
        else:
            misses += more
    return made


def reference_plan(runs: int = 3, threshold: float = 0.5, curtail: bool = True) -> SamplingPlan:
    """The reference scripts' plan: fixed runs, with exact early stopping."""
    return SamplingPlan(FixedRule(runs, threshold, curtail))


# (context key, query, the plan's ident): what makes two samplings the same
SamplingKey = tuple[str, str, tuple[Any, ...]]
