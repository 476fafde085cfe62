"""Scores from what was sampled, and the paired gain: queries both descriptions settle alike
carry nothing, only the differing or unsettled ones carry the comparison."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.stats import prob_at_least
from pytest_skilltrigger.model.verdict import SequentialRule
from pytest_skilltrigger.optimizer.scoring import (
    paired_gain,
    quantiles,
    score,
    uncertainty,
)


def result(should: bool, triggers: int, runs: int, error: bool = False) -> QueryResult:
    outcomes = [RunOutcome("triggered", "skill:s")] * triggers
    outcomes += [RunOutcome("not_triggered", "text")] * (runs - triggers)
    if error:
        outcomes.append(RunOutcome("error", error="boom"))
    return QueryResult("q", should, SequentialRule(), tuple(outcomes))


def test_a_score_adds_up_how_likely_each_verdict_is_right() -> None:
    results = [result(True, 5, 5), result(False, 0, 5), result(True, 7, 15)]
    got = score(results, 0.95)
    expected = 2 * (1 - 0.5**6) + prob_at_least(7, 15, 0.5)
    assert got.expected == pytest.approx(expected)
    assert got.total == 3 and got.complete
    assert got.interval == (2, 3)
    errored = score([result(True, 2, 2, error=True)], 0.95)
    assert not errored.complete and errored.expected == pytest.approx(1 - 0.5**3)


def test_pairs_settled_alike_carry_no_gain() -> None:
    same = [result(True, 5, 5)] * 10
    gain = paired_gain(same, same, 0.95)
    assert gain.differing == 0 and gain.expected == 0 and gain.verdict == "undecided"
    assert uncertainty(same[0], same[0]) == 0


def test_one_query_settled_the_other_way_is_a_gain_once_its_interval_excludes_zero() -> None:
    incumbent = [result(True, 5, 5)] * 9 + [result(True, 0, 5)]
    challenger = [result(True, 5, 5)] * 10
    gain = paired_gain(incumbent, challenger, 0.95)
    # five runs each: P(gain <= 0) is 3%, more than the interval's 2.5% tail: undecided
    assert gain.differing == 1 and gain.interval == (0, 1) and gain.verdict == "undecided"
    assert gain.p_better == pytest.approx((1 - 0.5**6) ** 2)
    # ten runs each settle it: the interval excludes zero
    incumbent[-1], challenger[-1] = result(True, 0, 10), result(True, 10, 10)
    gain = paired_gain(incumbent, challenger, 0.95)
    assert gain.interval == (1, 1) and gain.verdict == "better"
    worse = paired_gain(challenger, incumbent, 0.95)
    assert worse.verdict == "worse" and worse.expected < 0


def test_unsettled_queries_leave_the_gain_undecided_and_say_where_runs_help() -> None:
    incumbent = [result(True, 7, 15), result(True, 5, 5)]
    challenger = [result(True, 8, 15), result(True, 5, 5)]
    gain = paired_gain(incumbent, challenger, 0.95)
    assert gain.verdict == "undecided" and gain.differing == 1
    assert uncertainty(incumbent[0], challenger[0]) > 0.4
    assert uncertainty(incumbent[1], challenger[1]) == 0


def test_quantiles_of_a_distribution() -> None:
    dist = {-1: 0.01, 0: 0.04, 1: 0.9, 2: 0.05}
    assert quantiles(dist, 0.95) == (0, 2)
    assert quantiles({0: 1.0}, 0.95) == (0, 0)
