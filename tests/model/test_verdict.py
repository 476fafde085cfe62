"""The verdict rules: the reference rule's exact early stopping, checked exhaustively for up
to 12 runs, and the sequential rule's waves and error rates, checked over every sequence of
runs and computed exactly."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from pytest_skilltrigger.model.verdict import (
    FixedRule,
    SequentialRule,
    operating,
    passes,
    rule_from_dict,
    runs_still_needed,
    triggers_needed,
)

THRESHOLDS = [
    0.0,
    0.05,
    0.1,
    0.2,
    0.25,
    0.3,
    1 / 3,
    0.4,
    0.45,
    0.5,
    0.55,
    0.6,
    0.65,
    2 / 3,
    0.7,
    0.75,
    0.8,
    0.9,
    0.95,
    1.0,
]


def curtailed(answers: tuple[bool, ...], threshold: float) -> tuple[int, int]:
    """(triggers, runs) when runs are made in waves of ``runs_still_needed``."""
    runs = len(answers)
    triggers = misses = 0
    while wave := runs_still_needed(triggers, misses, runs, threshold):
        assert 0 < wave <= runs - triggers - misses  # never more than is left
        for hit in answers[triggers + misses : triggers + misses + wave]:
            triggers, misses = triggers + hit, misses + (not hit)
    return triggers, triggers + misses


@pytest.mark.parametrize("runs", range(1, 13))
def test_curtailment_gives_the_full_verdict_for_every_outcome_sequence(runs: int) -> None:
    for threshold in THRESHOLDS:
        for answers in itertools.product((False, True), repeat=runs):
            triggers, made = curtailed(answers, threshold)
            assert made >= 1
            full = sum(answers) / runs
            for should in (True, False):
                assert passes(should, triggers / made, threshold) == passes(
                    should, full, threshold
                ), (answers, threshold, should)


@pytest.mark.parametrize("runs", range(1, 13))
def test_no_run_is_wasted(runs: int) -> None:
    """Every run curtailment makes could still have changed the verdict: stopping one run
    earlier would leave it open for some continuation."""
    for threshold in THRESHOLDS:
        need = triggers_needed(runs, threshold)
        for answers in itertools.product((False, True), repeat=runs):
            _, made = curtailed(answers, threshold)
            if made <= 1:
                continue
            before = answers[: made - 1]
            t = sum(before)
            decided = t >= need or t + (runs - len(before)) < need
            assert not decided, (answers, threshold)


def test_triggers_needed_is_the_smallest_count_reaching_the_threshold() -> None:
    for runs in range(1, 13):
        for threshold in THRESHOLDS:
            need = triggers_needed(runs, threshold)
            assert need == next((t for t in range(runs + 1) if t / runs >= threshold), runs + 1)


def test_the_reference_verdict() -> None:
    assert passes(True, 0.5, 0.5) and not passes(False, 0.5, 0.5)
    assert passes(False, 0.49, 0.5) and not passes(True, 0.49, 0.5)


# -- the sequential rule ---------------------------------------------------------------------
RULE = SequentialRule()  # 0.95, margin 0.15, 3 to 15 runs, threshold 0.5, calibrated
WALD = SequentialRule(calibrated=False)  # the same test with Wald's bounds


def one_at_a_time(rule: SequentialRule, sequence: tuple[int, ...]) -> tuple[str, int]:
    """The verdict and runs of checking after every single run (the textbook procedure)."""
    k = 0
    for n, hit in enumerate(sequence, 1):
        k += hit
        if n >= rule.min_runs and rule.verdict(k, n) != "undecided":
            return rule.verdict(k, n), n
    return "undecided", len(sequence)


def in_waves(rule: SequentialRule, sequence: tuple[int, ...]) -> tuple[str, int]:
    """The same sequence of runs sampled in the rule's waves (as the sampler and batches do)."""
    k = m = 0
    while (wave := rule.next_runs(k, m)) > 0:
        chunk = sequence[k + m : k + m + wave]
        k, m = k + sum(chunk), m + len(chunk) - sum(chunk)
    return rule.verdict(k, k + m), k + m


def test_at_half_walds_bound_is_five_more_triggers_than_misses() -> None:
    assert WALD.verdict(5, 5) == "triggered" and WALD.verdict(4, 4) == "undecided"
    assert WALD.verdict(6, 7) == "triggered" and WALD.verdict(5, 7) == "undecided"
    assert WALD.verdict(0, 5) == "not_triggered" and WALD.verdict(5, 15) == "not_triggered"
    assert WALD.verdict(7, 15) == "undecided"
    # fewer runs than the minimum decide nothing, however clear
    assert SequentialRule(confidence=0.6, min_runs=3).verdict(2, 2) == "undecided"


