"""One lane per model of a session: its backend, its run sources and its sampler.

Why lanes: with a model matrix (``--trigger-model=a,b``) every query is sampled on each
model. A backend speaks for one model (its requests, its captured Claude Code request, its
store keys), so each model gets its own, with a sampler over it; the lanes share the session's
store, cost guard and budget, and split its runs in flight between them. A context says which
lane it runs in (``TriggerContext.model``; None: the first).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pytest_skilltrigger.backends import TriggerBackend, make_backend
from pytest_skilltrigger.backends.api.rate_limit import RateLimiter
from pytest_skilltrigger.backends.base import BatchingBackend
from pytest_skilltrigger.backends.capture import CaptureStore
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.engine.run_sources import Stop
from pytest_skilltrigger.engine.run_sources.batches import BatchRuns, BatchTiming
from pytest_skilltrigger.engine.run_sources.live import LiveRuns
from pytest_skilltrigger.engine.sampler import Recorder, Sampler
from pytest_skilltrigger.engine.share import ProcessShare
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.settings import Settings

T = TypeVar("T", bound=tuple[Any, ...])  # an item whose first value is a TriggerContext

DEFAULT_API_CONCURRENCY = 10


@dataclass
class Lane:
    """One model's backend, the sources of its runs and the sampler that runs its queries."""

    model: str | None  # as the settings name it (None: the backend's default)
    backend: TriggerBackend
    sampler: Sampler
    live: LiveRuns
    batches: BatchRuns | None  # with --trigger-batch, on a backend that has them
    stop: Stop

    def close(self, wait: bool) -> None:
        """No further wave; the runs in flight end (or, without ``wait``, are dropped: Ctrl-C),
        then what is unfinished is skipped as interrupted."""
        self.sampler.close()
        self.live.close(wait=wait)
        self.sampler.abandon()
        self.backend.close()


@dataclass(frozen=True)
class LaneParts:
    """What every lane of a session shares."""

    guard: CostGuard
    store: ResultStore | None  # where stored runs are reused from (None: they are not)
    record: Recorder
    share: ProcessShare | None = None  # this process's part of a session run by several


def lane_backends(
    settings: Settings,
    backend: TriggerBackend | None,
    captures: CaptureStore | None,
    limiter: RateLimiter,
) -> list[tuple[str | None, TriggerBackend]]:
    """A backend per model of the settings (``backend`` given: it is the first), all paced
    by the one limiter. Raises BackendUnavailable."""
    made: list[tuple[str | None, TriggerBackend]] = []
    for model in settings.lane_models:
        if backend is not None and not made:
            made.append((model, backend))
            continue
        lane_settings = replace(settings, model=model)
        made.append((model, make_backend(lane_settings, captures=captures, limiter=limiter)))
    return made


class Lanes:
    """The session's lanes, in the settings' order (the first is the default one)."""

    def __init__(self, lanes: list[Lane]) -> None:
        self._lanes = lanes
        self._by_model = {lane.model: lane for lane in lanes}

    @classmethod
    def build(
        cls,
        settings: Settings,
        backends: Sequence[tuple[str | None, TriggerBackend]],
        parts: LaneParts,
    ) -> Lanes:
        """A lane per backend, each with its share of the session's runs in flight."""
        total = settings.concurrency or _default_concurrency(backends[0][1])
        each = max(1, total // len(backends))
        if parts.share is not None:
            each = parts.share.part_of(each)
        timing = BatchTiming(settings.batch_poll, settings.batch_timeout)
        lanes = []
        for model, backend in backends:
            stop = Stop()
            live = LiveRuns(backend, Concurrency(each), parts.guard, stop)
            batches = None
            if settings.batch and isinstance(backend, BatchingBackend):
                batches = BatchRuns(backend, timing, guard=parts.guard, stop=stop)
            sampler = Sampler(backend, live, stop, store=parts.store, record=parts.record)
            lanes.append(Lane(model, backend, sampler, live, batches, stop))
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
    def stopped(self) -> str | None:
        """The first lane's reason why it makes no further call, if any has one."""
        return next((lane.stop.reason for lane in self._lanes if lane.stop.reason), None)


def _default_concurrency(backend: TriggerBackend) -> int:
    if backend.name == "claude-code":
        return os.cpu_count() or 2
    return DEFAULT_API_CONCURRENCY
