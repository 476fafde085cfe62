"""The engine's front door: one object holding a session's backend, store, budget and sampler.

The pytest layer creates one per process and speaks to the engine only through it (submit,
absorb a worker's result, the context key, the fatal state, ask); a library user can do the
same::

    from pytest_skilltrigger import evaluate_skill
    results = evaluate_skill("skills/pdf")           # [(Target, [QueryResult, ...]), ...]

The store is written only here: :meth:`TriggerSession.record` stores runs (the sampler calls
it for the runs it makes, and :meth:`TriggerSession.absorb` for the runs an xdist worker
made), :meth:`TriggerSession.run_batches` stores message batches' runs as each wave is read
(and :meth:`~TriggerSession.record` then skips them wherever they turn up again), and
:meth:`TriggerSession.save_capture` keeps the Claude Code CLI's captured requests. (The pytest
layer only has the store's file created at configure, before any worker starts.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.backends import BackendUnavailable, TriggerBackend, make_backend
from pytest_skilltrigger.backends.base import ASK_MAX_TOKENS, BatchingBackend
from pytest_skilltrigger.engine.batch_waves import (
    BatchedRuns,
    BatchProgress,
    BatchRunner,
    BatchWork,
)
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.lane_batches import run_together, works_of
from pytest_skilltrigger.engine.lanes import Lane, Lanes
from pytest_skilltrigger.engine.sampler import Sampler
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, Usage
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.model.prices import Spend, load_prices
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.skills.catalog import Target, load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.estimate import Estimate, Sampling


def _named(
    show: Callable[[BatchProgress], None], model: str | None, progress: BatchProgress
) -> None:
    """Show a batch's progress with the model of the matrix it runs on."""
    show(replace(progress, model=model))


UNLISTED = (
    "disable-model-invocation: true in SKILL.md: Claude Code does not list this skill to the "
    "model, so it can never trigger"
)


