"""The verdict rule and exact early stopping, checked exhaustively for up to 12 runs."""

from __future__ import annotations

import itertools

import pytest

from pytest_skilltrigger.model.verdict import passes, runs_still_needed, triggers_needed

THRESHOLDS = [0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 1 / 3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65,
              2 / 3, 0.7, 0.75, 0.8, 0.9, 0.95, 1.0]  # fmt: skip


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
