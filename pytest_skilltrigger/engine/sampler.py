"""Sampling queries: runs asked in waves, exact early stopping, stored runs reused.

A query is sampled in waves: each wave is the number of further runs that can be made before
its verdict could first become certain (``SamplingPlan.next_runs``), so no call is wasted.
The runs come from a run source (live or batched: the sampler does not know which). Stored
runs of an unchanged request count first, and the same request asked twice shares one
sampling.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.engine.run_sources import RunSource, Stop
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.plan import SamplingKey, SamplingPlan

# told (context key, query, outcomes, sampling) of every finished sampling whose runs may be
# stored: the runs its verdict used, and which sampling it is (see :func:`sampling_name`)
Recorder = Callable[[str, str, Sequence[RunOutcome], str], None]
# a sampling made ahead of its submissions, and its result to come
Ahead = tuple[SamplingKey, Future[QueryResult]]
INTERRUPTED = "interrupted"


class _Sampling:
    """The state of one query's sampling, as its run source sees it (a ``RunJob``);
    guarded by the sampler's lock."""

    def __init__(
        self,
        sampler: Sampler,
        sampling_key: SamplingKey,
        context: TriggerContext,
        source: RunSource,
    ) -> None:
        self.sampler = sampler
        self.sampling_key = sampling_key
        self.context_key, self.query, _plan = sampling_key
        self.context = context
        self.source = source
        self.should_trigger = True
        self.plan = SamplingPlan()
        self.future: Future[QueryResult] = Future()
        self.outcomes: list[RunOutcome] = []
        self.pending = 0
        self.skipped: str | None = None
        self.finished = False

    @property
    def runs_made(self) -> int:
        return len(self.outcomes)

    def next_wave(self) -> int:
        return 0 if self.skipped else self.plan.next_runs(self.outcomes)

    def result(self) -> QueryResult:
        return QueryResult(
            query=self.query,
            should_trigger=self.should_trigger,
            rule=self.plan.rule,
            outcomes=tuple(self.outcomes),
            skipped=self.skipped,
            trigger_choices=self.plan.trigger_choices,
            sampling=sampling_name(self.sampling_key),
        )

    def take(self, outcome: RunOutcome) -> None:
        self.sampler._ended(self, outcome)

    def drop(self, reason: str | None = None) -> None:
        self.sampler._ended(self, None, reason)


def _read_for(skill: str, runs: Sequence[RunOutcome]) -> list[RunOutcome]:
    """Runs of a listing read for one of its skills: triggered when they chose it."""
    chosen = f"skill:{skill}"
    return [replace(o, status="triggered" if o.chosen == chosen else "not_triggered") for o in runs]


def sampling_name(sampling_key: SamplingKey) -> str:
    """What the store keeps a sampling's runs under, beside its request: the skill whose
    trigger its runs count, and its plan (as JSON)."""
    return json.dumps(sampling_key[2], separators=(",", ":"))


def _as_expected(shared: Future[QueryResult], should_trigger: bool) -> Future[QueryResult]:
    """The shared sampling of a query, seen by a caller that joined it.

    The runs do not depend on what is expected of them, so one sampling serves every caller;
    but the verdict does, so the joiner gets its own view with its expectation. The view is
    marked ``shared``: its runs were made (and are counted and stored) for the first caller.
    """
    view: Future[QueryResult] = Future()

    def resolve(done: Future[QueryResult]) -> None:
        result = done.result()
        view.set_result(dataclasses.replace(result, should_trigger=should_trigger, shared=True))

    shared.add_done_callback(resolve)
    return view


