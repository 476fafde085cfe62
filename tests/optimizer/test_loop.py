"""The improvement loop driven directly (no pytest run): what a published iteration reports
never changes afterwards, while the races against the best carry every run they added."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
from pytest_skilltrigger.optimizer.loop import RoundsStart, optimize
from pytest_skilltrigger.optimizer.proposer import Proposal
from pytest_skilltrigger.optimizer.record import RoundRecord, freeze_round
from pytest_skilltrigger.optimizer.rounds import Iteration, Optimization
from pytest_skilltrigger.optimizer.scoring import score
from pytest_skilltrigger.skills.catalog import load_targets
from tests.fake_messages_api import FakeMessagesAPI
from tests.plugin.test_items import _sdk_warmed_up, entry, make_skill  # noqa: F401

WANTED = ["tidy csv one", "tidy csv two", "tidy csv three", "tidy csv four"]
UNWANTED = ["bake bread", "paint walls", "fold laundry", "water plants"]


class Proposer:
    """A new description each round (the runs do not depend on it: every race is even)."""

    def __init__(self) -> None:
        self.asked = 0

    def propose(self, prompt: str, count: int = 1, tried: Sequence[str] = ()) -> Proposal:
        self.asked += 1
        return Proposal(prompt, "", [f"Tidy csv files, take {self.asked}."])


def test_a_published_iteration_keeps_its_results_while_races_extend_the_best(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    for query in WANTED:  # every wanted request is a coin flip: each race has runs to add
        fake_api.script(query, ["skill:alpha", "text"])
    for query in UNWANTED:  # always a wrong trigger: the train side never all passes, so
        fake_api.script(query, ["skill:alpha"])  # the loop never stops before its 3 rounds
    entries = [entry(q, True) for q in WANTED] + [entry(q, False) for q in UNWANTED]
    (target,) = load_targets([str(make_skill(tmp_path, "alpha", entries, "Tidy csv."))])
    published: dict[int, list[tuple[str, int]]] = {}
    frozen: dict[int, RoundRecord] = {}

    def on_iteration(run: Optimization, it: Iteration) -> None:
        published[it.iteration] = [(r.query, r.runs_made) for r in it.train_side]
        frozen[it.iteration] = freeze_round(run, it)

    session = TriggerSession(Settings(cache_mode="off"))
    try:
        options = OptimizerSettings(
            holdout=0.5, max_iterations=3, candidates_per_round=1, race_runs=24
        )
        run = optimize(target, session, Proposer(), options, RoundsStart(on_iteration=on_iteration))
    finally:
        session.close()
    assert len(run.iterations) == 3, run.exit_reason
    start, second, third = run.iterations
    assert not second.became_best and not third.became_best  # even races: the start stays
    for it in run.iterations:  # as reported when published, whatever raced them later
        assert [(r.query, r.runs_made) for r in it.train_side] == published[it.iteration]
    assert second.race is not None and third.race is not None
    assert second.race.extra_runs > 0 and third.race.extra_runs > 0
    # the third round's race went on from the start's runs as the second race left them
    start_runs = sum(r.runs_made for r in start.train_side)
    assert sum(r.runs_made for r in second.race.incumbent) > start_runs
    assert sum(r.runs_made for r in third.race.incumbent) > sum(
        r.runs_made for r in second.race.incumbent
    )
    # the record frozen as the round ended keeps its figures, whatever raced it later
    assert frozen[1].train_score == score(start.train_side, 0.95)
    assert [(r.query, r.runs_made) for r in frozen[1].train] == published[1][: len(start.train)]
