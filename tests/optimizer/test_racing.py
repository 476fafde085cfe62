"""Screening candidates by successive halving and racing two descriptions, through a session
whose backend answers by description and query (so every run is known and counted)."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from pathlib import Path

import pytest

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.optimizer.racing import Racer
from pytest_skilltrigger.skills.catalog import load_targets
from tests.helpers import make_skill

QUERIES = [
    ("merge a.pdf and b.pdf", True),
    ("split c.pdf", True),
    ("rotate d.pdf", True),
    ("bake bread", False),
    ("write a poem", False),
]


class ByDescription:
    """Triggers for the queries a description lists (its words), never for the others; a
    query in ``split`` alternates whatever the description says."""

    name = "scripted"
    model = "m"

    def __init__(self, split: frozenset[str] = frozenset()) -> None:
        self.split = split
        self.calls: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(backend=self.name)

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        return Usage(10, 1)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        with self._lock:
            self.calls[(context.description, query)] += 1
            n = self.calls[(context.description, query)]
        hit = n % 2 == 1 if query in self.split else query.split()[0] in context.description
        chosen = f"skill:{context.skill_name}" if hit else "text"
        return RunOutcome("triggered" if hit else "not_triggered", chosen=chosen)

    def ask(self, prompt: str, model: str | None = None) -> object:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.fixture
def racer_for(tmp_path: Path):
    folder = make_skill(tmp_path, QUERIES)
    (target,) = load_targets([str(folder)])
    sessions = []

    def make(backend: ByDescription, race_runs: int = 60) -> Racer:
        session = TriggerSession(Settings(cache_mode="off"), backend=backend)
        sessions.append(session)
        return Racer(session, target, race_runs)

    yield make, list(target.eval_set.entries)
    for session in sessions:
        session.close()


def test_successive_halving_keeps_the_best_and_spends_little_on_the_rest(racer_for) -> None:
    make, entries = racer_for
    backend = ByDescription()
    racer = make(backend)
    descriptions = ["merge only", "merge split rotate", "merge split"]
    winner, reached = racer.screen(descriptions, entries)
    assert descriptions[winner] == "merge split rotate"
    # the worst went after one run a query; of the two left, the loser after two
    assert reached == {0: 1, 1: 2, 2: 2}
    worst = sum(n for (d, _q), n in backend.calls.items() if d == "merge only")
    assert worst == len(entries)


def test_a_race_adds_runs_only_where_the_two_differ_until_it_is_settled(racer_for) -> None:
    make, entries = racer_for
    backend = ByDescription()
    racer = make(backend)
    incumbent = racer.measure("merge split", entries)
    challenger = racer.measure("merge split rotate", entries)
    before = Counter(backend.calls)
    race = racer.race(entries, ("merge split", incumbent), ("merge split rotate", challenger))
    assert race.verdict == "better" and race.gain.interval == (1, 1)
    added = backend.calls - before
    # only "rotate d.pdf" differs: it alone got more runs, on both sides alike
    assert {q for _d, q in added} == {"rotate d.pdf"}
    assert added[("merge split", "rotate d.pdf")] == added[("merge split rotate", "rotate d.pdf")]
    assert race.extra_runs == sum(added.values())


def test_an_undecidable_race_stops_at_its_run_budget(racer_for) -> None:
    make, entries = racer_for
    backend = ByDescription(split=frozenset({"rotate d.pdf"}))
    racer = make(backend, race_runs=16)
    incumbent = racer.measure("merge split", entries)
    challenger = racer.measure("merge split rotate", entries)
    race = racer.race(entries, ("merge split", incumbent), ("merge split rotate", challenger))
    assert race.verdict == "undecided"
    assert 16 <= race.extra_runs < 16 + 2 * 2 * 6  # the step that crossed the budget
    assert all(r.passed is not None for r in itertools.chain(race.incumbent, race.challenger))
