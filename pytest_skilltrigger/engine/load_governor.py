"""The claude-code backend's runs in flight, moved to what the machine can take.

Why: each run in flight is a CLI process that spends a moment of CPU on the query (and more
when it starts), then waits on the API for seconds. At one run per CPU the machine mostly
waits; too many saturate the CPU (every run slows down) or run short of memory (each process
holds its own). Nobody knows the
right number before the session, so a governor finds it, once a tick (:attr:`Policy.period`):

* **memory first**: never more runs in flight than memory holds CLI processes, each at the
  largest peak RSS a CLI process reached: a share (:attr:`Policy.memory_share`) of the memory
  they can have, what is available plus what the runs in flight hold. Above that the limit
  drops to it at once.
* **the CPU saturated** (busy at least :attr:`Policy.saturated`): a quarter off, at least
  one, never below the start.
* **the CPU under its target** (:attr:`Policy.target`) **while runs wait for a slot**: more
  in proportion to the room left (the step that lands on the target when every run in flight
  uses about the same CPU), at least one, at most doubling, up to the cap.
* otherwise it stays.

A target just under saturation, because the runs are what the session is waiting for: once
the CPU is full more in flight only slows each start, and a CPU left a tenth idle is a tenth
of the runs not made. At most doubling, because a new process's CPU shows only in the next
reading: a bigger step would overshoot before the reading caught up. A quarter off, because
an overshoot (several xdist workers growing at once, another job starting) should be undone
within a few ticks, while halving would throw away much of the latency hiding that took
seconds to build. Not
below the start (the CPU count, the fixed default before): a CPU its own runs saturate does
not make a run cheaper when fewer are in flight, and below one per CPU cores would sit idle
while runs wait on the API; only memory pushes the limit lower. The cap (a few per CPU, at most
:attr:`Policy.most`) bounds what a misleading reading can start: a container's ``/proc/stat``
counts the host's CPUs, and the load average (where there is no ``/proc/stat``) lags.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.support.machine import CpuMeter, available_memory

MB = 1_000_000


@dataclass(frozen=True)
class Policy:
    """The governor's constants (see the module's docstring for the rule)."""

    target: float = 0.95  # grow while the machine's CPU is busy less than this
    saturated: float = 0.99  # shrink when it is busy at least this
    period: float = 1.0  # seconds between two ticks
    per_cpu: int = 8  # the cap: this many runs in flight per CPU...
    most: int = 32  # ...and never more than this
    memory_share: float = 0.75  # of the memory CLI processes can have, what they may take
    # a CLI process's peak memory until one is measured (the docs give the measured figure)
    assumed_peak: int = 300 * MB

    def cap(self, cpus: int) -> int:
        return max(1, min(self.per_cpu * cpus, self.most))


@dataclass(frozen=True)
class Readings:
    """Where the governor reads the machine: the share of its CPU busy since the last
    reading, the bytes of memory available, and the largest peak memory of a CLI process so
    far (each None when unknown); ``cpu_known``: whether the CPU use can be read at all.
    Tests hand in their own."""

    cpu_busy: Callable[[], float | None]
    memory_available: Callable[[], int | None]
    process_peak: Callable[[], int | None]
    cpu_known: bool = True

    @classmethod
    def of_machine(cls, process_peak: Callable[[], int | None]) -> Readings:
        """This machine's: ``/proc`` (the load average where there is none), and the peak
        memory of the runs' processes (``process_peak``: their backends')."""
        meter = CpuMeter()
        return cls(meter, available_memory, process_peak, meter.readable)


@dataclass(frozen=True)
class Bounds:
    """Where the limit starts and how far it may grow; ``parts`` is how many processes share
    the machine's memory (xdist workers: each counts its part of what is free)."""

    start: int
    cap: int
    parts: int = 1


@dataclass(frozen=True)
class Load:
    """What one tick sees: the CPU busy (None: unknown), the runs waiting for a slot, and the
    most runs in flight memory holds with the cap (the ceiling)."""

    cpu: float | None
    waiting: int
    ceiling: int


