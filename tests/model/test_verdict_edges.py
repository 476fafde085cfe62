"""The verdict rules at their edges: every state of a sampling checked against the rule's
definition written out plainly, bounds hit exactly, thresholds a hair off a run count, and
the shown intervals. Written to pin what mutation testing found loose (see the README)."""

from __future__ import annotations

import math

import pytest

from pytest_skilltrigger.model.stats import wilson
from pytest_skilltrigger.model.verdict import (
    Bounds,
    FixedRule,
    SequentialRule,
    operating,
    runs_still_needed,
    triggers_needed,
    with_runs,
)


@pytest.mark.parametrize("runs", [1, 2, 3, 5, 7, 10])
def test_a_threshold_a_hair_above_a_run_count_needs_one_trigger_more(runs: int) -> None:
    for k in range(runs):
        above = k / runs + 1e-12
        assert triggers_needed(runs, above) == k + 1
        assert triggers_needed(runs, k / runs) == k


def test_a_threshold_no_count_reaches_needs_more_triggers_than_runs() -> None:
    assert triggers_needed(4, 1.2) == 5
    assert triggers_needed(4, 0.0) == 0 and triggers_needed(4, -0.5) == 0


def _decided(triggers: int, misses: int, runs: int, need: int) -> bool:
    return triggers >= need or triggers + (runs - triggers - misses) < need


@pytest.mark.parametrize("runs", [1, 2, 3, 4, 6, 9])
@pytest.mark.parametrize("threshold", [0.0, 0.2, 1 / 3, 0.5, 0.7, 1.0, 1.5])
def test_runs_still_needed_is_the_first_run_that_could_settle_the_verdict(
    runs: int, threshold: float
) -> None:
    """From every state: 0 once settled or done; else the fewest more runs after which all
    triggers or all misses would settle it (one from the start when the threshold alone
    decides, as a verdict needs a rate)."""
    need = triggers_needed(runs, threshold)
    for triggers in range(runs + 1):
        for misses in range(runs + 1 - triggers):
            got = runs_still_needed(triggers, misses, runs, threshold)
            done = triggers + misses
            if done == 0 and not 0 < need <= runs:
                assert got == 1
            elif done >= runs or _decided(triggers, misses, runs, need):
                assert got == 0
            else:
                first = next(
                    k
                    for k in range(1, runs - done + 1)
                    if _decided(triggers + k, misses, runs, need)
                    or _decided(triggers, misses + k, runs, need)
                )
                assert got == first, (triggers, misses, runs, threshold)
    assert runs_still_needed(runs, 1, runs, threshold) == 0  # past the end: nothing


def test_the_fixed_rule_at_its_edges() -> None:
    rule = FixedRule(runs=4, threshold=0.5, confidence=0.9)
    assert rule.verdict(0, 0) == "undecided" and rule.verdict(0, -1) == "undecided"
    assert rule.verdict(2, 4) == "triggered" and rule.verdict(1, 4) == "not_triggered"
    assert rule.verdict(1, 1) == "triggered" and rule.verdict(0, 1) == "not_triggered"
    whole = FixedRule(runs=4, curtail=False)
    assert [whole.next_runs(t, 0) for t in range(6)] == [4, 3, 2, 1, 0, 0]
    assert rule.interval(3, 4) == wilson(3, 4, 0.9) != wilson(3, 4, 0.95)
    assert rule.describe() == "4 runs per query, threshold 0.5"
    assert whole.describe() == "4 runs per query, threshold 0.5, no early stopping"


def _llr(rule: SequentialRule, triggers: int, misses: int) -> float:
    p0, p1 = rule.threshold - rule.margin, rule.threshold + rule.margin
    return triggers * math.log(p1 / p0) + misses * math.log((1 - p1) / (1 - p0))


def test_a_log_ratio_exactly_on_the_bound_settles() -> None:
    """The confidence whose bound is exactly five triggers' worth (or five misses'): five
    settle it, four do not."""
    ratio = (0.65 / 0.35) ** 5
    rule = SequentialRule(confidence=ratio / (1 + ratio), min_runs=1, calibrated=False)
    assert rule.verdict(5, 5) == "triggered" and rule.verdict(4, 4) == "undecided"
    assert rule.verdict(0, 5) == "not_triggered" and rule.verdict(0, 4) == "undecided"
    assert rule.next_runs(4, 0) == 1 and rule.next_runs(5, 0) == 0


