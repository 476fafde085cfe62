"""When a query's runs say it triggers, and when to stop sampling it.

Two rules, one interface (:class:`VerdictRule`): how many runs to make next given the runs so
far, and the verdict they give. :class:`SequentialRule` (the default) is a sequential test
between "the true rate is ``threshold - margin``" and "``threshold + margin``", its bounds
calibrated exactly so that the error at the margin stays within ``1 - confidence``;
:class:`FixedRule` is the reference scripts' fixed runs. Both sample in waves that never
overshoot the verdict one run at a time would reach. Why and how, with the measured error
rates: ``docs/explanation/verdicts.md`` (figures from ``benchmarks/bench_verdicts.py``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Literal, Protocol

from pytest_skilltrigger.model.options import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MARGIN,
    DEFAULT_MAX_RUNS,
    DEFAULT_MIN_RUNS,
    DEFAULT_THRESHOLD,
)
from pytest_skilltrigger.model.stats import wilson

Verdict = Literal["triggered", "not_triggered", "undecided"]

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
    threshold: float = DEFAULT_THRESHOLD
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
    """The sequential test at ``confidence`` with an indifference ``margin`` around the
    threshold, between ``min_runs`` and ``max_runs`` runs, its bounds calibrated exactly
    unless ``calibrated`` is False (see the module docstring)."""

    threshold: float = DEFAULT_THRESHOLD
    confidence: float = DEFAULT_CONFIDENCE
    margin: float = DEFAULT_MARGIN
    min_runs: int = DEFAULT_MIN_RUNS
    max_runs: int = DEFAULT_MAX_RUNS
    calibrated: bool = True

    kind = "sequential"
    sequential = True

    @property
    def bounds(self) -> Bounds:
        """Each look's trigger counts that settle it (computed once per rule)."""
        return _bounds(self)

    def verdict(self, triggers: int, runs: int) -> Verdict:
        if runs < self.min_runs:
            return "undecided"
        if runs > self.max_runs:  # more runs than the rule makes (a caller's own): Wald's
            return _wald_decision(self, triggers, runs - triggers)
        return self.bounds.verdict(triggers, runs)

    def next_runs(self, triggers: int, misses: int) -> int:
        done = triggers + misses
        if done >= self.max_runs or self.verdict(triggers, done) != "undecided":
            return 0
        bounds = self.bounds
        # the fewest further runs after which a bound could be crossed (all of them triggers,
        # or all misses); none when neither can be before max_runs (borderline now)
        for more in range(max(1, self.min_runs - done), self.max_runs - done + 1):
            n = done + more
            if triggers + more >= bounds.up[n] or triggers <= bounds.down[n]:
                return more
        return 0

    def interval(self, triggers: int, runs: int) -> tuple[float, float]:
        return wilson(triggers, runs, self.confidence)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}

    def describe(self) -> str:
        wald = "" if self.calibrated else ", Wald's bounds"
        return (
            f"sequential at {self.confidence:.0%} (threshold {self.threshold:g} ± "
            f"{self.margin:g}, {self.min_runs} to {self.max_runs} runs per query{wald})"
        )


@dataclass(frozen=True)
class Bounds:
    """A truncated sequential test written out: after ``n`` runs (``n >= min_runs``) the
    query triggers with at least ``up[n]`` triggers and does not with at most ``down[n]``
    (``up[n] = n + 1`` and ``down[n] = -1`` where a look cannot settle)."""

    up: tuple[int, ...]
    down: tuple[int, ...]
    min_runs: int

    def verdict(self, triggers: int, runs: int) -> Verdict:
        if runs < self.min_runs:
            return "undecided"
        if triggers >= self.up[runs]:
            return "triggered"
        if triggers <= self.down[runs]:
            return "not_triggered"
        return "undecided"

    def settles(self, rate: float) -> tuple[float, float]:
        """The exact chance of each verdict (triggered, not triggered) for a true ``rate``,
        one run at a time (the same as in waves, which never overshoot a look)."""
        _undecided, up, down = _through_looks(([1.0], 0.0, 0.0), rate, self, range(1, len(self.up)))
        return up, down


# a sampling carried through some looks: the chance of each trigger count with no verdict
# yet, then the chances of each verdict so far
LookState = tuple[list[float], float, float]


def _through_looks(
    state: LookState,
    rate: float,
    bounds: Bounds,
    looks: range,
    stop_above: tuple[float, float] = (2.0, 2.0),
) -> LookState:
    """A sampling carried through ``looks`` one run at a time: the chance of each trigger
    count with no verdict yet, and of each verdict so far. It stops early once either
    verdict's chance passes ``stop_above`` (it can only grow)."""
    undecided, up, down = state
    for n in looks:
        step = [0.0] * (n + 1)
        for t, mass in enumerate(undecided):
            step[t] += mass * (1 - rate)
            step[t + 1] += mass * rate
        if n >= bounds.min_runs:
            up += sum(step[max(0, bounds.up[n]) :])
            down += sum(step[: bounds.down[n] + 1])
            step = [m if bounds.down[n] < t < bounds.up[n] else 0.0 for t, m in enumerate(step)]
            if up > stop_above[0] or down > stop_above[1]:
                return step, up, down
        undecided = step
    return undecided, up, down


