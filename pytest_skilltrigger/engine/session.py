"""The engine's front door: one object holding a session's backend, store, budget and sampler.

The pytest plugin creates one per process; a library user can do the same::

    from pytest_skilltrigger.engine.session import TriggerSession, evaluate_skill
    results = evaluate_skill("skills/pdf")           # list of QueryResult, in file order
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Future

from pytest_skilltrigger.backends import BackendUnavailable, TriggerBackend, make_backend
from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.cost import CostGuard, load_prices, price_of
from pytest_skilltrigger.engine.outcome import QueryResult
from pytest_skilltrigger.engine.sampler import Sampler, SamplingPlan
from pytest_skilltrigger.engine.settings import Settings
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.skills.catalog import Target, load_targets
from pytest_skilltrigger.skills.evalset import EvalEntry

DEFAULT_API_CONCURRENCY = 10


class TriggerSession:
    """Shared machinery for every trigger check of one process.

    ``backend`` may be passed in (tests, custom backends); otherwise it is chosen from the
    settings. When none is available, :attr:`unavailable` holds the reason and nothing runs.
    ``write_store`` is false in xdist workers, which hand their runs to the controller.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        backend: TriggerBackend | None = None,
        write_store: bool = True,
    ) -> None:
        self.settings = (settings or Settings()).validated()
        self.unavailable: str | None = None
        self.backend: TriggerBackend | None = backend
        if self.backend is None:
            try:
                self.backend = make_backend(self.settings)
            except BackendUnavailable as exc:
                self.unavailable = str(exc)
        self.prices = load_prices(self.settings.prices_path)
        self.plan = SamplingPlan(
            self.settings.runs_per_query, self.settings.threshold, self.settings.curtail
        )
        self.store: ResultStore | None = None
        if self.settings.cache_mode != "off" and self.settings.store_path:
            self.store = ResultStore(self.settings.store_path)
        self.guard: CostGuard | None = None
        self.sampler: Sampler | None = None
        if self.backend is not None:
            self.guard = CostGuard(
                price_of(self.backend.model, self.prices), self.settings.budget_usd
            )
            self.sampler = Sampler(
                self.backend,
                concurrency=self.settings.concurrency or self._default_concurrency(),
                store=self.store,
                cache_mode=self.settings.cache_mode,
                write_store=write_store,
                guard=self.guard,
            )

    def _default_concurrency(self) -> int:
        if self.backend is not None and self.backend.name == "claude-code":
            return os.cpu_count() or 2
        return DEFAULT_API_CONCURRENCY

    @property
    def backend_name(self) -> str | None:
        return self.backend.name if self.backend else None

    @property
    def model(self) -> str | None:
        return self.backend.model if self.backend else None

    def submit(
        self, context: TriggerContext, entry: EvalEntry, plan: SamplingPlan | None = None
    ) -> Future[QueryResult]:
        """Start sampling one entry; the future resolves to its QueryResult."""
        if self.sampler is None:
            raise BackendUnavailable(self.unavailable or "no backend")
        return self.sampler.submit(context, entry.query, entry.should_trigger, plan or self.plan)

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
        """Stop the sampler (abandoning queued runs unless ``wait``) and release resources."""
        if self.sampler is not None:
            self.sampler.close(wait=wait)
        if self.backend is not None:
            self.backend.close()
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