@pytest.mark.parametrize(
    "rule",
    [
        SequentialRule(calibrated=False),
        SequentialRule(threshold=0.3, margin=0.1, min_runs=2, max_runs=12, calibrated=False),
        SequentialRule(confidence=0.9, margin=0.2, min_runs=4, max_runs=9, calibrated=False),
    ],
)
def test_walds_rule_from_every_state(rule: SequentialRule) -> None:
    """Against the test written out: settled when the log-likelihood ratio reaches the
    bound (not before min_runs); the next wave the fewest runs after which a bound could be
    reached, at least up to min_runs, none when no bound is in reach before max_runs."""
    bound = math.log(rule.confidence / (1 - rule.confidence))

    def settled(t: int, m: int) -> bool:
        return t + m >= rule.min_runs and abs(_llr(rule, t, m)) >= bound - 1e-9

    for t in range(rule.max_runs + 1):
        for m in range(rule.max_runs + 1 - t):
            done = t + m
            verdict = rule.verdict(t, done)
            if settled(t, m):
                assert verdict == ("triggered" if _llr(rule, t, m) > 0 else "not_triggered")
            else:
                assert verdict == "undecided", (t, m)
            left = rule.max_runs - done
            reach = [
                k
                for k in range(1, left + 1)
                if abs(_llr(rule, t + k, m)) >= bound - 1e-9
                or abs(_llr(rule, t, m + k)) >= bound - 1e-9
            ]
            if settled(t, m) or not reach:
                assert rule.next_runs(t, m) == 0, (t, m)
            else:
                want = min(left, max(reach[0], rule.min_runs - done, 1))
                assert rule.next_runs(t, m) == want, (t, m)
    assert rule.interval(3, 5) == wilson(3, 5, rule.confidence)


CALIBRATED = [
    SequentialRule(),
    SequentialRule(threshold=0.3, margin=0.1, min_runs=2, max_runs=12),
    SequentialRule(confidence=0.9, margin=0.2, min_runs=4, max_runs=9),
    SequentialRule(max_runs=10),  # its last look is calibrated past Wald's (7 of 10 settles)
]


@pytest.mark.parametrize("rule", CALIBRATED)
def test_the_calibrated_rule_from_every_state(rule: SequentialRule) -> None:
    """Against its bounds written out: settled at a look with at least ``up[n]`` triggers or
    at most ``down[n]`` (not before min_runs); the next wave the fewest runs after which a
    bound could be crossed, none when none can before max_runs."""
    up, down = rule.bounds.up, rule.bounds.down
    for t in range(rule.max_runs + 1):
        for m in range(rule.max_runs + 1 - t):
            n = t + m
            settled = n >= rule.min_runs and (t >= up[n] or t <= down[n])
            want = ("triggered" if t >= up[n] else "not_triggered") if settled else "undecided"
            assert rule.verdict(t, n) == want, (t, m)
            reach = [
                k
                for k in range(max(1, rule.min_runs - n), rule.max_runs - n + 1)
                if t + k >= up[n + k] or t <= down[n + k]
            ]
            expected = 0 if settled or not reach else reach[0]
            assert rule.next_runs(t, m) == expected, (t, m)


@pytest.mark.parametrize("rule", CALIBRATED)
def test_the_calibration_spends_the_error_allowed_and_no_more(rule: SequentialRule) -> None:
    """The exact error rates at threshold ± margin are within 1 - confidence; moving any one
    look's bound one more step toward the middle would break that (or settle against the
    runs' own rate); and no bound is further out than Wald's."""
    alpha = 1 - rule.confidence
    low, high = rule.threshold - rule.margin, rule.threshold + rule.margin
    assert operating(rule, low).triggered <= alpha
    assert operating(rule, high).not_triggered <= alpha
    wald = SequentialRule(
        rule.threshold, rule.confidence, rule.margin, rule.min_runs, rule.max_runs, calibrated=False
    ).bounds
    up, down = list(rule.bounds.up), list(rule.bounds.down)
    for n in range(rule.min_runs, rule.max_runs + 1):
        assert up[n] <= wald.up[n] and down[n] >= wald.down[n], n
        assert up[n] >= rule.threshold * n - 1e-9 and down[n] < rule.threshold * n, n
        for side, step in ((up, -1), (down, 1)):
            side[n] += step
            test = Bounds(tuple(up), tuple(down), rule.min_runs)
            rate = rule.threshold * n
            against_rate = up[n] < rate - 1e-9 or down[n] >= rate - 1e-9
            assert (
                against_rate
                or down[n] >= up[n]
                or test.settles(low)[0] > alpha
                or test.settles(high)[1] > alpha
            ), (n, step)
            side[n] -= step


@pytest.mark.parametrize("rate", [0.0, 0.2, 0.35, 0.5, 0.62, 0.65, 0.9, 1.0])
def test_the_bounds_exact_chances_are_the_sampled_ones(rate: float) -> None:
    """``Bounds.settles`` (one run at a time) equals ``operating`` (in waves)."""
    rule = SequentialRule()
    got, waves = rule.bounds.settles(rate), operating(rule, rate)
    assert got[0] == pytest.approx(waves.triggered) and got[1] == pytest.approx(waves.not_triggered)


