"""Running a matrix's lanes' batches at once: the models do not wait for each other, and one
model's failure stops its own lane only."""

from __future__ import annotations

import threading
import time

from pytest_skilltrigger.engine.run_sources import Stop
from pytest_skilltrigger.engine.run_sources.batches import BatchRuns, drain_lanes


class Runner(BatchRuns):
    """A lane's BatchRuns whose drain is a stand-in: how long its batches take, or what
    breaks it (its threads, stops and readiness are the real ones)."""

    def __init__(  # the real one needs a backend with batches: only what draining reads
        self,
        model: str,
        takes: float = 0.0,
        breaks: Exception | None = None,
        meets: threading.Barrier | None = None,
    ) -> None:
        self.model = model
        self.takes = takes
        self.breaks = breaks
        self.meets = meets  # the other runners it must be running beside
        self.stop = Stop()
        self.stopping = threading.Event()
        self.started: float | None = None
        self.ended: float | None = None
        self._thread: threading.Thread | None = None

    def drain(self) -> None:
        self.started = time.monotonic()
        if self.breaks is not None:
            raise self.breaks
        if self.meets is not None:
            self.meets.wait(timeout=10)  # broken (an error) unless the others run at once
        if self.stopping.wait(self.takes):
            raise KeyboardInterrupt
        self.ended = time.monotonic()


def test_the_lanes_run_at_once_and_a_failure_stops_its_own_lane_only() -> None:
    together = threading.Barrier(2)
    slow, other = Runner("opus", meets=together), Runner("haiku", meets=together)
    broken = Runner("sonnet", breaks=OSError("database or disk is full"))
    broken.stopping.set()  # a stop left over from an earlier run is cleared
    ended: list[str] = []
    drain_lanes(
        [slow, other, broken],
        lambda: ended.append(threading.current_thread().name),
    )
    assert slow.ended is not None and other.ended is not None
    assert broken.stop.reason == "the message batches failed: database or disk is full"
    assert slow.stop.reason is None and other.stop.reason is None
    # each lane's thread closes what it opened as it ends (its store connection)
    assert sorted(ended) == ["batches-haiku", "batches-opus", "batches-sonnet"]


def test_a_single_lane_runs_in_the_calling_thread_as_before() -> None:
    """One model: no thread, and a failure is raised to the caller, as it always was."""
    import pytest

    broken = Runner("opus", breaks=RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        drain_lanes([broken])
    assert broken.stop.reason is None
    quiet = Runner("opus")
    drain_lanes([quiet], lambda: pytest.fail("no thread of its own"))
    assert quiet.ended is not None


def test_ctrl_c_stops_every_lane_and_is_raised() -> None:
    """Ctrl-C reaches the calling thread only: every runner is told to stop (each cancels
    and records at its next pause), and the interrupt is raised once they have."""
    import _thread
    import signal

    import pytest

    lanes = [Runner("opus", takes=30.0), Runner("haiku", takes=30.0)]
    # Ctrl-C as Python handles it by default, whatever this process had installed before
    kept = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            drain_lanes(lanes)  # type: ignore[arg-type]
    finally:
        signal.signal(signal.SIGINT, kept)
    # told to stop, and raised before their thirty seconds of work ended
    assert all(r.stopping.is_set() and r.ended is None for r in lanes)
