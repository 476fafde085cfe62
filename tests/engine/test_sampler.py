"""The sampler: waves of runs, exact early stopping, shared samplings, the store's part.

Backends here are scripted in-process objects (the sampler's contract is the backend
interface, not HTTP); the HTTP path is covered against the fake API elsewhere.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.engine.run_sources import Stop
from pytest_skilltrigger.engine.run_sources.live import LiveRuns
from pytest_skilltrigger.engine.sampler import Recorder, Sampler
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import BUDGET_REACHED, RunOutcome, Usage
from pytest_skilltrigger.model.plan import SamplingPlan, reference_plan
from pytest_skilltrigger.model.verdict import passes

CONTEXT = TriggerContext("pdf-tools", "Merge PDF files.")
PRICE = {"input": 1.0, "output": 1.0}  # dollars per million tokens: a run of 100 + 10 tokens


class ScriptedBackend:
    """A backend whose answers a test sets; counts its calls."""

    name = "scripted"
    model = "claude-test"

    def __init__(self, status: str = "triggered") -> None:
        self.status = status
        self.calls = 0
        self._lock = threading.Lock()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(backend=self.name)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        with self._lock:
            self.calls += 1
        chosen = "skill:pdf-tools" if self.status == "triggered" else "text"
        return RunOutcome(self.status, chosen=chosen, usage=Usage(10, 1))  # type: ignore[arg-type]

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        return Usage(10, 1)

    def ask(self, prompt: str, model: str | None = None) -> object:
        raise NotImplementedError

    def close(self) -> None:
        pass


class LiveSampler(Sampler):
    """A sampler on live runs of one backend, as a lane wires it; ``close`` also ends the
    threads (a lane closes them)."""

    def __init__(
        self,
        backend: TriggerBackend,
        concurrency: int = 8,
        *,
        guard: CostGuard | None = None,
        store: ResultStore | None = None,
        record: Recorder | None = None,
    ) -> None:
        stop = Stop()
        self.runs = LiveRuns(backend, Concurrency(concurrency), guard, stop)
        super().__init__(backend, self.runs, stop, store=store, record=record)

    def close(self, wait: bool = True) -> None:  # type: ignore[override]
        super().close()
        self.runs.close(wait=wait)
        self.abandon()


def test_one_sampling_serves_callers_with_opposite_expectations() -> None:
    backend = ScriptedBackend("not_triggered")
    sampler = LiveSampler(backend, concurrency=2)
    plan = reference_plan(3, 0.5)
    as_positive = sampler.submit(CONTEXT, "merge these", True, plan).result()
    as_negative = sampler.submit(CONTEXT, "merge these", False, plan).result()
    sampler.close()
    assert backend.calls == 2  # sampled once
    assert as_positive.should_trigger is True and as_positive.passed is False
    assert as_negative.should_trigger is False and as_negative.passed is True


def test_threshold_zero_still_measures_a_rate() -> None:
    backend = ScriptedBackend("not_triggered")
    sampler = LiveSampler(backend, concurrency=1)
    result = sampler.submit(CONTEXT, "anything", True, reference_plan(3, 0.0)).result()
    sampler.close()
    assert result.runs_made == 1 and result.passed is True  # rate 0.0 >= threshold 0.0


def storing_sampler(backend: ScriptedBackend, store: ResultStore, mode: str) -> Sampler:
    """A sampler wired to a store as a session wires it: read with ``use``, always written."""
    return LiveSampler(
        backend,
        concurrency=1,
        store=store if mode == "use" else None,
        record=lambda key, query, outcomes, sampling: store.record(
            (backend.name, backend.model), key, query, outcomes, sampling
        ),
    )


def test_refresh_replaces_what_later_runs_read(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "store.sqlite"))
    backend = ScriptedBackend("triggered")
    plan = reference_plan(2, 0.5)

    def sample(mode: str) -> tuple[int, int]:
        sampler = storing_sampler(backend, store, mode)
        result = sampler.submit(CONTEXT, "merge these", True, plan).result()
        sampler.close()
        return result.triggers, result.calls

    assert sample("use") == (1, 1)  # 1/1 decides at k=2, t=0.5
    backend.status = "not_triggered"
    assert sample("refresh") == (0, 2)
    assert sample("use") == (0, 0)  # the refreshed runs, not the stale ones
    store.close()


def test_fresh_samplings_neither_read_nor_write_the_store(tmp_path: Path) -> None:
    """The optimizer's re-measurement must be independent of stored runs and must not become
    what a later cached rerun of the description reuses."""
    store = ResultStore(str(tmp_path / "store.sqlite"))
    backend = ScriptedBackend("triggered")
    plan = reference_plan(2, 0.5)
    sampler = storing_sampler(backend, store, "use")
    first = sampler.submit(CONTEXT, "merge these", True, plan).result()
    backend.status = "not_triggered"
    fresh = sampler.submit(CONTEXT, "merge these", True, replace(plan, independent=True)).result()
    sampler.close()
    assert (first.triggers, fresh.triggers, fresh.calls) == (1, 0, 2)  # really sampled again
    sampler = storing_sampler(backend, store, "use")
    later = sampler.submit(CONTEXT, "merge these", True, plan).result()
    sampler.close()
    store.close()
    assert (later.triggers, later.calls) == (1, 0)  # the stored runs, untouched by the fresh ones


class SequenceBackend:
    """Answers each query from its own script, in order: True triggers, False does not.
    With one worker thread the n-th run of a query gets the n-th answer."""

    name = "sequence"
    model = "claude-test"

    def __init__(self, answers: dict[str, Sequence[bool]]) -> None:
        self.answers = answers
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(backend=self.name)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        with self._lock:
            n = self.calls[query]
            self.calls[query] += 1
        hit = self.answers[query][n]
        return RunOutcome(
            "triggered" if hit else "not_triggered",
            chosen="skill:pdf-tools" if hit else "text",
            usage=Usage(100, 10),
        )

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        return Usage(100, 10)

    def ask(self, prompt: str, model: str | None = None) -> object:
        raise NotImplementedError

    def close(self) -> None:
        pass


@pytest.mark.parametrize("concurrency", [1, 4])
@settings(max_examples=200, deadline=None)
@given(
    answers=st.lists(st.booleans(), min_size=1, max_size=12),
    threshold=st.sampled_from([0.0, 0.1, 0.25, 1 / 3, 0.4, 0.5, 0.6, 2 / 3, 0.75, 0.9, 1.0]),
    should_trigger=st.booleans(),
)
def test_curtailed_verdicts_equal_the_verdicts_of_all_runs(
    concurrency: int, answers: list[bool], threshold: float, should_trigger: bool
) -> None:
    """Exact early stopping: whatever the outcomes, stopping early gives the verdict all runs
    would have given, and never makes more runs than all of them; also with four workers,
    where a wave's runs finish in any order and no run is made that a wave did not need."""
    runs = len(answers)
    full_rate = sum(answers) / runs
    expected = passes(should_trigger, full_rate, threshold)
    backend = SequenceBackend({"q": answers})
    sampler = LiveSampler(backend, concurrency=concurrency)
    try:
        plan = reference_plan(runs, threshold)
        result = sampler.submit(CONTEXT, "q", should_trigger, plan).result()
    finally:
        sampler.close()
    assert result.passed == expected
    assert 1 <= result.runs_made <= runs
    assert backend.calls["q"] == result.runs_made
    assert result.triggers == sum(answers[: result.runs_made])  # the first runs' answers, counted


