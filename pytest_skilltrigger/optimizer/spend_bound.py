"""The most the improvement rounds may spend, known before any call: the header's estimate.

Each skill's rounds are bounded from what :mod:`.loop` does, with every sampling at its most:

- iteration 1 samples the folder's queries (its siblings' and its routing entries,
  :mod:`.folder`) for the starting description by the session's rule, and the skill's own
  too where the items' results cannot be reused (an error, a skip, or a sibling rewritten
  before it: counted in full);
- each later round screens its candidates on the train side (own and folder train queries)
  by successive halving, measures the survivor on it by the rule, races it against the best
  (at most ``race_runs`` more runs, and one race step past it) and measures it on the
  held-out side by the rule;
- the acceptance race samples the start and the best afresh on its queries (all of them, or
  the held-out ones with ``accept_on="test"``) with a first look of three runs, then races
  them; with a model matrix the same race runs again on every other model.

Every round also asks the improve model once, and once more to repair an answer: those
requests are counted apart (their size depends on the answers, so they are priced when made).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
from pytest_skilltrigger.optimizer.folder import folder_of
from pytest_skilltrigger.optimizer.racing import (
    FIRST_LOOK_RUNS,
    RACE_PAIRS,
    RACE_STEP,
    halving_stages,
)
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet

ASKS_A_ROUND = 2  # a proposal, and one repair request


def rounds_bound(
    targets: Sequence[Target],
    routing_sets: Sequence[RoutingSet],
    settings: Settings,
    opt: OptimizerSettings,
    items_stored: bool = False,
) -> tuple[int, int, int]:
    """The most the rounds may make: trigger calls on the first model, trigger calls on each
    other model of a matrix (the acceptance race), requests to the improve model.
    ``items_stored``: stored runs decide every item, so a lone skill's iteration 1, which
    samples its starting description on the items' own requests, makes no call (what they
    will not cover is counted; in a folder a sibling rewritten first changes the requests)."""
    most = settings.rule.max_runs
    race = opt.race_runs + 2 * RACE_STEP * RACE_PAIRS  # a race's last step may pass its budget
    # runs per train-side query over the screening's stages
    screen = sum(size * runs for size, runs in halving_stages(opt.candidates_per_round))
    rounds = max(0, opt.max_iterations - 1)
    calls = others = asks = 0
    for target in targets:
        if not target.context().model_invocable:
            continue
        train, test = split_entries(target.eval_set.entries, opt.holdout, opt.seed)
        folder = folder_of(target, targets, routing_sets, opt.holdout, opt.seed)
        train_side, test_side = len(train) + len(folder.train), len(test) + len(folder.test)
        # the items' results are reused, but not those that errored or were skipped, nor any
        # once a sibling of the folder was rewritten: then every query is sampled again
        start = 0 if items_stored and len(targets) == 1 else (train_side + test_side) * most
        per_round = train_side * (screen + most) + race + test_side * most
        raced = test_side if opt.accept_on == "test" and test_side else train_side + test_side
        acceptance = 2 * raced * FIRST_LOOK_RUNS + race
        calls += start + per_round * rounds + acceptance
        others += acceptance
        asks += ASKS_A_ROUND * rounds
    return calls, others if len(settings.lane_models) > 1 else 0, asks
