"""The statistics, checked against values computed independently (closed forms, brute
force over every sequence of runs)."""

from __future__ import annotations

import itertools
import math

import pytest

from pytest_skilltrigger.model.stats import (
    binomial_cdf,
    gain_distribution,
    prob_at_least,
    sign_test,
    wilson,
    z_value,
)


def test_z_value_of_the_usual_levels() -> None:
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_value(0.90) == pytest.approx(1.644854, abs=1e-6)


@pytest.mark.parametrize(
    "k,n,lo,hi",
    [
        (7, 15, 0.2481, 0.6988),  # the borderline example: 0.25-0.70
        (3, 3, 0.4385, 1.0),
        (0, 3, 0.0, 0.5615),
        (10, 20, 0.2993, 0.7007),
    ],
)
def test_wilson_interval_matches_the_closed_form(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson(k, n, 0.95)
    assert got == pytest.approx((lo, hi), abs=1e-4)


def test_wilson_without_runs_is_everything() -> None:
    assert wilson(0, 0) == (0.0, 1.0)


def test_binomial_cdf_by_brute_force() -> None:
    n, p = 6, 0.3
    for k in range(-1, n + 2):
        brute = sum(
            p ** sum(seq) * (1 - p) ** (n - sum(seq))
            for seq in itertools.product((0, 1), repeat=n)
            if sum(seq) <= k
        )
        assert binomial_cdf(k, n, p) == pytest.approx(brute)


def test_posterior_of_a_rate_is_the_beta_tail() -> None:
    # Beta(k+1, n-k+1) with n=4, k=3: P(p >= 0.5) = 1 - I_0.5(4, 2) = 13/16
    assert prob_at_least(3, 4, 0.5) == pytest.approx(13 / 16)
    # no run: the uniform prior
    assert prob_at_least(0, 0, 0.3) == pytest.approx(0.7)
    # numeric integration of the Beta density as an independent check
    k, n, t = 5, 9, 0.62
    steps = 20000
    grid = [(i + 0.5) / steps for i in range(steps)]
    dens = [x**k * (1 - x) ** (n - k) for x in grid]
    total = sum(dens)
    above = sum(d for x, d in zip(grid, dens, strict=True) if x >= t)
    assert prob_at_least(k, n, t) == pytest.approx(above / total, abs=1e-4)


def test_sign_test_is_the_binomial_tail() -> None:
    assert sign_test(5, 0) == pytest.approx(1 / 32)
    assert sign_test(4, 1) == pytest.approx(6 / 32)
    assert sign_test(0, 3) == 1.0
    assert sign_test(0, 0) == 1.0


def test_gain_distribution_by_enumeration() -> None:
    pairs = [(0.9, 0.2), (0.5, 0.5), (0.1, 0.95)]
    got = gain_distribution(pairs)
    brute: dict[int, float] = {}
    for outcome in itertools.product((0, 1), repeat=6):
        mass = 1.0
        gain = 0
        draws = zip(outcome[::2], outcome[1::2], strict=True)
        for (a, b), (x, y) in zip(pairs, draws, strict=True):
            mass *= (a if x else 1 - a) * (b if y else 1 - b)
            gain += y - x
        brute[gain] = brute.get(gain, 0.0) + mass
    assert set(got) <= set(brute)
    for value, mass in brute.items():
        assert got.get(value, 0.0) == pytest.approx(mass)
    assert math.fsum(got.values()) == pytest.approx(1.0)