def test_without_early_stopping_every_run_is_made() -> None:
    backend = SequenceBackend({"q": [True] * 5})
    sampler = LiveSampler(backend, concurrency=2)
    plan = reference_plan(5, 0.5, curtail=False)
    result = sampler.submit(CONTEXT, "q", True, plan).result()
    sampler.close()
    assert (result.runs_made, result.triggers) == (5, 5)


def test_an_error_stops_the_query_and_is_never_a_miss() -> None:
    class Failing(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            with self._lock:
                self.calls[query] += 1
            return RunOutcome("error", error="529 overloaded_error: busy")

    backend = Failing({"q": []})
    sampler = LiveSampler(backend, concurrency=1)
    result = sampler.submit(CONTEXT, "q", True, reference_plan(3, 0.5)).result()
    sampler.close()
    assert result.errors >= 1 and result.passed is None and result.error
    assert backend.calls["q"] == result.errors  # the first wave only: no wave after an error


def test_a_fatal_error_stops_every_later_call() -> None:
    class Fatal(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            with self._lock:
                self.calls[query] += 1
            return RunOutcome("error", error="401 authentication_error", fatal=True)

    backend = Fatal({})
    sampler = LiveSampler(backend, concurrency=1)
    first = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    second = sampler.submit(CONTEXT, "b", True, reference_plan(3, 0.5)).result()
    sampler.close()
    assert sampler.stop.reason and first.errors and second.errors
    assert sum(backend.calls.values()) == 1


def test_the_budget_skips_queries_without_calling(tmp_path: Path) -> None:
    """Each run holds its estimate until it settles: a run that would pass the budget is not
    made, and its query (and every later one) is skipped, never a miss."""
    backend = SequenceBackend({"a": [True] * 3, "b": [True] * 3})
    guard = CostGuard("claude-test", {"claude-test": PRICE}, budget_usd=0.00025)
    sampler = LiveSampler(backend, concurrency=1, guard=guard)
    first = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    second = sampler.submit(CONTEXT, "b", True, reference_plan(3, 0.5)).result()
    sampler.close()
    # each run is estimated (and costs) $0.00011: two fit, the third would not
    assert first.runs_made == 2 and not first.skipped
    assert second.skipped and second.skipped.startswith(BUDGET_REACHED)
    assert "$0.00025" in second.skipped  # the budget, with the digits that say it
    assert backend.calls["b"] == 0
    assert guard.total().calls == 2


def test_a_query_the_budget_cuts_short_keeps_its_runs_in_the_store(tmp_path: Path) -> None:
    """The runs a query made before the budget stopped it were paid: they are stored, and a
    rerun with room goes on from them."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    recorded: list[int] = []

    def record(key: str, query: str, outcomes: Sequence[RunOutcome], sampling: str) -> None:
        recorded.append(store.record(("b", "m"), key, query, outcomes, sampling))

    backend = SequenceBackend({"a": [True, False, True, False, True, False]})
    guard = CostGuard("claude-test", {"claude-test": PRICE}, budget_usd=0.00025)
    sampler = LiveSampler(backend, concurrency=1, guard=guard, store=store, record=record)
    cut = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    sampler.close()
    assert cut.over_budget and cut.runs_made == 2 and recorded == [2]
    again = LiveSampler(backend, concurrency=1, store=store, record=record)
    rerun = again.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    again.close()
    assert rerun.runs_made == 3 and rerun.calls == 1 and not rerun.skipped


def test_closing_abandons_what_is_queued_as_interrupted() -> None:
    started = threading.Event()
    release = threading.Event()

    class Slow(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            started.set()
            release.wait(5)
            return RunOutcome("triggered", chosen="skill:pdf-tools")

    sampler = LiveSampler(Slow({}), concurrency=1)
    running = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5))
    queued = sampler.submit(CONTEXT, "b", True, reference_plan(3, 0.5))
    assert started.wait(5)
    sampler.close(wait=False)
    release.set()
    assert queued.result(timeout=5).skipped == "interrupted"
    assert running.result(timeout=5).skipped == "interrupted"


def test_fresh_plans_are_not_joined_with_an_ordinary_sampling() -> None:
    backend = SequenceBackend({"q": [True, False, False]})
    sampler = LiveSampler(backend, concurrency=1)
    plan = reference_plan(2, 0.5)
    ordinary = sampler.submit(CONTEXT, "q", True, plan).result()
    fresh = sampler.submit(CONTEXT, "q", True, replace(plan, independent=True)).result()
    again = sampler.submit(CONTEXT, "q", True, plan).result()
    sampler.close()
    assert (ordinary.triggers, fresh.triggers, fresh.runs_made) == (1, 0, 2)
    assert again.triggers == 1 and backend.calls["q"] == 3  # the ordinary sampling, shared


def triggered() -> RunOutcome:
    return RunOutcome("triggered", "skill:pdf-tools")


def test_stored_runs_are_topped_up_and_a_decided_rerun_makes_no_call(tmp_path: Path) -> None:
    """The sequential rule over the store: two stored triggers need two more runs to settle
    (four in a row); the rerun finds four that settle it and makes no call. Stored runs past
    the point where the rule would have stopped are not read."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    key = CONTEXT.key(backend="scripted")
    store.record(("scripted", "m"), key, "merge", [triggered() for _ in range(2)])
    recorded: list[int] = []

    def record(k: str, query: str, outcomes: Sequence[RunOutcome], sampling: str) -> None:
        recorded.append(store.record(("scripted", "m"), k, query, outcomes, sampling))

    plan = SamplingPlan()
    for expected_calls in (2, 0):
        backend = ScriptedBackend()
        sampler = LiveSampler(backend, store=store, record=record)
        result = sampler.submit(CONTEXT, "merge", True, plan).result()
        sampler.close()
        assert backend.calls == expected_calls
        assert (result.verdict, result.runs_made, result.passed) == ("triggered", 4, True)
    assert recorded == [2, 0]
    # ten stored runs, settled at the fourth: a rerun reads four, as a fresh sampling would
    store.record(("scripted", "m"), key, "merge", [triggered() for _ in range(6)])
    sampler = LiveSampler(ScriptedBackend(), store=store)
    assert sampler.submit(CONTEXT, "merge", True, plan).result().runs_made == 4
    sampler.close()


def test_a_context_that_cannot_be_prepared_is_a_fatal_error_with_no_call() -> None:
    """A capture that failed: the query gets one error outcome naming the cause (no request
    made, the plan's trigger_choices kept), and the sampler is fatal from then on."""

    class Unprepared(SequenceBackend):
        def context_key(self, context: TriggerContext) -> str:
            raise ValueError("the CLI sent nothing")

    backend = Unprepared({"a": [True]})
    sampler = LiveSampler(backend, concurrency=1)
    plan = replace(reference_plan(3, 0.5), trigger_choices=frozenset({"skill:pdf-tools"}))
    result = sampler.submit(CONTEXT, "a", True, plan).result()
    sampler.close()
    (outcome,) = result.outcomes
    assert outcome.status == "error" and outcome.fatal and outcome.requests == 0
    assert outcome.error == "cannot prepare the request: ValueError: the CLI sent nothing"
    assert sampler.stop.reason == outcome.error and result.trigger_choices == plan.trigger_choices
    assert (result.query, result.should_trigger, result.rule) == ("a", True, plan.rule)
    assert backend.calls["a"] == 0


def test_a_joined_sampling_is_marked_and_keeps_the_first_callers_runs() -> None:
    backend = SequenceBackend({"a": [True, True, True]})
    sampler = LiveSampler(backend, concurrency=1)
    plan = reference_plan(3, 0.5)
    first = sampler.submit(CONTEXT, "a", True, plan)
    joined = sampler.submit(CONTEXT, "a", False, plan)
    one, two = first.result(), joined.result()
    sampler.close()
    assert not one.shared and two.shared and two.should_trigger is False
    assert one.outcomes == two.outcomes and one.passed and not two.passed
    assert backend.calls["a"] == 2  # one sampling, early stopping at 2 of 3


def test_runs_made_in_a_batch_are_taken_instead_of_live_calls() -> None:
    backend = SequenceBackend({"a": [True] * 5, "b": [True] * 5})
    sampler = LiveSampler(backend, concurrency=1)
    plan = reference_plan(3, 0.5)
    ident = sampler.sampling_key(sampler.context_key(CONTEXT), "a", plan, CONTEXT.skill_name)
    assert not sampler.under_way(ident)
    hit = RunOutcome("triggered", chosen="skill:pdf-tools", usage=Usage(1, 1), batch=True)
    sampler.take_ahead(ident, [hit, hit], None)
    assert sampler.under_way(ident)
    result = sampler.submit(CONTEXT, "a", True, plan).result()
    assert result.runs_made == 2 and result.passed and backend.calls["a"] == 0
    skipped_ident = sampler.sampling_key(
        sampler.context_key(CONTEXT), "b", plan, CONTEXT.skill_name
    )
    sampler.take_ahead(skipped_ident, [], "cost budget reached")
    skipped = sampler.submit(CONTEXT, "b", True, plan).result()
    assert skipped.skipped == "cost budget reached" and backend.calls["b"] == 0
    fatal = RunOutcome("error", error="401 authentication_error", fatal=True)
    sampler.take_ahead(("k", "c", ("x",)), [fatal], None)
    assert sampler.stop.reason == "401 authentication_error"
    sampler.close()


def test_a_later_sampling_starts_from_the_runs_this_process_made() -> None:
    """Without a store, a second plan on the same request reads the first one's runs (as
    stored ones: not made or counted again) and tops them up."""
    backend = SequenceBackend({"a": [True, True, False, True, True]})
    sampler = LiveSampler(backend, concurrency=1)
    first = sampler.submit(CONTEXT, "a", True, reference_plan(2, 0.5)).result()
    more = sampler.submit(CONTEXT, "a", True, reference_plan(5, 0.5)).result()
    sampler.close()
    assert first.runs_made == 1 and first.calls == 1  # 1 of 2 settles a rate of at least 0.5
    assert more.calls == more.runs_made - 1 and more.runs_made >= 3
    assert more.outcomes[0].from_store and not more.outcomes[-1].from_store
    assert backend.calls["a"] == 1 + more.calls


def test_a_backend_exception_is_an_error_and_a_later_caller_samples_afresh() -> None:
    """A backend bug becomes an error outcome naming it (never a miss, never a hang); the
    errored sampling is not joined later: the next caller makes its own runs."""

    class Flaky(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            with self._lock:
                self.calls[query] += 1
                first = self.calls[query] == 1
            if first:
                raise RuntimeError("boom")
            return RunOutcome("triggered", chosen="skill:pdf-tools", usage=Usage(1, 1))

    backend = Flaky({})
    guard = CostGuard("claude-test", {"claude-test": PRICE}, budget_usd=1.0)
    sampler = LiveSampler(backend, concurrency=1, guard=guard)
    plan = reference_plan(2, 0.5)
    failed = sampler.submit(CONTEXT, "a", True, plan).result()
    (outcome,) = failed.outcomes
    assert outcome.status == "error" and outcome.error == "RuntimeError: boom"
    assert not outcome.fatal and not sampler.stop.reason and failed.passed is None
    again = sampler.submit(CONTEXT, "a", True, plan).result()
    sampler.close()
    assert not again.shared and again.passed and again.triggers == 1
    assert guard.total().calls == 2  # the errored run counts (its request may have gone out)


def test_finished_runs_are_recorded_once_and_never_for_fresh_or_interrupted_plans() -> None:
    recorded: list[tuple[str, str, int]] = []

    def record(key: str, query: str, outcomes: Sequence[RunOutcome], sampling: str) -> None:
        recorded.append((key, query, len(outcomes)))

    backend = SequenceBackend({"a": [True] * 6})
    sampler = LiveSampler(backend, concurrency=1, record=record)
    plan = reference_plan(3, 0.5)
    sampler.submit(CONTEXT, "a", True, plan).result()
    sampler.submit(CONTEXT, "a", True, replace(plan, independent=True)).result()
    sampler.close()
    assert recorded == [(sampler.context_key(CONTEXT), "a", 2)]


def test_an_error_run_is_not_what_a_later_sampling_starts_from() -> None:
    class ErrorThenHits(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            with self._lock:
                self.calls[query] += 1
                n = self.calls[query]
            if n == 2:
                return RunOutcome("error", error="overloaded")
            return RunOutcome("triggered", chosen="skill:pdf-tools", usage=Usage(1, 1))

    backend = ErrorThenHits({})
    sampler = LiveSampler(backend, concurrency=1)
    first = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    assert first.errors == 1 and first.runs_made == 1
    later = sampler.submit(CONTEXT, "a", True, reference_plan(4, 0.5)).result()
    sampler.close()
    assert [o.status for o in later.outcomes if o.from_store] == ["triggered"]
    assert later.errors == 0 and later.passed


def test_a_fatal_outcome_without_a_message_still_stops_the_session() -> None:
    class Silent(SequenceBackend):
        def run(self, context: TriggerContext, query: str) -> RunOutcome:
            return RunOutcome("error", fatal=True)

    sampler = LiveSampler(Silent({}), concurrency=1)
    sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    later = sampler.submit(CONTEXT, "b", True, reference_plan(3, 0.5)).result()
    sampler.close()
    assert sampler.stop.reason == "fatal backend error"
    assert later.outcomes[0].error == "fatal backend error" and later.outcomes[0].requests == 0


def test_a_query_submitted_after_close_is_interrupted_without_a_call() -> None:
    backend = SequenceBackend({"a": [True] * 3})
    sampler = LiveSampler(backend, concurrency=1)
    sampler.close()
    result = sampler.submit(CONTEXT, "a", True, reference_plan(3, 0.5)).result()
    assert result.skipped == "interrupted" and backend.calls["a"] == 0
    sampler.close()  # a second close is harmless


class Job:
    """A sampling as a run source sees it, with runs already made; records its runs."""

    def __init__(self, query: str, runs_made: int, log: list[str]) -> None:
        self.context, self.query, self.context_key = CONTEXT, query, "key"
        self.plan = reference_plan(3, 0.5)
        self.runs_made, self.skipped = runs_made, None
        self.log = log

    def take(self, outcome: RunOutcome) -> None:
        self.log.append(self.query)

    def drop(self, reason: str | None = None) -> None:
        raise AssertionError(reason)


class GatedBackend(ScriptedBackend):
    """Its first run waits until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.first = threading.Event()

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        if not self.first.is_set():
            self.first.set()
            self.gate.wait(10)
        return super().run(context, query)


def test_a_free_slot_goes_to_the_sampling_furthest_along() -> None:
    """A query many waves deep is what the session ends waiting for: its next run goes
    ahead of first waves asked for before it (in the order asked among equals)."""
    backend, log = GatedBackend(), []
    runs = LiveRuns(backend, Concurrency(1), None, Stop())
    runs.request(Job("first", 0, log), 1)
    assert backend.first.wait(10)
    runs.request(Job("new a", 0, log), 2)
    runs.request(Job("new b", 0, log), 1)
    runs.request(Job("deep", 4, log), 1)
    runs.request(Job("deeper", 6, log), 1)
    backend.gate.set()
    runs.close()
    assert log == ["first", "deeper", "deep", "new a", "new a", "new b"]
