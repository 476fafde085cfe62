"""When a query's runs say it triggers, and when to stop sampling it.

Two rules, one interface (:class:`VerdictRule`): how many runs to make next given the runs so
far, and the verdict they give.

:class:`SequentialRule` (the default, ``--trigger-confidence 0.95``) is Wald's sequential
probability ratio test between "the true rate is ``threshold - margin``" and "it is
``threshold + margin``", with error rates ``1 - confidence`` on both sides, truncated at
``max_runs``. After each run the log-likelihood ratio

    LLR = triggers * log(p1 / p0) + misses * log((1 - p1) / (1 - p0))

is compared with ``log(confidence / (1 - confidence))``: above it the query triggers, below
its negative it does not, in between another run is made. A query still undecided at
``max_runs`` (or once no run left could reach either bound) is *borderline*: its true rate
lies near the threshold and chance decides each run. With the threshold at 0.5 the bound is a
count: at 95% and margin 0.15 a query triggers once it has five more triggers than misses.
What this guarantees, computed exactly in ``benchmarks/bench_verdicts.py``: for a query
whose true rate is outside ``threshold ± margin``, the verdict is wrong at most ``1 -
confidence`` of the time (0.4% on average over rates spread evenly over 0..1); inside the
margin either verdict, or borderline, may come out.

:class:`FixedRule` (``--trigger-confidence off``) is the reference scripts' rule, kept for
comparison: ``runs`` runs, triggered when ``triggers / runs >= threshold``, with exact early
stopping (no more runs once they cannot change the verdict).

Both rules sample in *waves*: the next wave is the number of further runs before a decision
could first become possible, so runs made concurrently (or in one message batch) never
overshoot the verdict that one run at a time would reach.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from pytest_skilltrigger.model.stats import wilson

Verdict = Literal["triggered", "not_triggered", "undecided"]

DEFAULT_CONFIDENCE = 0.95
DEFAULT_MARGIN = 0.15
DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_RUNS = 15
_EDGE = 1e-6  # rates are kept inside (0, 1) so that every log-ratio is finite


def passes(should_trigger: bool, rate: float, threshold: float) -> bool:
    """The reference verdict for one query: triggered when ``rate >= threshold``."""
    triggered = rate >= threshold
    return triggered if should_trigger else not triggered


def triggers_needed(runs: int, threshold: float) -> int:
    """Smallest trigger count t with t / runs >= threshold (runs + 1 if none reaches it)."""
    need = max(0, math.ceil(threshold * runs - 1e-9))
    # guard float rounding both ways: t / runs must be >= threshold, t - 1 must not be
    while need > 0 and (need - 1) / runs >= threshold:
        need -= 1
    while need <= runs and need / runs < threshold:
        need += 1
    return need


def runs_still_needed(triggers: int, misses: int, runs: int, threshold: float) -> int:
    """How many more runs of a fixed-size sample can be issued without any being wasted.

    Zero means the verdict is already decided (or every run is done). The value is the number
    of further runs before the rate's side of the threshold could first become certain, so a
    wave of that many runs never overshoots the minimum.
    """
    done = triggers + misses
    if done >= runs:
        return 0
    need = triggers_needed(runs, threshold)
    if done == 0 and not 0 < need <= runs:
        return 1  # the threshold decides alone (0, or above 1), but a verdict needs a rate
    if triggers >= need:
        return 0  # rate >= threshold whatever comes next
    if triggers + (runs - done) < need:
        return 0  # can no longer reach the threshold
    to_certain_trigger = need - triggers
    to_certain_miss = (runs - need + 1) - misses
    return min(to_certain_trigger, to_certain_miss, runs - done)


class VerdictRule(Protocol):
    """What a sampling needs of a rule; both rules are frozen, hashable and JSON-able."""

    threshold: float
    confidence: float

    @property
    def max_runs(self) -> int: ...

    @property
    def sequential(self) -> bool: ...

    def next_runs(self, triggers: int, misses: int) -> int:
        """How many runs to make next (0: the sampling is over)."""
        ...

    def verdict(self, triggers: int, runs: int) -> Verdict:
        """What the runs say: triggered, not triggered, or undecided."""
        ...

    def interval(self, triggers: int, runs: int) -> tuple[float, float]:
        """The rate's interval at the rule's confidence."""
        ...

    def to_dict(self) -> dict[str, Any]: ...

    def describe(self) -> str:
        """One line for a header: what the rule does."""
        ...


@dataclass(frozen=True)
class FixedRule:
    """The reference rule: ``runs`` runs, rate >= threshold; ``curtail`` stops early once the
    remaining runs cannot change the verdict. ``confidence`` only sets the shown interval."""

    runs: int = 3
    threshold: float = 0.5
    curtail: bool = True
    confidence: float = DEFAULT_CONFIDENCE

    kind = "fixed"
    sequential = False

    @property
    def max_runs(self) -> int:
        return self.runs

    def next_runs(self, triggers: int, misses: int) -> int:
        if not self.curtail:
            return max(0, self.runs - triggers - misses)
        return runs_still_needed(triggers, misses, self.runs, self.threshold)

    def verdict(self, triggers: int, runs: int) -> Verdict:
        if runs <= 0:
            return "undecided"
        return "triggered" if triggers / runs >= self.threshold else "not_triggered"

    def interval(self, triggers: int, runs: int) -> tuple[float, float]:
        return wilson(triggers, runs, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    def describe(self) -> str:
        stop = "" if self.curtail else ", no early stopping"
        return f"{self.runs} runs per query, threshold {self.threshold:g}{stop}"


@dataclass(frozen=True)
class SequentialRule:
    """Wald's sequential test at ``confidence`` with an indifference ``margin`` around the
    threshold, between ``min_runs`` and ``max_runs`` runs (see the module docstring)."""

    threshold: float = 0.5
    confidence: float = DEFAULT_CONFIDENCE
    margin: float = DEFAULT_MARGIN
    min_runs: int = DEFAULT_MIN_RUNS
    max_runs: int = DEFAULT_MAX_RUNS

    kind = "sequential"
    sequential = True

    @property
    def _steps(self) -> tuple[float, float, float]:
        """(the log-ratio a trigger adds, the one a miss adds, the bound)."""
        p0 = min(max(self.threshold - self.margin, _EDGE), 1 - 2 * _EDGE)
        p1 = min(max(self.threshold + self.margin, p0 + _EDGE), 1 - _EDGE)
        bound = math.log(self.confidence / (1 - self.confidence))
        return math.log(p1 / p0), math.log((1 - p1) / (1 - p0)), bound

    def _decision(self, triggers: int, misses: int) -> Verdict:
        up, down, bound = self._steps
        llr = triggers * up + misses * down
        if llr >= bound - 1e-9:
            return "triggered"
        if llr <= -bound + 1e-9:
            return "not_triggered"
        return "undecided"

    def verdict(self, triggers: int, runs: int) -> Verdict:
        if runs < self.min_runs:
            return "undecided"
        return self._decision(triggers, runs - triggers)

    def next_runs(self, triggers: int, misses: int) -> int:
        done = triggers + misses
        if done >= self.max_runs or self.verdict(triggers, done) != "undecided":
            return 0
        left = self.max_runs - done
        up, down, bound = self._steps
        llr = triggers * up + misses * down
        # the fewest further runs after which each bound could be crossed (all triggers, or
        # all misses); none when it cannot be reached before max_runs (borderline now)
        to_up = max(0, math.ceil((bound - 1e-9 - llr) / up))
        to_down = max(0, math.ceil((-bound + 1e-9 - llr) / down))
        first = min(to_up, to_down)
        if first > left:
            return 0
        return min(left, max(first, self.min_runs - done, 1))

    def interval(self, triggers: int, runs: int) -> tuple[float, float]:
        return wilson(triggers, runs, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    def describe(self) -> str:
        return (
            f"sequential at {self.confidence:.0%} (threshold {self.threshold:g} ± "
            f"{self.margin:g}, {self.min_runs} to {self.max_runs} runs per query)"
        )


Rule = FixedRule | SequentialRule


def with_runs(rule: Rule, runs: int | None, threshold: float | None = None) -> Rule:
    """``rule`` as a caller that names its runs or threshold asks for it (the ``skill_trigger``
    fixture): naming the runs asks for that many, the reference rule's fixed count with early
    stopping; naming only the threshold keeps the rule. Unchanged for None."""
    from dataclasses import replace

    threshold = rule.threshold if threshold is None else threshold
    if runs is not None:
        return FixedRule(runs, threshold, True, rule.confidence)
    return replace(rule, threshold=threshold)


def rule_from_dict(data: dict[str, Any]) -> Rule:
    """A rule from its :meth:`to_dict` (a report or an xdist worker's record)."""
    fields = {k: v for k, v in data.items() if k != "kind"}
    return SequentialRule(**fields) if data.get("kind") == "sequential" else FixedRule(**fields)


@dataclass(frozen=True)
class Operating:
    """How a rule behaves on a query whose true trigger rate is known: the chance of each
    verdict and the runs it makes on average (sampled one wave at a time)."""

    triggered: float
    not_triggered: float
    undecided: float
    runs: float


def operating(rule: Rule, rate: float) -> Operating:
    """The exact chance of each verdict of ``rule`` on a query that triggers with probability
    ``rate`` per run, and the expected number of runs: every path of runs is followed, wave by
    wave as the sampler makes them, with its probability (no simulation noise)."""
    states = {(0, 0): 1.0}  # (triggers, misses) -> probability of being there, undecided
    out = {"triggered": 0.0, "not_triggered": 0.0, "undecided": 0.0}
    runs = 0.0
    while states:
        after: dict[tuple[int, int], float] = {}
        for (k, m), mass in states.items():
            wave = rule.next_runs(k, m)
            if wave == 0:
                out[rule.verdict(k, k + m)] += mass
                continue
            runs += mass * wave
            for j in range(wave + 1):  # j triggers among the wave's runs
                weight = math.comb(wave, j) * rate**j * (1 - rate) ** (wave - j)
                key = (k + j, m + wave - j)
                after[key] = after.get(key, 0.0) + mass * weight
        states = after
    return Operating(out["triggered"], out["not_triggered"], out["undecided"], runs)