class TriggerSession:
    """Shared machinery for every trigger check of one process.

    ``backend`` may be passed in (tests, custom backends); otherwise it is chosen from the
    settings. When none is available, :attr:`unavailable` holds the reason and nothing runs.
    ``write_store`` is false in xdist workers, which hand their runs to the controller.
    ``share`` is ``(index, count)`` for one of ``count`` processes running one session: this
    one then keeps its part of the session's requests in flight and of its budget, so the
    limits the user set hold for the whole session. ``progress`` is told each poll of a
    message batch worth showing. ``prices`` is the table ``--trigger-prices`` gives, when
    the caller has read it already.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: TriggerBackend | None = None,
        write_store: bool = True,
        share: tuple[int, int] | None = None,
        progress: Callable[[BatchProgress], None] | None = None,
        prices: dict[str, dict[str, float]] | None = None,
    ) -> None:
        settings = (settings or Settings()).validated()
        if share is not None and settings.budget_usd is not None:
            settings = replace(settings, budget_usd=settings.budget_usd / max(1, share[1]))
        self.settings = settings
        self.share = share
        self.progress = progress  # told how message batches advance (--trigger-batch)
        self._write_store = write_store
        self.store: ResultStore | None = None
        if self.settings.active_store:
            self.store = ResultStore(self.settings.active_store)
        self.unavailable: str | None = None
        # the price table, unless the caller has read it already (to check it at start-up)
        self.prices = prices if prices is not None else load_prices(self.settings.prices_path)
        self.plan = SamplingPlan(self.settings.rule)
        self._asker: TriggerBackend | None = None
        self._asker_lock = threading.Lock()  # drafts ask from several threads at once
        self._batches: dict[str | None, BatchRunner] = {}  # a lane's, made on first use
        self.guard: CostGuard | None = None
        self.lanes: Lanes | None = None  # one per model of the matrix (see engine.lanes)
        try:
            self.lanes = Lanes.build(
                self.settings,
                backend=backend,
                shelf=self,
                store=self.store if self.settings.cache_mode == "use" else None,
                record=self.record,
                guard_of=self._make_guard,
                share=share,
            )
        except BackendUnavailable as exc:
            self.unavailable = str(exc)
        # the default lane's (the first model's): what a single-model session runs on
        self.backend: TriggerBackend | None = self.lanes.default.backend if self.lanes else None
        self.sampler: Sampler | None = self.lanes.default.sampler if self.lanes else None

    def _make_guard(self, model: str | None) -> CostGuard:
        self.guard = CostGuard(model, self.prices, self.settings.budget_usd)
        return self.guard

    @property
    def context_label(self) -> str | None:
        """Which context the runs send (captured from the CLI, builtin, the CLI itself)."""
        return getattr(self.backend, "context_label", None) if self.backend else None

    @property
    def backend_name(self) -> str | None:
        return self.backend.name if self.backend else None

    @property
    def model(self) -> str | None:
        return self.backend.model if self.backend else None

    @property
    def fatal(self) -> str | None:
        """Why no further call will be made (bad credentials, unknown model), if so."""
        return self.lanes.fatal if self.lanes is not None else None

    @property
    def halted(self) -> str | None:
        """Why no further trigger run can succeed, if so: a fatal error (bad credentials, an
        unknown model), or the session's batch deadline passed (``--trigger-batch``). The
        improvement rounds stop on it rather than pay for proposals they cannot measure."""
        if self.fatal:
            return self.fatal
        if self.guard is not None and self.guard.refused:
            return budget_reached(self.guard.budget_usd)
        for runner in self._batches.values():
            if runner.expired:
                return runner.timeout_reason()
        return None

    def context_key(self, context: TriggerContext) -> str | None:
        """The key results of this context are stored under; None without a backend, or
        when the context cannot be prepared (its runs are then errors, stored nowhere)."""
        if self.lanes is None:
            return None
        try:
            return self.lanes.of(context).sampler.context_key(context)
        except Exception:  # a capture that failed: submit() has made it an error result
            return None

    def estimate(self, samplings: Sequence[Sampling]) -> Estimate | None:
        """What these samplings (each a context on its model, and a query) may cost, each in
        its model's lane, before any call; None without a backend or when a request cannot
        be sized."""
        from pytest_skilltrigger.engine.estimate import combined, estimate_session

        if self.lanes is None or self.guard is None:
            return None
        try:
            return combined(
                [
                    estimate_session(
                        mine, self.settings, lane.backend, self.guard.price(lane.backend.model)
                    )
                    for lane, mine in self.lanes.split(samplings)
                ]
            )
        except Exception:
            return None

    def prepare(self, contexts: Sequence[TriggerContext]) -> None:
        """Prepare these contexts' requests now (for ``--trigger-context claude-code``, the
        installed CLI's request is captured and stored), so that processes which store
        nothing (xdist workers) find them ready instead of each capturing its own."""
        for context in contexts:
            self.context_key(context)

    def record(self, context_key: str, query: str, outcomes: Sequence[RunOutcome]) -> None:
        """Store new runs of a query (a sampling's, or an xdist worker's).

        Batch runs are left out: the process that made the batches stored them as it read
        them (:meth:`run_batches`), and a sampling that several items (on several xdist workers)
        resolve from them would store them once for each.
        """
        self._store_runs(context_key, query, [o for o in outcomes if not o.batch])

    def _store_runs(self, context_key: str, query: str, outcomes: Sequence[RunOutcome]) -> None:
        """The one place the store's runs are written. Nothing is written in a process that
        hands its runs to another (an xdist worker), with ``--trigger-cache off``, or without
        a backend to name the runs' origin."""
        if self.store is None or not self._write_store or self.backend is None:
            return
        model = next((o.model for o in outcomes if o.model), self.backend.model)
        self.store.record(self.backend.name, model, context_key, query, outcomes)

    def load_capture(self, key: str) -> str | None:
        """A request captured from the Claude Code CLI by an earlier session, if stored."""
        return self.store.load_capture(key) if self.store is not None else None

    def save_capture(self, key: str, request: str) -> None:
        """Keep a captured request for later sessions (not in a process that stores
        nothing: an xdist worker captures for itself, the controller stores)."""
        if self.store is not None and self._write_store:
            self.store.save_capture(key, request)

    def absorb(self, context_key: str | None, result: QueryResult, phase: str = "items") -> None:
        """Take in a result sampled by another process (an xdist worker): its calls count
        against the session's one budget, and its new runs are stored here. A result that
        joined another caller's sampling brings nothing new: that caller's result does; nor
        do its batch runs, counted and stored here when the batches were read."""
        if result.joined:
            return
        if self.guard is not None:
            for outcome in result.outcomes:
                if not (outcome.from_store or outcome.batch):  # a batch is counted where run
                    self.guard.add(outcome.usage, outcome.requests, phase, outcome.model)
        if context_key and not result.skipped:
            self.record(context_key, result.query, result.outcomes)

    def run_batches(
        self,
        requests: Sequence[tuple[TriggerContext, EvalEntry, SamplingPlan]],
        keep: bool = True,
    ) -> list[BatchedRuns]:
        """With ``--trigger-batch``, make the runs these samplings need as message batches
        (waves with exact early stopping, see :mod:`~pytest_skilltrigger.engine.batch_waves`) and
        hand them to the sampler (unless not ``keep``: a process that runs no item), so that
        submitting them later makes no live call. Returns what was made, for other processes
        (:meth:`use_batch_runs`); nothing without batches.

        Each wave's runs are stored as soon as it is read (not a fresh plan's), so Ctrl-C in
        a later wave keeps what was paid. SIGTERM (a CI job cancelled) cancels the batches in
        flight as Ctrl-C does, instead of leaving them to run unread."""
        if not self.settings.batch or self.lanes is None:
            return []
        jobs: list[tuple[Lane, BatchRunner, list[BatchWork]]] = []
        for lane, mine in self.lanes.split(requests):
            if mine and isinstance(lane.backend, BatchingBackend) and not lane.sampler.fatal:
                works = works_of(lane.sampler, mine, self.context_key)
                if works:
                    jobs.append((lane, self._runner(lane, lane.backend), works))
        try:
            # (a library caller's own SIGTERM handler is left alone)
            with sigterm_as_interrupt(only_if_default=True):
                run_together(
                    [(runner, works) for _, runner, works in jobs],
                    self.store.release if self.store is not None else None,
                )
        finally:
            for lane, runner, _ in jobs:
                lane.sampler.fatal = lane.sampler.fatal or runner.fatal
        made = [
            BatchedRuns(w.ident, w.outcomes, w.skipped, lane.model)
            for lane, _, works in jobs
            for w in works
        ]
        if keep:
            self.use_batch_runs(made)
        return made

    def _runner(self, lane: Lane, backend: BatchingBackend) -> BatchRunner:
        """The lane's batch runner, made on first use (its deadline runs from its first
        batch, for the whole session)."""
        runner = self._batches.get(lane.model)
        if runner is None:
            progress = self.progress
            if progress is not None and self.settings.models:  # say whose batch it is
                progress = partial(_named, progress, lane.model)
            runner = self._batches[lane.model] = BatchRunner(
                backend.batches(),
                guard=self.guard,
                estimate=backend.estimate,
                poll=self.settings.batch_poll,
                timeout=self.settings.batch_timeout,
                progress=progress,
                record=self._store_runs,
                model=backend.model,
            )
        return runner

    def use_batch_runs(self, batched: Sequence[BatchedRuns]) -> None:
        """Take runs made by message batches (here, or by the xdist controller)."""
        for item in batched if self.lanes is not None else ():  # each to its model's lane only
            sampler = self.lanes.of_model(item.model).sampler  # type: ignore[union-attr]
            sampler.use_batch_runs(item.ident, item.outcomes, item.skipped)

    def export_batch_runs(self, batched: Sequence[BatchedRuns]) -> dict[str, Any]:
        """What this process made in batches, for the processes that run the items (xdist
        workers), as JSON values: the runs, and what they cost against the budget."""
        spent = self.guard.spent_usd if self.guard is not None else 0.0
        return {"spent_usd": spent, "runs": [p.to_dict() for p in batched]}

    def import_batch_runs(self, exported: dict[str, Any]) -> None:
        """Take another process's batch runs (:meth:`export_batch_runs`): they resolve the items
        without a call, and this process's part of what they cost comes off its budget."""
        self.use_batch_runs([BatchedRuns.from_dict(item) for item in exported["runs"]])
        if self.guard is not None:
            count = self.share[1] if self.share is not None else 1
            self.guard.charge(float(exported["spent_usd"]) / count)

    def drop_batch_runs(self) -> None:
        """Forget the runs made ahead for the items, once they are done (see
        :meth:`Sampler.drop_batch_runs`)."""
        for lane in self.lanes or ():
            lane.sampler.drop_batch_runs()

    def ask(
        self, prompt: str, model: str | None = None, phase: str = "improve"
    ) -> tuple[str, Usage]:
        """Ask the model a plain question (the optimizer's proposals, a drafted eval set):
        through the Messages API when credentials are configured, else through the trigger
        backend (see :func:`~pytest_skilltrigger.backends.backend_choice`); counted under
        ``phase``."""
        if self.backend is None:
            raise BackendUnavailable(self.unavailable or "no backend")
        with self._asker_lock:
            if self._asker is None:
                self._asker = make_backend(self.settings, purpose="ask", reuse=self.backend)
        model = model or self._asker.model
        reserved = 0.0
        if self.guard is not None:
            # the prompt as input and the longest answer: the budget holds the worst case
            worst = Usage(
                input_tokens=len(prompt.encode("utf-8")) // 3 + 1, output_tokens=ASK_MAX_TOKENS
            )
            reserved = self.guard.estimate_usd(worst, model)
            if not self.guard.reserve(reserved):
                raise AskError(budget_reached(self.guard.budget_usd))
        try:
            text, usage, requests = self._asker.ask(prompt, model=model)
        except AskError as exc:  # what was sent is counted all the same
            if self.guard is not None:
                self.guard.settle(reserved, Usage(), exc.requests, phase, model)
            raise
        if self.guard is not None:
            self.guard.settle(reserved, usage, requests, phase, model)
        return text, usage

    def spending(self) -> dict[str, Spend]:
        """What this process's calls cost so far, by phase (``cost.PHASES``), including what
        it absorbed from xdist workers."""
        return dict(self.guard.by_phase) if self.guard is not None else {}

    def submit(
        self, context: TriggerContext, entry: EvalEntry, plan: SamplingPlan | None = None
    ) -> Future[QueryResult]:
        """Start sampling one entry; the future resolves to its QueryResult. A skill the
        model is never shown resolves at once, without a call."""
        plan = plan or self.plan
        if not context.model_invocable:
            done: Future[QueryResult] = Future()
            result = QueryResult(
                entry.query,
                entry.should_trigger,
                plan.rule,
                (),
                unlisted=context.unlisted_reason or UNLISTED,
                hits=plan.hits,
            )
            done.set_result(result)
            return done
        if self.lanes is None:
            raise BackendUnavailable(self.unavailable or "no backend")
        sampler = self.lanes.of(context).sampler
        return sampler.submit(context, entry.query, entry.should_trigger, plan)

    def evaluate(
        self,
        context: TriggerContext,
        entries: Sequence[EvalEntry],
        plan: SamplingPlan | None = None,
    ) -> list[QueryResult]:
        """Sample every entry concurrently and wait; results in entry order."""
        futures = [self.submit(context, e, plan) for e in entries]
        return [f.result() for f in futures]

    def close(self, wait: bool = True) -> None:
        """Stop the samplers (abandoning queued runs unless ``wait``) and release resources."""
        for lane in self.lanes or ():
            lane.sampler.close(wait=wait)
            lane.backend.close()
        if self._asker is not None and self._asker is not self.backend:
            self._asker.close()
        if self.store is not None:
            self.store.close()


def evaluate_skill(
    path: str, settings: Settings | None = None, eval_set: str | None = None
) -> list[tuple[Target, list[QueryResult]]]:
    """Evaluate every skill under ``path`` with its eval set; a library entry point."""
    session = TriggerSession(settings)
    try:
        if session.unavailable:
            raise BackendUnavailable(session.unavailable)
        out = []
        for target in load_targets([path], eval_set):
            out.append((target, session.evaluate(target.context(), target.eval_set.entries)))
        return out
    finally:
        session.close()
