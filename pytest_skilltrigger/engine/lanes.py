"""One lane per model of a session: its backend, its run sources and its sampler.

Why lanes: with a model matrix (``--trigger-model=a,b``) every query is sampled on each
model. A backend speaks for one model (its requests, its captured Claude Code request, its
store keys), so each model gets its own, with a sampler over it; the lanes share the session's
store, cost guard and budget, and split its runs in flight between them. A context says which
lane it runs in (``TriggerContext.model``; None: the first).

The claude-code backend's lanes hold one limit together instead: their runs are CLI
processes on the same machine, whatever their model, and unless ``--trigger-concurrency``
fixes it a :class:`~pytest_skilltrigger.engine.load_governor.LoadGovernor` moves that limit
to what the machine can take.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from pytest_skilltrigger.backends import BackendMaker, BackendParts, TriggerBackend, make_backend
from pytest_skilltrigger.backends.base import BatchingBackend, ProcessBackend
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.engine.load_governor import (
    Bounds,
    LoadGovernor,
    LoadReport,
    Policy,
    Readings,
)
from pytest_skilltrigger.engine.run_sources import Stop
from pytest_skilltrigger.engine.run_sources.batches import (
    BatchListeners,
    BatchProgress,
    BatchRuns,
    BatchTiming,
)
from pytest_skilltrigger.engine.run_sources.batches import Recorder as BatchRecorder
from pytest_skilltrigger.engine.run_sources.live import LiveRuns
from pytest_skilltrigger.engine.sampler import Recorder, Sampler
from pytest_skilltrigger.engine.share import ProcessShare
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.support.machine import cpu_count

T = TypeVar("T", bound=tuple[Any, ...])  # an item whose first value is a TriggerContext

DEFAULT_API_CONCURRENCY = 10
FIXED_BY_OPTION = "--trigger-concurrency"
FIXED_BY_NO_CPU = "this system does not publish its CPU use"


@dataclass
class Lane:
    """One model's backend, the sources of its runs and the sampler that runs its queries."""

    model: str | None  # as the settings name it (None: the backend's default)
    backend: TriggerBackend
    sampler: Sampler
    live: LiveRuns
    batches: BatchRuns | None  # with --trigger-batch, on a backend that has them
    stop: Stop
    governor: LoadGovernor | None = None  # what moves its limit (the lanes share it)

    def close(self, wait: bool) -> None:
        """No further wave; the runs in flight end (or, without ``wait``, are dropped: Ctrl-C),
        then what is unfinished is skipped as interrupted."""
        self.sampler.close()
        self.live.close(wait=wait)
        self.sampler.abandon()
        if self.governor is not None:
            self.governor.close()
        self.backend.close()


@dataclass(frozen=True)
class LaneParts:
    """What every lane of a session shares: the budget, the store runs are reused from
    (None: they are not), where finished samplings are recorded and where batch runs are
    stored as they are read, who is told of a batch's progress (with its lane's model in a
    matrix), and this process's part of a session run by several."""

    guard: CostGuard
    store: ResultStore | None
    record: Recorder
    store_batch_runs: BatchRecorder | None = None
    progress: Callable[[BatchProgress], None] | None = None
    share: ProcessShare | None = None


