"""The trigger-rate threshold check and exact early stopping.

The verdict matches the reference tool: should_trigger passes when rate >= threshold, a
should-not query passes when rate < threshold. Early stopping (curtailment) only stops once the
remaining runs can no longer change that verdict, so it always equals the verdict that all
``runs`` runs would give on the same outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def passes(should_trigger: bool, rate: float, threshold: float) -> bool:
    """The reference verdict for one query."""
    triggered = rate >= threshold
    return triggered if should_trigger else not triggered


def routes(expected: str | None, shares: Mapping[str, float], threshold: float) -> bool:
    """The routing verdict, on the same rule: the expected skill triggers (its share of the
    runs reaches the threshold); for no expected skill, every skill of the folder stays
    under it."""
    if expected is not None:
        return passes(True, shares.get(expected, 0.0), threshold)
    return all(passes(False, share, threshold) for share in shares.values())


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
    """How many more runs can be issued without any of them possibly being wasted.

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

