"""How many runs a lane keeps in flight: a limit that may move while the session runs.

Why a limit apart from the pool of threads: the pool is sized once (:attr:`Concurrency.most`),
but the right number of runs in flight is not always known at the start (the claude-code
backend's processes fill the machine by measure). Threads past the limit wait for a slot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Concurrency:
    """At most :attr:`limit` runs at once, the limit between 1 and :attr:`most`; it also
    keeps the time-weighted average of the runs in flight and the most reached, for the
    summary, and counts the runs waiting for a slot (a governor grows the limit for them)."""

    def __init__(self, limit: int, most: int | None = None) -> None:
        self.most = max(1, most if most is not None else limit)
        self._limit = min(max(1, limit), self.most)
        self._in_flight = 0
        self._waiting = 0
        self._peak = 0
        self._changed = threading.Condition()
        self._started = time.monotonic()
        self._last = self._started
        self._area = 0.0  # runs in flight integrated over time
        self._busy = 0.0  # time with at least one run in flight

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Runs waiting for a slot now."""
        return self._waiting

    @property
    def peak(self) -> int:
        """The most runs that were in flight at once."""
        return self._peak

    def set_limit(self, limit: int) -> None:
        """Move the limit (kept within 1 and :attr:`most`); waiting runs start at once when
        it grows."""
        with self._changed:
            self._limit = min(max(1, limit), self.most)
            self._changed.notify_all()

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one of the slots for a run."""
        with self._changed:
            if self._in_flight >= self._limit:
                self._wait_for_room()
            self._count(+1)
        try:
            yield
        finally:
            with self._changed:
                self._count(-1)
                self._changed.notify()

    def _wait_for_room(self) -> None:
        """Wait, counted as waiting, until a run may start (the lock held)."""
        self._waiting += 1
        try:
            while self._in_flight >= self._limit:
                self._changed.wait()
        finally:
            self._waiting -= 1

    def _count(self, step: int) -> None:
        """Add the time since the last change to the averages, then change the count."""
        now = time.monotonic()
        if self._in_flight:
            self._area += self._in_flight * (now - self._last)
            self._busy += now - self._last
        self._last = now
        self._in_flight += step
        self._peak = max(self._peak, self._in_flight)

    def average_in_flight(self) -> float:
        """Runs in flight on average while any was (0 before the first run)."""
        with self._changed:
            self._count(0)
            return self._area / self._busy if self._busy else 0.0
