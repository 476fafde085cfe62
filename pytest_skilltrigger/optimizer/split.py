"""The train/test split, exactly as the reference tool makes it.

The reference seeds Python's global RNG with 42, shuffles the should-trigger entries, then the
should-not entries, and takes the first ``max(1, int(len * holdout))`` of each as test. A
private ``random.Random(seed)`` draws the same sequence as ``random.seed(seed)`` without
disturbing anyone else's global RNG, so the same file gives the same sets as the reference.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from pytest_skilltrigger.skills.evalset import EvalEntry

T = TypeVar("T", bound=EvalEntry)
KINDS = ((True, "should-trigger"), (False, "should-not-trigger"))


def split_entries(entries: Sequence[T], holdout: float, seed: int = 42) -> tuple[list[T], list[T]]:
    """(train, test), stratified by should_trigger; holdout 0 puts everything in train."""
    if holdout <= 0:
        return list(entries), []
    rng = random.Random(seed)
    positives = [e for e in entries if e.should_trigger]
    negatives = [e for e in entries if not e.should_trigger]
    rng.shuffle(positives)
    rng.shuffle(negatives)
    test: list[T] = []
    train: list[T] = []
    for group in (positives, negatives):
        if not group:
            continue
        n_test = max(1, int(len(group) * holdout))
        test.extend(group[:n_test])
        train.extend(group[n_test:])
    return train, test


def split_problem(entries: Sequence[EvalEntry], holdout: float, seed: int = 42) -> str | None:
    """Why this split cannot measure an improvement, or None when it can.

    The proposer learns from train failures of both kinds, and a candidate is accepted on
    test: each side needs a query that should trigger and one that should not, else every
    round scores ``0/0`` on a side and nothing can win while the rounds still spend.
    """
    train, test = split_entries(entries, holdout, seed)
    for side, chosen in (("train", train), ("test", test)):
        kinds = {e.should_trigger for e in chosen}
        missing = [label for value, label in KINDS if value not in kinds]
        if missing:
            return (
                f"--trigger-holdout {holdout:g} leaves no {' and no '.join(missing)} query in the "
                f"{side} set; the improvement rounds need both kinds on both sides (a holdout "
                "between 0 and 1, and at least two queries of each kind)"
            )
    return None
