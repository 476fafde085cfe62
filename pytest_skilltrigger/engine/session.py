"""The engine's front door: a session samples queries and asks questions, within a budget.

A library user needs nothing else::

    from pytest_skilltrigger import evaluate_skill
    results = evaluate_skill("skills/pdf")           # [(Target, [QueryResult, ...]), ...]

The session is assembled from collaborators made here and handed in: the result store, the
cost guard, the captured CLI requests kept in the store, the lanes (one per model) and the
asker. The store is written only through :meth:`TriggerSession.record`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from pytest_skilltrigger.backends import (
    BackendMaker,
    BackendParts,
    BackendUnavailable,
    TriggerBackend,
    builtin_backend,
    make_backend,
)
from pytest_skilltrigger.backends.api.rate_limit import FileLimits, MemoryLimits, RateLimiter
from pytest_skilltrigger.engine.asker import Asker, unavailable
from pytest_skilltrigger.engine.controls import ControlResult, run_controls
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.estimate import combined, estimate_session
from pytest_skilltrigger.engine.lanes import Lane, LaneParts, Lanes, lane_backends
from pytest_skilltrigger.engine.run_sources.batches import BatchRuns, drain_lanes
from pytest_skilltrigger.engine.sampler import Ahead, RunsAhead
from pytest_skilltrigger.engine.share import ProcessShare
from pytest_skilltrigger.engine.store import ResultStore, StoredCaptures
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, Usage
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.model.prices import Spend, load_prices
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.skills.catalog import Target, load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.estimate import Estimate
    from pytest_skilltrigger.engine.load_governor import LoadReport

#: what a sampling needs: the context (on its model), the entry and the plan
Request = tuple[TriggerContext, EvalEntry, SamplingPlan]


def asked(context: TriggerContext, entry: EvalEntry) -> TriggerContext:
    """The context an entry is asked in: after its history, when it has one (submitted,
    made ahead in batches and estimated alike, so a batch's runs serve the live sampling)."""
    return context.with_history(entry.history) if entry.history is not None else context


UNLISTED = (
    "disable-model-invocation: true in SKILL.md: Claude Code does not list this skill to the "
    "model, so it can never trigger"
)


class Notice(Protocol):
    """Something a person waiting on the session should know, as one line."""

    def line(self) -> str: ...


def _limiter(
    settings: Settings, share: ProcessShare | None, notices: Callable[[Notice], None] | None
) -> RateLimiter:
    """The session's pacing to the rate limits: its buckets in a file the session's processes
    share (xdist workers), else in memory."""
    store = FileLimits(share.limits_path) if share and share.limits_path else MemoryLimits()
    return RateLimiter(settings.rate_limits, store, notify=notices)


class TriggerSession:
    """Everything one process needs to sample trigger runs.

    Its collaborators are handed in, keyword only: ``backend`` a backend already made (the
    first model's), else ``maker`` makes one per model by its name in the settings (the
    built-in ones; the pytest layer passes its hook). When none can be made,
    :attr:`no_backend` says why and nothing runs. ``share`` is this process's part of a
    session several processes run (an xdist worker): the budget and the runs in flight are
    split, and the runs are handed to the process that stores them instead of being stored
    here. ``notices`` is told what a person waiting on the session should know: each poll of
    a message batch worth showing, the rate limits learnt and runs waiting on them.

    A context manager: ``with TriggerSession(settings) as session:`` closes it on the way
    out, waiting for the runs in flight (an exception abandons them).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: TriggerBackend | None = None,
        maker: BackendMaker = builtin_backend,
        share: ProcessShare | None = None,
        notices: Callable[[Notice], None] | None = None,
    ) -> None:
        settings = (settings or Settings()).validated()
        if share is not None and settings.budget_usd is not None:
            settings = replace(settings, budget_usd=share.part_of_budget(settings.budget_usd))
        self.settings = settings
        self.plan = SamplingPlan(settings.rule)
        self.writes_store = share is None
        self.store = ResultStore(settings.active_store) if settings.active_store else None
        self.prices = load_prices(settings.prices_path)
        #: why no backend could be made (then nothing runs and items skip), or None
        self.no_backend: str | None = None
        self.limiter = _limiter(settings, share, notices)
        backends: list[tuple[str | None, TriggerBackend]] = []
        try:
            captures = StoredCaptures(self.store, self.writes_store) if self.store else None
            made = BackendParts(captures=captures, limiter=self.limiter)
            backends = lane_backends(settings, backend, made, maker)
        except BackendUnavailable as exc:
            self.no_backend = str(exc)
        first = backends[0][1] if backends else None
        self.guard = CostGuard(first.model if first else None, self.prices, settings.budget_usd)
        self.lanes: Lanes | None = None
        self.asker: Asker | None = None
        #: the controls' results, once they ran (:meth:`check_controls`)
        self.control_results: tuple[ControlResult, ...] = ()
        if first is not None:
            reused = self.store if settings.cache_mode == "use" else None
            parts = LaneParts(
                self.guard,
                reused,
                self.record,
                store_batch_runs=self.record,
                progress=notices,
                share=share,
            )
            self.lanes = Lanes.build(settings, backends, parts)
            asking = BackendParts("ask", limiter=self.limiter)
            self.asker = Asker(
                self.guard,
                first,
                make=partial(make_backend, settings, asking, reuse=first, maker=maker),
                cli_slots=self.lanes.shared_limit,
            )

    # -- what the session runs on ------------------------------------------------------------
    @property
    def backend(self) -> TriggerBackend | None:
        """The first model's backend: what a session of one model runs on."""
        return self.lanes.default.backend if self.lanes else None

    @property
    def context_label(self) -> str | None:
        """Which context the runs send (captured from the CLI, builtin, the CLI itself)."""
        label = getattr(self.backend, "context_label", None)
        return str(label) if label else None

    @property
    def stopped(self) -> str | None:
        """Why the session makes no further call (bad credentials, an unknown model), if so;
        with a model matrix, the first model's that stopped."""
        return self.lanes.stopped if self.lanes is not None else None

    def load(self) -> LoadReport | None:
        """How many claude-code runs this process keeps in flight, and why (None: another
        backend, or no backend)."""
        return self.lanes.load() if self.lanes is not None else None

    @property
    def exhausted(self) -> str | None:
        """Why no further trigger run can be had, if so: the session stopped, the budget is
        spent, or the batch deadline passed. The improvement rounds stop on it rather than
        pay for proposals they cannot measure."""
        if self.stopped:
            return self.stopped
        if self.guard.refused:
            return budget_reached(self.guard.budget_usd)
        expired = [b for b in self._batch_lanes() if b.expired]
        return expired[0].timeout_reason() if expired else None

    def _batch_lanes(self) -> list[BatchRuns]:
        return [lane.batches for lane in self.lanes or () if lane.batches is not None]

    def context_key(self, context: TriggerContext) -> str | None:
        """The key results of this context are stored under; None without a backend, or
        when the context cannot be prepared (its runs are then errors, stored nowhere)."""
        if self.lanes is None:
            return None
        try:
            return self.lanes.of(context).sampler.context_key(context)
        except Exception:  # a capture that failed: submit() makes it an error result
            return None

    def prepare(self, contexts: Sequence[TriggerContext]) -> None:
        """Prepare these contexts' requests now (for ``--trigger-context claude-code``, the
        installed CLI's request is captured and stored), so that processes which store
        nothing (xdist workers) find them ready instead of each capturing its own."""
        for context in contexts:
            self.context_key(context)

    def estimate(self, requests: Sequence[Request]) -> Estimate | None:
        """What these samplings may cost, each in its model's lane, before any call: the runs
        each still needs after the stored runs it starts from (none for a rerun of unchanged
        skills); None without a backend or when a request cannot be sized."""

        if self.lanes is None:
            return None
        try:
            return combined(
                [
                    estimate_session(
                        [(asked(context, entry), entry.query) for context, entry, _ in mine],
                        self.settings,
                        lane.backend,
                        self.guard.price(lane.backend.model),
                        [lane.sampler.runs_to_go(asked(c, e), e.query, p) for c, e, p in mine],
                    )
                    for lane, mine in self.lanes.split(requests)
                ]
            )
        except Exception:
            return None

    # -- controls ------------------------------------------------------------------------------
    def check_controls(self, contexts: Sequence[TriggerContext]) -> str | None:
        """Run the controls (once per model of ``contexts``; none when they are off or no
        backend can run): why the items cannot be trusted, or None. The results stay in
        :attr:`control_results` for the report."""
        if not self.settings.controls_on or self.lanes is None or not contexts:
            return None
        self.control_results = tuple(run_controls(self.submit, self.plan, contexts))
        failed = next((c for c in self.control_results if c.problem), None)
        if failed is None:
            return None
        if failed.errored:  # nothing was stored: the next session asks again anyway
            return failed.problem
        came = " The answer came from runs an earlier session stored." if failed.stored else ""
        self._forget_controls(failed)
        return (
            f"{failed.problem}.{came} Its runs are not kept: the next session asks the "
            "controls again"
        )

    def _forget_controls(self, failed: ControlResult) -> None:
        """Drop a failed control's runs from the store: a fixed harness is asked again."""
        if self.store is None or not self.writes_store or failed.context is None:
            return
        key = self.context_key(failed.context)
        if key is None:
            return
        for result in (failed.positive, failed.negative):
            self.store.forget(key, result.query)

    # -- sampling ------------------------------------------------------------------------------
    def submit(
        self, context: TriggerContext, entry: EvalEntry, plan: SamplingPlan | None = None
    ) -> Future[QueryResult]:
        """Start sampling one entry; the future resolves to its QueryResult. A skill the
        model is never shown resolves at once, without a call. An entry with a history is
        asked after that conversation."""
        plan = plan or self.plan
        context = asked(context, entry)
        if not context.model_invocable:
            done: Future[QueryResult] = Future()
            unlisted = context.unlisted_reason or UNLISTED
            done.set_result(
                QueryResult(
                    entry.query,
                    entry.should_trigger,
                    plan.rule,
                    (),
                    unlisted=unlisted,
                    trigger_choices=plan.trigger_choices,
                )
            )
            return done
        if self.lanes is None:
            raise unavailable(self.no_backend)
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

    def sample_ahead(self, requests: Sequence[Request]) -> list[RunsAhead]:
        """With ``--trigger-batch``, make the runs these samplings need as message batches,
        every model's at once, so that submitting them later makes no live call; what was
        made is returned (for other processes: xdist workers). Nothing without batches.

        Each wave's runs are stored as soon as it is read, so Ctrl-C in a later wave keeps
        what was paid. SIGTERM (a CI job cancelled) cancels the batches in flight as Ctrl-C
        does, instead of leaving them to run unread."""
        if not self.settings.batch or self.lanes is None:
            return []
        started: list[tuple[Lane, list[Ahead]]] = []
        for lane, mine in self.lanes.split(requests):
            if lane.batches is None or lane.stop.reason:
                continue
            ahead = [
                found
                for context, entry, plan in mine
                if (
                    found := lane.sampler.sample_ahead(
                        asked(context, entry), entry.query, plan, lane.batches
                    )
                )
            ]
            if ahead:
                started.append((lane, ahead))
        sources = [lane.batches for lane, _ in started if lane.batches is not None]
        with sigterm_as_interrupt(only_if_default=True):  # (a caller's own handler stays)
            drain_lanes(sources, self.store.release if self.store is not None else None)
        return [
            RunsAhead(key, result.outcomes, result.skipped, lane.model)
            for lane, ahead in started
            for key, result in lane.sampler.keep_ahead(ahead)
        ]

    def forget_runs_ahead(self) -> None:
        """Forget the runs made ahead for the items, once they are done (see
        :meth:`~pytest_skilltrigger.engine.sampler.Sampler.forget_ahead`)."""
        for lane in self.lanes or ():
            lane.sampler.forget_ahead()

    def record(
        self,
        context_key: str,
        query: str,
        outcomes: Sequence[RunOutcome],
        sampling: str | None = None,
    ) -> None:
        """Store the runs of a query's sampling (this process's, a batch's as it is read, or
        an xdist worker's), and with ``sampling``, that its verdict used them: the one place
        the store's runs are written. Nothing is written in a process that hands its runs to
        another (an xdist worker), with ``--trigger-cache off``, or without a backend to name
        the runs' origin."""
        backend = self.backend
        if self.store is None or not self.writes_store or backend is None:
            return
        self.store.record((backend.name, backend.model), context_key, query, outcomes, sampling)

    # -- asking and spending -----------------------------------------------------------------
    def ask(
        self, prompt: str, model: str | None = None, phase: str = "improve"
    ) -> tuple[str, Usage]:
        """Ask the model a plain question (the optimizer's proposals, a drafted eval set),
        counted under ``phase`` (see :class:`~pytest_skilltrigger.engine.asker.Asker`)."""
        if self.asker is None:
            raise unavailable(self.no_backend)
        return self.asker.ask(prompt, model, phase)

    def spending(self) -> dict[str, Spend]:
        """What this process's calls cost so far, by phase (``prices.PHASES``), including
        what it took in from xdist workers."""
        return dict(self.guard.by_phase)

    def close(self, wait: bool = True) -> None:
        """Stop sampling (abandoning queued runs unless ``wait``) and release resources."""
        for lane in self.lanes or ():
            lane.close(wait)
        if self.asker is not None:
            self.asker.close()
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> TriggerSession:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        """Closed on the way out: the runs in flight are waited for, unless an exception
        (Ctrl-C) left the block, which abandons them."""
        self.close(wait=error is None)


def evaluate_skill(
    path: str, settings: Settings | None = None, eval_set: str | None = None
) -> list[tuple[Target, list[QueryResult]]]:
    """Evaluate every skill under ``path`` with its eval set; a library entry point."""
    with TriggerSession(settings) as session:
        if session.no_backend:
            raise BackendUnavailable(session.no_backend)
        return [
            (target, session.evaluate(target.context(), target.eval_set.entries))
            for target in load_targets([path], eval_set)
        ]
