"""Sampling queries: many runs in flight, exact early stopping, stored runs reused.

Every run of the session goes through one :class:`Sampler`: a thread pool of
``concurrency`` workers calling the backend. A query is sampled in waves: each wave is the
number of further runs that can be made before its verdict could first become certain
(:func:`~pytest_skilltrigger.model.verdict.runs_still_needed`), so no call is wasted and the
verdict is exactly the one all runs would give. Stored runs for an unchanged context count
first. The same (context, query) asked twice shares one sampling, so items submitted ahead and items
never pay twice.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.engine.thread_pool import DaemonPool
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome
from pytest_skilltrigger.model.plan import QueryIdent, SamplingPlan

# told (context key, query, outcomes) of every finished sampling whose runs may be stored
Recorder = Callable[[str, str, Sequence[RunOutcome]], None]


class _Query:
    """The mutable sampling state of one query; guarded by the sampler's lock."""

    def __init__(
        self,
        ident: QueryIdent,
        context: TriggerContext,
        query: str,
        should_trigger: bool,
        plan: SamplingPlan,
        future: Future[QueryResult],
    ) -> None:
        self.ident = ident
        self.context = context
        self.key = ident[0]
        self.query = query
        self.should_trigger = should_trigger
        self.plan = plan
        self.future = future
        self.outcomes: list[RunOutcome] = []
        self.pending = 0
        self.skipped: str | None = None
        self.finished = False

    def next_wave(self) -> int:
        return 0 if self.skipped else self.plan.next_runs(self.outcomes)

    def result(self) -> QueryResult:
        return QueryResult(
            query=self.query,
            should_trigger=self.should_trigger,
            rule=self.plan.rule,
            outcomes=tuple(self.outcomes),
            skipped=self.skipped,
            hits=self.plan.hits,
        )


def _as_expected(shared: Future[QueryResult], should_trigger: bool) -> Future[QueryResult]:
    """The shared sampling of a query, seen by a caller that joined it.

    The runs do not depend on what is expected of them, so one sampling serves every caller;
    but the verdict does, so the joiner gets its own view with its expectation. The view is
    marked ``joined``: its runs were made (and are counted and stored) for the first caller.
    """
    view: Future[QueryResult] = Future()

    def resolve(done: Future[QueryResult]) -> None:
        result = done.result()
        view.set_result(dataclasses.replace(result, should_trigger=should_trigger, joined=True))

    shared.add_done_callback(resolve)
    return view


