"""Scores that use what was sampled, and the paired gain of one description over another.

A description's *score* on a set of queries is the expected number it gets right: the sum,
over its queries, of the probability that the query's true trigger rate is on the side it
should be (each query's posterior from its runs, :attr:`QueryResult.right_probability`), not
a 0/1 count of a few runs. Its interval is the exact distribution of that count.

The *gain* of a challenger over an incumbent on the same queries is paired: a query both
settle on the same side gains nothing (the descriptions agree on it), and only the queries
where they differ, or where either is unsettled, carry uncertainty. Its exact distribution is
:func:`~pytest_skilltrigger.model.stats.gain_distribution` over those queries; the challenger
is *better* when the gain is positive with probability at least the confidence, *worse* when
it is negative with that probability, and undecided otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.stats import gain_distribution

GainVerdict = Literal["better", "worse", "undecided"]


def quantiles(dist: dict[int, float], confidence: float) -> tuple[int, int]:
    """The central interval of a distribution over whole numbers at ``confidence``."""
    tail = (1 - confidence) / 2
    acc, low, high = 0.0, None, None
    for value in sorted(dist):
        acc += dist[value]
        if low is None and acc > tail:
            low = value
        if high is None and acc >= 1 - tail:
            high = value
    return (low if low is not None else 0), (high if high is not None else 0)


@dataclass(frozen=True)
class Score:
    """The expected number of queries right, its interval, and how many there are."""

    expected: float
    interval: tuple[int, int]
    total: int
    complete: bool  # every query has a verdict (none errored or was skipped)

    def text(self) -> str:
        low, high = self.interval
        return f"{self.expected:.1f} of {self.total} ({low}–{high})"


def _right_probabilities(results: Sequence[QueryResult]) -> list[float]:
    return [r.right_probability for r in results if r.runs_made or r.unlisted]


def expected_right(results: Sequence[QueryResult]) -> float:
    """A score's expected value alone, without the interval's exact distribution (what
    screening ranks candidates by)."""
    return sum(_right_probabilities(results))


def score(results: Sequence[QueryResult], confidence: float) -> Score:
    """A description's score on these results (see the module docstring)."""
    probabilities = _right_probabilities(results)
    dist = gain_distribution([(0.0, p) for p in probabilities])
    complete = all(r.passed is not None for r in results)
    return Score(sum(probabilities), quantiles(dist, confidence), len(results), complete)


def _agree(a: QueryResult, b: QueryResult) -> bool:
    """Both settled, on the same side: the pair carries no gain."""
    return a.decided and b.decided and a.verdict == b.verdict


@dataclass(frozen=True)
class Gain:
    """The paired gain of a challenger over an incumbent (queries the challenger gets right
    that the incumbent does not, less the reverse)."""

    expected: float
    interval: tuple[int, int]
    p_better: float
    p_worse: float
    differing: int  # queries where they differ or either is unsettled
    confidence: float

    @property
    def verdict(self) -> GainVerdict:
        """Better when the gain's interval at the confidence lies above zero, worse when it
        lies below, undecided while it holds zero."""
        low, high = self.interval
        if low > 0:
            return "better"
        if high < 0:
            return "worse"
        return "undecided"

    def text(self) -> str:
        """The gain in words: its expected value and interval; when the two settle every
        query on the same side, that (their scores may still differ: a score also counts
        how sure each settled query is)."""
        if not self.differing:
            return "no query differs (both settle every one on the same side)"
        low, high = self.interval
        return (
            f"{self.expected:+.1f} ({low:+d} to {high:+d} at {self.confidence:.0%}, "
            f"P(better) {self.p_better:.2f})"
        )


def paired_gain(
    incumbent: Sequence[QueryResult], challenger: Sequence[QueryResult], confidence: float
) -> Gain:
    """The gain of ``challenger`` over ``incumbent``, query by query on the same queries."""
    pairs = [
        (a.right_probability, b.right_probability)
        for a, b in zip(incumbent, challenger, strict=True)
        if not _agree(a, b)
    ]
    dist = gain_distribution(pairs)
    return Gain(
        expected=sum(b - a for a, b in pairs),
        interval=quantiles(dist, confidence),
        p_better=sum(p for g, p in dist.items() if g > 0),
        p_worse=sum(p for g, p in dist.items() if g < 0),
        differing=len(pairs),
        confidence=confidence,
    )


def uncertainty(incumbent: QueryResult, challenger: QueryResult) -> float:
    """How much a pair adds to the gain's spread: where more runs help the comparison most
    (zero for a pair both settle on the same side)."""
    if _agree(incumbent, challenger):
        return 0.0
    a, b = incumbent.right_probability, challenger.right_probability
    return a * (1 - a) + b * (1 - b)