def next_limit(limit: int, load: Load, floor: int, policy: Policy) -> int:
    """The limit after one tick (the rule of the module's docstring)."""
    if limit > load.ceiling:
        return max(1, load.ceiling)
    if load.cpu is None:
        return limit
    if load.cpu >= policy.saturated:
        return min(limit, max(floor, limit - max(1, limit // 4)))
    if load.cpu < policy.target and load.waiting:
        # in proportion to the room left (the CPU a run uses is about the same for each),
        # at most doubling: a run started late in the tick has not shown its CPU yet
        room = int(limit * (policy.target - load.cpu) / max(load.cpu, 0.01))
        return min(load.ceiling, limit + max(1, min(room, limit)))
    return limit


@dataclass(frozen=True)
class LoadReport:
    """How many runs a backend kept in flight: what was chosen (``fixed_by`` says why the
    limit did not move, None: a governor moved it) and what happened. Memory in bytes."""

    backend: str
    start: int
    cap: int
    fixed_by: str | None = None
    memory_holds: int | None = None  # CLI processes memory holds (None: not known)
    per_process: int = 0  # the peak RSS ``memory_holds`` counts each at (measured or assumed)
    process_peak: int | None = None  # the largest peak RSS of a CLI process (None: none read)
    average_in_flight: float = 0.0  # while any run was in flight
    most_in_flight: int = 0
    lowest_limit: int = 0
    highest_limit: int = 0
    final_limit: int = 0
    processes: int = 1  # the processes whose runs these are (xdist workers, side by side)

    @property
    def governed(self) -> bool:
        return self.fixed_by is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "governed": self.governed,
            "fixed_by": self.fixed_by,
            "start": self.start,
            "cap": self.cap,
            "memory_holds": self.memory_holds,
            "per_process_bytes": self.per_process,
            "process_peak_rss_bytes": self.process_peak,
            "average_in_flight": round(self.average_in_flight, 3),
            "most_in_flight": self.most_in_flight,
            "lowest_limit": self.lowest_limit,
            "highest_limit": self.highest_limit,
            "final_limit": self.final_limit,
            "processes": self.processes,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadReport:
        """A report as :meth:`to_dict` wrote it (an xdist worker's, read by the controller)."""
        return cls(
            str(data["backend"]),
            int(data["start"]),
            int(data["cap"]),
            fixed_by=data.get("fixed_by"),
            memory_holds=data.get("memory_holds"),
            per_process=int(data.get("per_process_bytes") or 0),
            process_peak=data.get("process_peak_rss_bytes"),
            average_in_flight=float(data["average_in_flight"]),
            most_in_flight=int(data["most_in_flight"]),
            lowest_limit=int(data["lowest_limit"]),
            highest_limit=int(data["highest_limit"]),
            final_limit=int(data["final_limit"]),
            processes=int(data.get("processes", 1)),
        )


def side_by_side(reports: Sequence[LoadReport]) -> LoadReport | None:
    """The runs in flight of processes that ran at the same time (xdist workers, each with
    its part of the machine): their limits and runs in flight add up (the most at once is
    at most the sum), and a CLI process's peak is the largest. None: no report."""
    if not reports:
        return None
    peaks = [r.process_peak for r in reports if r.process_peak]
    holds = [r.memory_holds for r in reports if r.memory_holds is not None]
    return LoadReport(
        reports[0].backend,
        sum(r.start for r in reports),
        sum(r.cap for r in reports),
        fixed_by=reports[0].fixed_by,
        memory_holds=sum(holds) if holds else None,
        per_process=max(r.per_process for r in reports),
        process_peak=max(peaks) if peaks else None,
        average_in_flight=sum(r.average_in_flight for r in reports),
        most_in_flight=sum(r.most_in_flight for r in reports),
        lowest_limit=sum(r.lowest_limit for r in reports),
        highest_limit=sum(r.highest_limit for r in reports),
        final_limit=sum(r.final_limit for r in reports),
        processes=sum(r.processes for r in reports),
    )


class LoadGovernor:
    """Moves ``concurrency``'s limit within ``bounds`` on the readings, once a tick, on a
    daemon thread from :meth:`start` to :meth:`close` (or by :meth:`tick`, in tests)."""

    def __init__(
        self,
        concurrency: Concurrency,
        bounds: Bounds,
        readings: Readings,
        policy: Policy | None = None,
    ) -> None:
        self.concurrency = concurrency
        self.bounds = bounds
        self.readings = readings
        self.policy = policy or Policy()
        concurrency.set_limit(bounds.start)
        self.lowest = self.highest = concurrency.limit
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def memory_holds(self, in_flight: int = 0) -> int | None:
        """How many CLI processes memory holds for this process, each at a process's peak:
        the share of what they can have (this process's part of the available memory, plus
        what its ``in_flight`` processes hold). None: the available memory is not known."""
        available = self.readings.memory_available()
        if available is None:
            return None
        peak = self.per_process()
        theirs = available / self.bounds.parts / peak + in_flight
        return int(self.policy.memory_share * theirs)

    def per_process(self) -> int:
        """What one more CLI process is counted at: the largest peak measured, or assumed."""
        return self.readings.process_peak() or self.policy.assumed_peak

    def tick(self) -> int:
        """Read the machine once and move the limit; the new limit."""
        concurrency = self.concurrency
        holds = self.memory_holds(concurrency.in_flight)
        ceiling = self.bounds.cap if holds is None else min(self.bounds.cap, holds)
        load = Load(self.readings.cpu_busy(), concurrency.waiting, ceiling)
        limit = next_limit(concurrency.limit, load, self.bounds.start, self.policy)
        if limit != concurrency.limit:
            concurrency.set_limit(limit)
        self.lowest = min(self.lowest, concurrency.limit)
        self.highest = max(self.highest, concurrency.limit)
        return concurrency.limit

    def start(self) -> None:
        """Tick on a daemon thread until :meth:`close`."""
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(
                target=self._watch, name="skilltrigger-load", daemon=True
            )
            self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(self.policy.period):
            try:
                self.tick()
            except Exception:  # a reading gone wrong: the limit stays where it is
                return

    def close(self) -> None:
        """Stop ticking (the limit stays where it is); safe to call more than once."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def report(self, backend: str) -> LoadReport:
        """What was chosen and what happened, so far."""
        concurrency = self.concurrency
        return LoadReport(
            backend,
            self.bounds.start,
            self.bounds.cap,
            memory_holds=self.memory_holds(),
            per_process=self.per_process(),
            process_peak=self.readings.process_peak(),
            average_in_flight=concurrency.average_in_flight(),
            most_in_flight=concurrency.peak,
            lowest_limit=self.lowest,
            highest_limit=self.highest,
            final_limit=concurrency.limit,
        )