def test_bounds_settle_nothing_before_their_minimum_and_rules_say_what_they_are() -> None:
    """A test written out settles no look before ``min_runs``, even one Wald's bound would
    (at 60% two triggers of two reach it); the header names the rule and its bounds."""
    loose = SequentialRule(confidence=0.6, min_runs=3, calibrated=False)
    bounds = loose.bounds
    assert bounds.up[2] == 2 and bounds.verdict(2, 2) == "undecided"
    assert Bounds(bounds.up, bounds.down, 1).verdict(2, 2) == "triggered"
    assert SequentialRule().describe() == (
        "sequential at 95% (threshold 0.5 ± 0.15, 3 to 15 runs per query)"
    )
    wald = SequentialRule(0.4, 0.9, 0.1, 4, 12, calibrated=False)
    assert wald.describe() == (
        "sequential at 90% (threshold 0.4 ± 0.1, 4 to 12 runs per query, Wald's bounds)"
    )
    last = SequentialRule(max_runs=10)  # its last look is calibrated, not Wald's
    assert last.verdict(7, 10) == "triggered" and last.verdict(3, 10) == "not_triggered"


def test_runs_past_the_maximum_are_judged_by_walds_bound() -> None:
    """A caller's own count beyond max_runs (no look is calibrated there)."""
    rule = SequentialRule(max_runs=10)
    assert rule.verdict(11, 16) == "triggered" and rule.verdict(10, 16) == "undecided"
    assert rule.verdict(5, 16) == "not_triggered" and rule.verdict(6, 16) == "undecided"


def test_the_operating_characteristic_at_the_extremes() -> None:
    """A query that always triggers settles in the fewest runs with certainty; one that
    never does, likewise the other way; the reference rule's verdict is certain too."""
    rule = SequentialRule(calibrated=False)
    always, never = operating(rule, 1.0), operating(rule, 0.0)
    assert always.triggered == pytest.approx(1.0) and always.mean_runs == pytest.approx(5.0)
    assert never.not_triggered == pytest.approx(1.0) and never.mean_runs == pytest.approx(5.0)
    always, never = operating(SequentialRule(), 1.0), operating(SequentialRule(), 0.0)
    assert always.triggered == pytest.approx(1.0) and always.mean_runs == pytest.approx(4.0)
    assert never.not_triggered == pytest.approx(1.0) and never.mean_runs == pytest.approx(4.0)
    fixed = operating(FixedRule(runs=3, curtail=False), 0.5)
    assert fixed.mean_runs == pytest.approx(3.0) and fixed.undecided == 0.0
    assert fixed.triggered == pytest.approx(0.5)  # 2 or 3 of 3 at rate 0.5


def test_a_fixture_call_that_names_its_runs_gets_the_reference_rule() -> None:
    """``skill_trigger(..., runs=5)`` asks for five runs with early stopping; naming only a
    threshold keeps the session's rule (its kind, confidence and margin) at that threshold."""
    session = SequentialRule(confidence=0.9, margin=0.2)
    assert with_runs(session, 5) == FixedRule(5, 0.5, True, 0.9)
    assert with_runs(session, 5, 0.7) == FixedRule(5, 0.7, True, 0.9)
    assert with_runs(session, None, 0.7) == SequentialRule(0.7, 0.9, 0.2)
    assert with_runs(session, None) == session


@pytest.mark.parametrize("calibrated", [True, False])
def test_no_look_settles_against_the_rate_its_runs_show(calibrated: bool) -> None:
    """Near 0 or 1 a margin is lopsided, and Wald's bound alone would settle against the
    runs' own rate (threshold 0.79, margin 0.2: 12 of 15 is 0.80, yet its log-ratio says
    below); no look of either kind of bounds does, nor a count past the maximum."""
    lopsided = SequentialRule(0.79, 0.95, 0.2, calibrated=calibrated)
    assert lopsided.verdict(12, 15) != "not_triggered"
    assert lopsided.verdict(12, 20) != "triggered"  # past the maximum: 0.60
    for threshold in (0.1, 0.2, 0.3, 0.5, 0.7, 0.79, 0.85):
        for margin in (0.05, 0.1, 0.15, 0.2):
            if not margin < threshold < 1 - margin:
                continue
            rule = SequentialRule(threshold, 0.95, margin, calibrated=calibrated)
            for n in range(rule.min_runs, rule.max_runs + 1):
                for t in range(n + 1):
                    said = rule.verdict(t, n)
                    assert said != "triggered" or t >= threshold * n - 1e-9, (rule, t, n)
                    assert said != "not_triggered" or t < threshold * n - 1e-9, (rule, t, n)
