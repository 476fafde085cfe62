"""One lane per model of a session: its backend and its sampler.

Why lanes: with a model matrix (``--trigger-model=a,b``) every query is sampled on each
model. A backend speaks for one model (its requests, its captured Claude Code request, its
store keys), so each model gets its own, with a sampler over it; the lanes share the session's
store, cost guard and budget, and split its requests in flight between them. A context says
which lane it runs in (``TriggerContext.model``; None: the first).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pytest_skilltrigger.backends import TriggerBackend, make_backend
from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.engine.sampler import Recorder, Sampler
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.settings import Settings

T = TypeVar("T", bound=tuple)  # an item whose first value is a TriggerContext

DEFAULT_API_CONCURRENCY = 10


@dataclass
class Lane:
    """One model's backend and the sampler that runs its queries."""

    model: str | None  # as the settings name it (None: the backend's default)
    backend: TriggerBackend
    sampler: Sampler


class Lanes:
    """The session's lanes, in the settings' order (the first is the default one)."""

    def __init__(self, lanes: list[Lane]) -> None:
        self._lanes = lanes
        self._by_model = {lane.model: lane for lane in lanes}

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        backend: TriggerBackend | None,
        shelf: Any,
        store: ResultStore | None,
        record: Recorder,
        guard_of: Any,
        share: tuple[int, int] | None,
    ) -> Lanes:
        """A backend per model (``backend`` given: the one lane), each with a sampler over
        its share of the session's requests in flight. Raises BackendUnavailable."""
        backends = []
        for model in settings.lane_models:
            if backend is not None and not backends:
                made = backend
            else:
                made = make_backend(replace(settings, model=model), shelf=shelf)
            backends.append((model, made))
        guard: CostGuard = guard_of(backends[0][1].model)
        total = settings.concurrency or _default_concurrency(backends[0][1])
        each = max(1, total // len(backends))
        lanes = []
        for model, made in backends:
            sampler = Sampler(
                made, concurrency=_share(each, share), store=store, record=record, guard=guard
            )
            lanes.append(Lane(model, made, sampler))
        return cls(lanes)

    @property
    def default(self) -> Lane:
        return self._lanes[0]

    def of(self, context: TriggerContext) -> Lane:
        """The lane a context runs in (an unknown model: the default's)."""
        return self.of_model(context.model)

    def of_model(self, model: str | None) -> Lane:
        """The lane of a model of the matrix (None or an unknown model: the default's)."""
        return self._by_model.get(model, self.default)

    def __iter__(self) -> Iterator[Lane]:
        return iter(self._lanes)

    def split(self, items: Sequence[T]) -> list[tuple[Lane, list[T]]]:
        """Items whose first value is a context, by the lane it runs in: every lane in order,
        with its items (maybe none)."""
        by_lane: dict[int, list[T]] = {id(lane): [] for lane in self._lanes}
        for item in items:
            by_lane[id(self.of(item[0]))].append(item)
        return [(lane, by_lane[id(lane)]) for lane in self._lanes]

    @property
    def fatal(self) -> str | None:
        """The first lane's reason why no further call will be made, if any has one."""
        return next((lane.sampler.fatal for lane in self._lanes if lane.sampler.fatal), None)


def _default_concurrency(backend: TriggerBackend) -> int:
    if backend.name == "claude-code":
        return os.cpu_count() or 2
    return DEFAULT_API_CONCURRENCY


def _share(total: int, share: tuple[int, int] | None) -> int:
    """This process's part of ``total`` when it is one of several (at least one)."""
    if share is None:
        return total
    index, count = share
    return max(1, total // count + (1 if index < total % count else 0))