def _wald_decision(rule: SequentialRule, triggers: int, misses: int) -> Verdict:
    """Wald's test: the log-likelihood ratio against ``log(confidence / (1 - confidence))``,
    never settling against the rate the runs show (near 0 or 1 a margin is lopsided: with
    the threshold at 0.79 and margin 0.2, 12 triggers of 15 would otherwise settle below)."""
    p0 = min(max(rule.threshold - rule.margin, _EDGE), 1 - 2 * _EDGE)
    p1 = min(max(rule.threshold + rule.margin, p0 + _EDGE), 1 - _EDGE)
    bound = math.log(rule.confidence / (1 - rule.confidence))
    llr = triggers * math.log(p1 / p0) + misses * math.log((1 - p1) / (1 - p0))
    above = triggers >= rule.threshold * (triggers + misses) - 1e-9
    if llr >= bound - 1e-9 and above:
        return "triggered"
    if llr <= -bound + 1e-9 and not above:
        return "not_triggered"
    return "undecided"


@lru_cache(maxsize=64)
def _bounds(rule: SequentialRule) -> Bounds:
    """Wald's bounds at each look, then (``calibrated``) moved toward the middle from the
    first look on while the exact error rates at ``threshold ± margin`` stay within
    ``1 - confidence``; a verdict never goes against the rate its own runs show."""
    threshold, confidence, margin = rule.threshold, rule.confidence, rule.margin
    min_runs, max_runs = rule.min_runs, rule.max_runs
    wald = replace(rule, calibrated=False)
    up, down = [0] * (max_runs + 1), [0] * (max_runs + 1)
    for n in range(max_runs + 1):
        said = [_wald_decision(wald, t, n - t) for t in range(n + 1)]
        up[n] = next((t for t in range(n + 1) if said[t] == "triggered"), n + 1)
        down[n] = max((t for t in range(n + 1) if said[t] == "not_triggered"), default=-1)
    if not rule.calibrated:
        return Bounds(tuple(up), tuple(down), min_runs)
    alpha = 1 - confidence
    low, high = threshold - margin, threshold + margin
    # the sampling at each rate carried through the looks already final (earlier ones)
    carried: dict[float, LookState] = {low: ([1.0], 0.0, 0.0), high: ([1.0], 0.0, 0.0)}

    def within(n: int) -> bool:
        """Whether the error rates stay within alpha, looks n and after as they are now."""
        test, rest = Bounds(tuple(up), tuple(down), min_runs), range(n, max_runs + 1)
        wrong_up = _through_looks(carried[low], low, test, rest, (alpha, 2.0))[1]
        return (
            wrong_up <= alpha
            and _through_looks(carried[high], high, test, rest, (2.0, alpha))[2] <= alpha
        )

    def moved(side: list[int], n: int, step: int) -> bool:
        side[n] += step
        if within(n):
            return True
        side[n] -= step
        return False

    for n in range(1, max_runs + 1):
        while n >= min_runs:
            nearer_up = up[n] - 1 > down[n] and up[n] - 1 >= threshold * n - 1e-9
            nearer_down = down[n] + 1 < up[n] and down[n] + 1 < threshold * n - 1e-9
            if not ((nearer_up and moved(up, n, -1)) | (nearer_down and moved(down, n, 1))):
                break
        final = Bounds(tuple(up), tuple(down), min_runs)
        carried = {
            rate: _through_looks(carried[rate], rate, final, range(n, n + 1)) for rate in carried
        }
    return Bounds(tuple(up), tuple(down), min_runs)


Rule = FixedRule | SequentialRule


def with_runs(rule: Rule, runs: int | None, threshold: float | None = None) -> Rule:
    """``rule`` as a caller that names its runs or threshold asks for it (the ``skill_trigger``
    fixture): naming the runs asks for that many, the reference rule's fixed count with early
    stopping; naming only the threshold keeps the rule. Unchanged for None."""
    threshold = rule.threshold if threshold is None else threshold
    if runs is not None:
        return FixedRule(runs, threshold, True, rule.confidence)
    return replace(rule, threshold=threshold)


def rule_from_dict(data: dict[str, Any]) -> Rule:
    """A rule from its :meth:`to_dict` (a report or an xdist worker's record)."""
    fields = {k: v for k, v in data.items() if k != "kind"}
    return SequentialRule(**fields) if data.get("kind") == "sequential" else FixedRule(**fields)


@dataclass(frozen=True)
class OperatingCharacteristic:
    """How a rule behaves on a query whose true trigger rate is known: the chance of each
    verdict and the runs it makes on average (sampled one wave at a time)."""

    triggered: float
    not_triggered: float
    undecided: float
    mean_runs: float


def operating(rule: Rule, rate: float) -> OperatingCharacteristic:
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
    return OperatingCharacteristic(out["triggered"], out["not_triggered"], out["undecided"], runs)
