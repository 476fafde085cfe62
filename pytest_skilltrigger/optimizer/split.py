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


def split_entries(
    entries: Sequence[T], holdout: float, seed: int = 42
) -> tuple[list[T], list[T]]:
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
