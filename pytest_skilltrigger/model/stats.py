"""The statistics behind every verdict, rate and comparison, in the standard library only.

Why no SciPy: every quantity here is a sum of binomial terms of at most a few hundred runs,
exact in floating point, and the plugin must stay cheap to import. Each function says which
test or interval it is, so a number in a report can be traced to its formula:

- :func:`wilson` -- the Wilson score interval of a rate (shown beside every rate);
- :func:`prob_at_least` -- the posterior probability that a rate is at least a threshold,
  under a uniform prior (how likely a query's verdict is right, for the optimizer's scores);
- :func:`sign_test` -- the exact one-sided sign test (McNemar's exact test on the discordant
  pairs of a paired comparison: regressions against a baseline);
- :func:`gain_distribution` -- the exact distribution of a paired gain in right verdicts,
  given each query's posterior probabilities (the optimizer's races).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist


@lru_cache(maxsize=64)
def z_value(confidence: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / trials`` at ``confidence``.

    Unlike the textbook ``p ± z·se`` it stays inside [0, 1] and is not degenerate at 0 or all
    successes, which is the common case for a trigger rate of a few runs (3 of 3 is
    0.44–1.00 at 95%, not 1.00–1.00). ``(0, 1)`` when nothing was observed.
    """
    if trials <= 0:
        return 0.0, 1.0
    z = z_value(confidence)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return math.fsum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1))


def prob_at_least(successes: int, trials: int, threshold: float) -> float:
    """P(rate >= threshold | successes of trials), the rate's posterior under a uniform prior.

    The posterior is Beta(successes + 1, failures + 1), and for whole-number parameters
    P(Beta(a, b) >= x) = P(Binomial(a + b - 1, x) <= a - 1): no special functions needed.
    With no run it is 1 - threshold (the prior's).
    """
    if threshold <= 0:
        return 1.0
    if threshold >= 1:
        return 0.0
    return binomial_cdf(successes, trials + 1, threshold)


def sign_test(worse: int, better: int) -> float:
    """The exact one-sided p-value that ``worse`` of ``worse + better`` discordant pairs is
    no more than chance (McNemar's exact test): P(X >= worse), X ~ Binomial(n, 1/2)."""
    n = worse + better
    if n == 0 or worse == 0:
        return 1.0
    return 1.0 - binomial_cdf(worse - 1, n, 0.5)


def gain_distribution(pairs: Sequence[tuple[float, float]]) -> dict[int, float]:
    """The exact distribution of ``sum(B_q - A_q)`` for independent indicators with
    ``P(A_q) = a``, ``P(B_q) = b`` for each ``(a, b)`` in ``pairs``: how many more queries a
    candidate gets right than the incumbent, given what the runs say of each.

    Each query adds -1, 0 or +1; the distribution is convolved query by query (at most
    ``2n + 1`` values), so it is exact for any number of queries a report holds.
    """
    dist = {0: 1.0}
    for a, b in pairs:
        up, down = b * (1 - a), a * (1 - b)
        same = 1.0 - up - down
        new: dict[int, float] = {}
        for value, mass in dist.items():
            for step, weight in ((1, up), (0, same), (-1, down)):
                if weight > 0:
                    new[value + step] = new.get(value + step, 0.0) + mass * weight
        dist = new
    return dist