@dataclass(frozen=True)
class InFlight:
    """How a session's lanes hold their runs in flight: each its own limit of ``each`` (the
    API backend: its requests cost the machine little), or all of them one ``shared`` limit
    (the claude-code backend's CLI processes), moved by a ``governor`` unless ``fixed_by``
    says what fixed it."""

    backend: str
    each: int
    shared: Concurrency | None = None
    governor: LoadGovernor | None = None
    fixed_by: str | None = None
    # the most memory one of the backends' processes has held so far (None: not known)
    process_peak: Callable[[], int | None] = lambda: None

    @classmethod
    def of(
        cls,
        settings: Settings,
        backends: Sequence[TriggerBackend],
        share: ProcessShare | None,
    ) -> InFlight:
        """The runs in flight of one lane per backend: ``--trigger-concurrency`` when set,
        else the backend's default; an xdist worker keeps its share. Backends whose runs are
        processes on this machine share one limit."""
        part = share.part_of if share is not None else (lambda total: total)
        name = backends[0].name
        processes = [b for b in backends if isinstance(b, ProcessBackend)]
        if not processes:
            total = settings.concurrency or DEFAULT_API_CONCURRENCY
            return cls(name, part(max(1, total // len(backends))))

        def peak() -> int | None:
            return max((b.process_peak for b in processes if b.process_peak), default=None)

        if settings.concurrency:
            fixed = part(settings.concurrency)
            return cls(name, fixed, Concurrency(fixed), fixed_by=FIXED_BY_OPTION, process_peak=peak)
        return cls.governed(name, part, share.count if share is not None else 1, peak)

    @classmethod
    def governed(
        cls,
        backend: str,
        part: Callable[[int], int],
        processes: int,
        peak: Callable[[], int | None],
    ) -> InFlight:
        """From the CPU count (this process's part of it) up to the cap (its part), moved by a
        governor on this machine's readings; fixed at the start where the CPU use cannot be
        read."""
        policy = Policy()
        cpus = cpu_count()
        start, cap = part(cpus), max(part(cpus), part(policy.cap(cpus)))
        readings = Readings.of_machine(peak)
        if not readings.cpu_known:
            return cls(backend, start, Concurrency(start), fixed_by=FIXED_BY_NO_CPU)
        shared = Concurrency(start, most=cap)
        governor = LoadGovernor(shared, Bounds(start, cap, processes), readings, policy)
        governor.start()
        return cls(backend, start, shared, governor, process_peak=peak)

    def of_lane(self) -> Concurrency:
        return self.shared if self.shared is not None else Concurrency(self.each)

    def report(self) -> LoadReport | None:
        """How many CLI runs were in flight, and why (None: not the claude-code backend)."""
        if self.shared is None:
            return None
        if self.governor is not None:
            return self.governor.report(self.backend)
        shared = self.shared
        return LoadReport(
            self.backend,
            self.each,
            self.each,
            fixed_by=self.fixed_by,
            process_peak=self.process_peak(),
            average_in_flight=shared.average_in_flight(),
            most_in_flight=shared.peak,
            lowest_limit=shared.limit,
            highest_limit=shared.limit,
            final_limit=shared.limit,
        )


def _named(
    show: Callable[[BatchProgress], None], model: str | None, progress: BatchProgress
) -> None:
    """Show a batch's progress with the model of the matrix it runs on."""
    show(replace(progress, model=model))


def lane_backends(
    settings: Settings,
    backend: TriggerBackend | None,
    parts: BackendParts,
    maker: BackendMaker,
) -> list[tuple[str | None, TriggerBackend]]:
    """A backend per model of the settings (``backend`` given: it is the first), each made
    by ``maker`` with ``parts`` (the captures, the one limiter that paces them all). Raises
    BackendUnavailable."""
    made: list[tuple[str | None, TriggerBackend]] = []
    for model in settings.lane_models:
        if backend is not None and not made:
            made.append((model, backend))
            continue
        lane_settings = replace(settings, model=model)
        made.append((model, make_backend(lane_settings, parts, maker=maker)))
    return made


class Lanes:
    """The session's lanes, in the settings' order (the first is the default one)."""

    def __init__(self, lanes: list[Lane], in_flight: InFlight | None = None) -> None:
        self._lanes = lanes
        self._by_model = {lane.model: lane for lane in lanes}
        self.in_flight = in_flight

    @classmethod
    def build(
        cls,
        settings: Settings,
        backends: Sequence[tuple[str | None, TriggerBackend]],
        parts: LaneParts,
    ) -> Lanes:
        """A lane per backend, each with its share of the session's runs in flight (the
        claude-code backend's lanes: one limit for all)."""
        in_flight = InFlight.of(settings, [b for _model, b in backends], parts.share)
        timing = BatchTiming(settings.batch_poll, settings.batch_timeout)
        lanes = []
        for model, backend in backends:
            stop = Stop()
            concurrency = in_flight.of_lane()
            live = LiveRuns(backend, concurrency, parts.guard, stop)
            batches = None
            if settings.batch and isinstance(backend, BatchingBackend):
                progress = parts.progress
                if progress is not None and settings.models:
                    progress = partial(_named, progress, model)
                batches = BatchRuns(
                    backend,
                    timing,
                    guard=parts.guard,
                    stop=stop,
                    listeners=BatchListeners(parts.store_batch_runs, progress),
                )
            sampler = Sampler(backend, live, stop, store=parts.store, record=parts.record)
            lanes.append(Lane(model, backend, sampler, live, batches, stop, in_flight.governor))
        return cls(lanes, in_flight)

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

    @property
    def shared_limit(self) -> Concurrency | None:
        """The one limit the claude-code backend's lanes hold their CLI processes to (None:
        each lane has its own); a question the CLI answers takes a slot of it too."""
        return self.in_flight.shared if self.in_flight is not None else None

    def load(self) -> LoadReport | None:
        """How many runs the claude-code backend keeps in flight, and why (None: another
        backend, whose limit never moves)."""
        return self.in_flight.report() if self.in_flight is not None else None