class Sampler:
    """Samples queries against one backend (a lane's), from ``live`` unless a submission
    names another run source.

    ``store`` is where stored runs are read from (None: none are reused); ``record`` is told
    the new runs of every finished query (the session decides whether and where they are
    stored). Once ``stop`` has a reason, no sampling starts a call.
    """

    def __init__(
        self,
        backend: TriggerBackend,
        live: RunSource,
        stop: Stop,
        *,
        store: ResultStore | None = None,
        record: Recorder | None = None,
    ) -> None:
        self.backend = backend
        self.live = live
        self.stop = stop
        self.store = store
        self.record = record
        self._lock = threading.Lock()
        self._samplings: dict[SamplingKey, _Sampling] = {}  # every one, finished or not
        self._keys: dict[TriggerContext, str] = {}
        # runs made ahead for a sampling (message batches), with why it was skipped (the
        # budget) if it was: a submission starts from them instead of stored runs
        self._ahead: dict[SamplingKey, tuple[list[RunOutcome], str | None]] = {}
        # every run this process knows of each request (context key, query), stored or made
        # here, in order: the next sampling of the same request, for another skill of the same
        # listing (a folder's sibling and routing queries), starts from them, store or not
        self._known: dict[tuple[str, str], list[RunOutcome]] = {}
        self._closed = False

    def context_key(self, context: TriggerContext) -> str:
        with self._lock:
            context_key = self._keys.get(context)
        if context_key is None:
            context_key = self.backend.context_key(context)
            with self._lock:
                self._keys[context] = context_key
        return context_key

    @staticmethod
    def sampling_key(context_key: str, query: str, plan: SamplingPlan, skill: str) -> SamplingKey:
        """What makes two samplings of a query the same: the request (one listing serves
        every skill in it), the query, the plan, and the skill whose trigger the runs count
        (its runs stop when *its* verdict is settled)."""
        return (context_key, query, (skill, *plan.ident()))

    # -- submitting ---------------------------------------------------------------------------
    def submit(
        self,
        context: TriggerContext,
        query: str,
        should_trigger: bool,
        plan: SamplingPlan,
        source: RunSource | None = None,
    ) -> Future[QueryResult]:
        """Start sampling one query (or join the sampling already under way)."""
        try:
            context_key = self.context_key(context)
        except Exception as exc:  # the context cannot be prepared (a capture that failed)
            return self._unprepared(exc, query, should_trigger, plan)
        sampling_key = self.sampling_key(context_key, query, plan, context.skill_name)
        with self._lock:
            existing = self._samplings.get(sampling_key)
            if existing is not None:
                return _as_expected(existing.future, should_trigger)
            state = _Sampling(self, sampling_key, context, source or self.live)
            state.should_trigger, state.plan = should_trigger, plan
            self._samplings[sampling_key] = state
            ahead = self._ahead.get(sampling_key)
        if ahead is not None:
            state.outcomes.extend(ahead[0])
            state.skipped = ahead[1]
        else:
            state.outcomes.extend(self.stored(context_key, query, plan, context.skill_name))
        self._start(state)
        return state.future

    def _unprepared(
        self, exc: Exception, query: str, should_trigger: bool, plan: SamplingPlan
    ) -> Future[QueryResult]:
        """A query whose request cannot be built: an error, and the lane stops."""
        message = f"cannot prepare the request: {type(exc).__name__}: {exc}"
        self.stop.set(message)
        failed: Future[QueryResult] = Future()
        outcome = RunOutcome("error", error=message, fatal=True, requests=0)
        failed.set_result(
            QueryResult(
                query, should_trigger, plan.rule, (outcome,), trigger_choices=plan.trigger_choices
            )
        )
        return failed

    def _start(self, state: _Sampling) -> None:
        with self._lock:
            wave = self._next_wave(state)
        if wave == 0:
            self._finish(state)
        elif wave > 0:
            state.source.request(state, wave)

    def stored(
        self, context_key: str, query: str, plan: SamplingPlan, skill: str
    ) -> list[RunOutcome]:
        """The runs a sampling starts from (none for a fresh one), read for ``skill``: a run
        made for another skill of the same listing triggered this one when it chose it.

        First the runs this very sampling's verdict used when it was last stored, so that a
        rerun reads exactly them; else those this process knows of the request; else the
        store's oldest (without a store to reuse, none)."""
        if plan.independent:
            return []
        used = None
        if self.store is not None:
            name = sampling_name(self.sampling_key(context_key, query, plan, skill))
            used = self.store.used(context_key, query, name)
        if used is not None:  # all of them: its waves may have gone past a prefix's stop
            return _read_for(skill, used)
        with self._lock:
            known = list(self._known.get((context_key, query), ()))
        if not known and self.store is not None:
            known = self.store.lookup(context_key, query, plan.max_runs)
        return plan.usable(_read_for(skill, known))

    def runs_to_go(
        self, context: TriggerContext, query: str, plan: SamplingPlan
    ) -> tuple[int, int]:
        """The fewest and most runs a submission of this query would still make, after the
        stored runs it would start from (what the header's estimate counts)."""
        if not context.model_invocable:
            return 0, 0
        context_key = self.context_key(context)
        return plan.runs_to_go(self.stored(context_key, query, plan, context.skill_name))

    # -- runs made ahead (message batches) ----------------------------------------------------
    def sample_ahead(
        self, context: TriggerContext, query: str, plan: SamplingPlan, source: RunSource
    ) -> Ahead | None:
        """Start sampling a query from ``source`` ahead of its submissions (which then start
        from its runs, see :meth:`keep_ahead`); None when there is nothing to sample: a
        request that cannot be prepared, a skill that is never listed, or a sampling under way
        or made ahead already."""
        try:
            context_key = self.context_key(context)
        except Exception:  # its submission says so, without a call
            return None
        sampling_key = self.sampling_key(context_key, query, plan, context.skill_name)
        if not context.model_invocable or self.under_way(sampling_key):
            return None
        state = _Sampling(self, sampling_key, context, source)
        state.plan = plan
        state.outcomes.extend(self.stored(context_key, query, plan, context.skill_name))
        with self._lock:
            self._samplings[sampling_key] = state
        self._start(state)
        return sampling_key, state.future

    def keep_ahead(self, started: Sequence[Ahead]) -> list[tuple[SamplingKey, QueryResult]]:
        """The samplings made ahead, once done: their runs are kept for their submissions
        (until :meth:`forget_ahead`), errors included, and returned."""
        kept = []
        for sampling_key, future in started:
            if not future.done():
                continue
            with self._lock:
                state = self._samplings.get(sampling_key)
                if state is not None and state.future is future:
                    del self._samplings[sampling_key]
            result = future.result()
            self.take_ahead(sampling_key, result.outcomes, result.skipped)
            kept.append((sampling_key, result))
        return kept

    def under_way(self, sampling_key: SamplingKey) -> bool:
        """Whether this sampling is under way or decided (or has runs made ahead for it)."""
        with self._lock:
            return sampling_key in self._samplings or sampling_key in self._ahead

    def take_ahead(
        self, sampling_key: SamplingKey, outcomes: Sequence[RunOutcome], skipped: str | None
    ) -> None:
        """Runs made for a sampling before it is submitted (here, or by the xdist controller,
        with the stored runs they build on): its submissions take them instead of the store's
        and make only the runs still needed, none when ``skipped`` (the budget). They stay
        until :meth:`forget_ahead`, so that every item sharing a sampling that errored gets
        that error, not a live call. A fatal error stops the lane here too."""
        with self._lock:
            self._ahead[sampling_key] = (list(outcomes), skipped)
        for outcome in outcomes:
            if outcome.fatal:
                self.stop.set(outcome.error or "fatal backend error")

    def forget_ahead(self) -> None:
        """Forget runs made ahead (once the items are done): a later sampling of the same
        query (the improvement rounds' first iteration) samples afresh what errored."""
        with self._lock:
            self._ahead.clear()

    # -- runs ending ----------------------------------------------------------------------------
    def _ended(self, state: _Sampling, outcome: RunOutcome | None, skip: str | None = None) -> None:
        """One run asked of the source ended: made (``outcome``), or not (``skip``: why the
        sampling is skipped). The next wave is asked once the last run of this one ends."""
        with self._lock:
            if outcome is not None:
                state.outcomes.append(outcome)
            elif skip is not None:
                state.skipped = state.skipped or skip
            state.pending -= 1
            wave = self._next_wave(state) if state.pending == 0 else -1
        if wave == 0:
            self._finish(state)
        elif wave > 0:
            state.source.request(state, wave)

    def _next_wave(self, state: _Sampling) -> int:
        """The runs to ask for next (0: the sampling is done); counted as pending. Call with
        the lock held."""
        wave = state.next_wave()
        if wave and self._closed:
            state.skipped = state.skipped or INTERRUPTED
            return 0
        state.pending += wave
        return wave

    def _finish(self, state: _Sampling) -> None:
        """Resolve a sampling once (a run ending and an interrupting close may race here)."""
        with self._lock:
            if state.finished:
                return
            state.finished = True
        result = state.result()
        if not state.plan.independent:
            self._remember(state)
        if self.record is not None and not state.plan.independent and state.skipped != INTERRUPTED:
            # a query the budget cut short keeps its paid runs: a rerun with room goes on
            self.record(state.context_key, state.query, result.outcomes, result.sampling or "")
        if result.errors or result.skipped:
            # no verdict: a later caller (the improvement rounds) samples the query afresh
            # instead of joining this sampling
            with self._lock:
                if self._samplings.get(state.sampling_key) is state:
                    del self._samplings[state.sampling_key]
        state.future.set_result(result)

    def _remember(self, state: _Sampling) -> None:
        """Keep a finished sampling's runs as what is known of its request (they extend what
        it started from, so the longest list is the whole story); made here, they are not
        made (nor counted) again by a later sampling that starts from them."""
        runs = [replace(o, from_store=True) for o in state.outcomes if o.status != "error"]
        with self._lock:
            if len(runs) > len(self._known.get((state.context_key, state.query), ())):
                self._known[(state.context_key, state.query)] = runs

    def close(self) -> None:
        """Ask for no further wave (what is in flight still ends)."""
        with self._lock:  # under the lock: no wave is asked once this is set
            self._closed = True

    def abandon(self) -> None:
        """Skip every sampling not finished, as interrupted (after :meth:`close`)."""
        with self._lock:
            abandoned = [state for state in self._samplings.values() if not state.finished]
        for state in abandoned:
            state.skipped = state.skipped or INTERRUPTED
            self._finish(state)


@dataclass
class RunsAhead:
    """The runs made ahead for one sampling (with the stored runs they build on), as they
    cross to other processes (xdist workers) as JSON. ``skipped`` says why no further run
    could be made (the budget): the sampling is then skipped without a call."""

    sampling_key: SamplingKey
    outcomes: Sequence[RunOutcome]
    skipped: str | None = None
    model: str | None = None  # the lane (model of a matrix) whose sampling it is

    def to_dict(self) -> dict[str, Any]:
        return {
            "sampling_key": list(self.sampling_key),
            "outcomes": [o.to_dict() for o in self.outcomes],
            "skipped": self.skipped,
            "model": self.model,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunsAhead:
        context_key, query, plan = data["sampling_key"]
        sampling_key = (str(context_key), str(query), _tuples(plan))
        outcomes = [RunOutcome.from_dict(o) for o in data["outcomes"]]
        return cls(sampling_key, outcomes, data.get("skipped"), data.get("model"))


def _tuples(value: Any) -> Any:
    """JSON lists back into the tuples a sampling key is made of (it keys dicts)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value