def test_calibrated_at_half_is_four_more_within_eight_runs_five_after() -> None:
    """The default's bounds: four more triggers than misses settle up to eight runs, five
    after, and the same the other way; never before the minimum of three runs."""
    for runs in range(RULE.max_runs + 1):
        for triggers in range(runs + 1):
            lead = triggers - (runs - triggers)
            need = 4 if runs <= 8 else 5
            settled = runs >= 3 and abs(lead) >= need
            want = ("triggered" if lead > 0 else "not_triggered") if settled else "undecided"
            assert RULE.verdict(triggers, runs) == want, (triggers, runs)


@pytest.mark.parametrize("rule", [RULE, WALD])
def test_waves_reach_exactly_the_verdict_and_runs_of_one_run_at_a_time(
    rule: SequentialRule,
) -> None:
    """Every possible sequence of 15 runs: sampling in waves never overshoots."""
    for sequence in itertools.product((0, 1), repeat=rule.max_runs):
        waves = in_waves(rule, sequence)
        single = one_at_a_time(rule, sequence)
        assert waves[0] == single[0], sequence
        # waves stop as soon as no bound can be reached; single runs go on to the maximum
        assert waves[1] <= single[1], sequence
        if single[0] != "undecided":
            assert waves[1] == single[1], sequence


def test_a_query_that_can_no_longer_be_decided_stops_as_borderline() -> None:
    assert WALD.next_runs(6, 6) == 0  # 12 runs, 3 left: five more of one kind cannot happen
    assert WALD.verdict(6, 12) == "undecided"
    assert WALD.next_runs(5, 6) == 4  # 11 runs: four misses in a row would decide
    assert WALD.next_runs(5, 5) == 5  # 10 runs: five triggers (or misses) in a row would do
    assert WALD.next_runs(0, 0) == 5  # nothing can be decided before five runs
    # calibrated: four more settle up to eight runs, so a new query's first wave is four
    assert RULE.next_runs(0, 0) == 4 and RULE.next_runs(2, 1) == 3  # 5 of 6 would do
    assert RULE.next_runs(5, 2) == 1  # 7 runs: a sixth trigger at the eighth run settles
    assert RULE.next_runs(6, 6) == 0 and RULE.verdict(6, 12) == "undecided"
    assert RULE.next_runs(5, 6) == 4  # 11 runs: four misses in a row reach 5 of 15


@pytest.mark.parametrize("calibrated", [True, False])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize("margin", [0.1, 0.15, 0.2])
def test_outside_the_margin_a_verdict_is_wrong_at_most_one_minus_the_confidence(
    confidence: float, margin: float, calibrated: bool
) -> None:
    rule = SequentialRule(confidence=confidence, margin=margin, calibrated=calibrated)
    for step in range(0, 101):
        rate = step / 100
        if abs(rate - 0.5) < margin:
            continue
        result = operating(rule, rate)
        wrong = result.not_triggered if rate >= 0.5 else result.triggered
        assert wrong <= 1 - confidence, (rate, wrong)


def test_the_operating_characteristic_is_exact() -> None:
    """``operating`` against the brute force over every sequence of runs."""
    rule = SequentialRule(max_runs=10)
    rate = 0.62
    expected = {"triggered": 0.0, "not_triggered": 0.0, "undecided": 0.0}
    runs = 0.0
    for sequence in itertools.product((0, 1), repeat=rule.max_runs):
        mass = math.prod(rate if hit else 1 - rate for hit in sequence)
        verdict, made = in_waves(rule, sequence)
        expected[verdict] += mass
        runs += mass * made
    got = operating(rule, rate)
    assert got.triggered == pytest.approx(expected["triggered"])
    assert got.not_triggered == pytest.approx(expected["not_triggered"])
    assert got.undecided == pytest.approx(expected["undecided"])
    assert got.mean_runs == pytest.approx(runs)


def test_the_fixed_rule_is_the_reference_one() -> None:
    rule = FixedRule(runs=3, threshold=0.5)
    assert rule.next_runs(0, 0) == 2 and rule.next_runs(2, 0) == 0 and rule.next_runs(1, 1) == 1
    assert rule.verdict(2, 3) == "triggered" and rule.verdict(1, 3) == "not_triggered"
    assert FixedRule(runs=3, curtail=False).next_runs(2, 0) == 1
    assert operating(rule, 1.0).mean_runs == pytest.approx(2.0)


def test_rules_cross_as_json() -> None:
    for rule in (
        FixedRule(5, 0.6, False),
        SequentialRule(0.4, 0.9, 0.2, 4, 12),
        SequentialRule(0.4, 0.9, 0.2, 4, 12, calibrated=False),
    ):
        assert rule_from_dict(json.loads(json.dumps(rule.to_dict()))) == rule