class Sampler:
    """Runs queries against one backend with bounded concurrency.

    ``store`` is where stored runs are read from (None: none are reused); ``record`` is told
    the new runs of every finished query (the session decides whether and where they are
    stored). ``guard`` enforces the cost budget. After a fatal error (bad key, unknown model)
    no further call is made.
    """

    def __init__(
        self,
        backend: TriggerBackend,
        *,
        concurrency: int = 8,
        store: ResultStore | None = None,
        record: Recorder | None = None,
        guard: CostGuard | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        self.record = record
        self.guard = guard
        self.fatal: str | None = None
        self._pool = DaemonPool(max(1, concurrency))
        self._lock = threading.Lock()
        self._queries: dict[QueryIdent, _Query] = {}  # every sampling, finished or not
        self._keys: dict[TriggerContext, str] = {}
        # runs already made for a sampling (message batches), taken instead of stored runs,
        # with why it was skipped (the budget) if it was
        self._batch_runs: dict[QueryIdent, tuple[list[RunOutcome], str | None]] = {}
        # every run this process knows of each request (context key, query), stored or made
        # here, in order: the next sampling of the same request, for another skill of the same
        # listing (a folder's sibling and routing queries), starts from them, store or not
        self._known: dict[tuple[str, str], list[RunOutcome]] = {}
        self._closed = False

    def context_key(self, context: TriggerContext) -> str:
        with self._lock:
            key = self._keys.get(context)
        if key is None:
            key = self.backend.context_key(context)
            with self._lock:
                self._keys[context] = key
        return key

    def submit(
        self, context: TriggerContext, query: str, should_trigger: bool, plan: SamplingPlan
    ) -> Future[QueryResult]:
        """Start sampling one query (or join the sampling already under way)."""
        try:
            key = self.context_key(context)
        except Exception as exc:  # the context cannot be prepared (a capture that failed)
            message = f"cannot prepare the request: {type(exc).__name__}: {exc}"
            self.fatal = self.fatal or message
            failed: Future[QueryResult] = Future()
            outcome = RunOutcome("error", error=message, fatal=True, requests=0)
            failed.set_result(
                QueryResult(query, should_trigger, plan.rule, (outcome,), hits=plan.hits)
            )
            return failed
        ident = self.ident(key, query, plan, context.skill_name)
        with self._lock:
            existing = self._queries.get(ident)
            if existing is not None:
                return _as_expected(existing.future, should_trigger)
            future: Future[QueryResult] = Future()
            state = _Query(ident, context, query, should_trigger, plan, future)
            self._queries[ident] = state
        with self._lock:
            batch_runs = self._batch_runs.get(ident)
        if batch_runs is not None:
            state.outcomes.extend(batch_runs[0])
            state.skipped = batch_runs[1]
        else:
            state.outcomes.extend(self.stored(key, query, plan, context.skill_name))
        with self._lock:
            done = self._advance(state)
        if done:
            self._finish(state)
        return future

    def ident(self, key: str, query: str, plan: SamplingPlan, skill: str) -> QueryIdent:
        """What makes two samplings of a query the same: the request (one listing serves
        every skill in it), the query, the plan, and the skill whose trigger the runs count
        (its runs stop when *its* verdict is settled)."""
        return (key, query, (skill, *plan.ident()))

    def stored(self, key: str, query: str, plan: SamplingPlan, skill: str) -> list[RunOutcome]:
        """The runs a sampling starts from (none for a fresh one): those this process knows of
        the request, else the store's (without a store to reuse, none), read for ``skill``: a
        run made for another skill of the same listing triggered this one when it chose it."""
        if plan.fresh:
            return []
        with self._lock:
            known = list(self._known.get((key, query), ()))
        if not known and self.store is not None:
            known = self.store.lookup(key, query, plan.runs)
        chosen = f"skill:{skill}"
        runs = [
            replace(o, status="triggered" if o.chosen == chosen else "not_triggered") for o in known
        ]
        return plan.usable(runs)

    def sampled(self, ident: QueryIdent) -> bool:
        """Whether this sampling is under way or decided (or has runs waiting for it)."""
        with self._lock:
            return ident in self._queries or ident in self._batch_runs

    def use_batch_runs(
        self, ident: QueryIdent, outcomes: Sequence[RunOutcome], skipped: str | None = None
    ) -> None:
        """Runs made for a sampling before it is submitted (a message batch's, with the
        stored runs they build on): its submissions take them instead of the store's and
        make only the runs still needed, none when ``skipped`` (the budget ran out). They
        stay until :meth:`drop_batch_runs`, so that every item sharing a sampling that
        errored gets that error, not a live call. A fatal error stops the session here too
        (an xdist worker learns it from the controller's runs)."""
        with self._lock:
            self._batch_runs[ident] = (list(outcomes), skipped)
        for outcome in outcomes:
            if outcome.fatal and not self.fatal:
                self.fatal = outcome.error or "fatal backend error"

    def drop_batch_runs(self) -> None:
        """Forget runs made ahead (once the items are done): a later sampling of the same
        query (the improvement rounds' first iteration) samples afresh what errored."""
        with self._lock:
            self._batch_runs.clear()

    def _advance(self, state: _Query) -> bool:
        """Issue the next wave; True when the query is done. Call with the lock held."""
        if state.pending:
            return False
        wave = state.next_wave()
        if wave == 0:
            return True
        if self._closed:
            state.skipped = state.skipped or "interrupted"
            return True
        for _ in range(wave):
            state.pending += 1
            self._pool.submit(self._run_one, state)
        return False

    def _finish(self, state: _Query) -> None:
        """Resolve a query once (a worker and an interrupting close may race here)."""
        with self._lock:
            if state.finished:
                return
            state.finished = True
        result = state.result()
        if not state.plan.fresh:
            self._remember(state)
        if self.record is not None and not state.plan.fresh and state.skipped != "interrupted":
            # a query the budget cut short keeps its paid runs: a rerun with room goes on
            self.record(state.key, state.query, result.outcomes)
        if result.errors or result.skipped:
            # no verdict: a later caller (the improvement rounds) samples the query afresh
            # instead of joining this sampling
            with self._lock:
                if self._queries.get(state.ident) is state:
                    del self._queries[state.ident]
        state.future.set_result(result)

    def _remember(self, state: _Query) -> None:
        """Keep a finished sampling's runs as what is known of its request (they extend what
        it started from, so the longest list is the whole story); made here, they are not
        made (nor counted) again by a later sampling that starts from them."""
        runs = [replace(o, from_store=True) for o in state.outcomes if o.status != "error"]
        with self._lock:
            if len(runs) > len(self._known.get((state.key, state.query), ())):
                self._known[(state.key, state.query)] = runs

    def _run_one(self, state: _Query) -> None:
        reserved = 0.0
        if self.fatal:
            outcome = RunOutcome("error", error=self.fatal, fatal=True, requests=0)
        elif (granted := self._fund(state)) is None:
            with self._lock:
                state.pending -= 1
                done = self._advance(state)
            if done:
                self._finish(state)
            return
        else:
            reserved = granted
            try:
                outcome = self.backend.run(state.context, state.query)
            except Exception as exc:  # a backend bug must not hang the item
                outcome = RunOutcome("error", error=f"{type(exc).__name__}: {exc}")
            if self.guard is not None:
                self.guard.settle(
                    reserved, outcome.usage, outcome.requests, state.plan.phase, outcome.model
                )
            if outcome.fatal and not self.fatal:
                self.fatal = outcome.error or "fatal backend error"
        with self._lock:
            state.outcomes.append(outcome)
            state.pending -= 1
            done = self._advance(state)
        if done:
            self._finish(state)

    def _fund(self, state: _Query) -> float | None:
        """The budget this run holds until it settles (its estimated cost, 0 without a
        budget), or None when the budget refuses it: the query is then skipped without
        another call, and the runs it made so far are stored all the same."""
        if self.guard is None:
            return 0.0
        with self._lock:
            if state.skipped:
                return None
        granted = self.guard.reserve_runs(
            lambda: self.backend.estimate(state.context, state.query), model=self.backend.model
        )
        if granted is None:
            with self._lock:
                state.skipped = state.skipped or budget_reached(self.guard.budget_usd)
        return granted

    def close(self, wait: bool = True) -> None:
        """Stop accepting work; with ``wait=False`` abandon queued runs (Ctrl-C)."""
        with self._lock:  # under the lock: no wave is issued once this is set
            if self._closed:
                return
            self._closed = True
        self._pool.shutdown(wait=wait)
        with self._lock:
            abandoned = [state for state in self._queries.values() if not state.finished]
        for state in abandoned:
            state.skipped = state.skipped or "interrupted"
            self._finish(state)
