"""Started CLI processes kept between runs, by context.

Why keep them: a started process answers the next query for a fraction of the CPU of a start
(:class:`~pytest_skilltrigger.backends.claude_code.process.WarmCli`). Why by context: a process
lists the skills its workspace held when it started, so it serves the runs of that context
only. Why bounded: an idle process holds its memory. One gives way when a run of another
context needs a new process, so there are never more processes than runs were once in flight
together; one left idle for :data:`IDLE_SECONDS` is stopped, so a session whose runs are over
holds none; one that answered :data:`MOST_QUERIES` is stopped, since a process's memory grows
a little with each query (``benchmarks/bench_cli_memory.py`` prints how much).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_skilltrigger.backends.claude_code.process import WarmCli

IDLE_SECONDS = 5.0
MOST_QUERIES = 100  # a new start per this many queries: little CPU, and the growth bounded


@dataclass(eq=False)
class Started:
    """A CLI process and the workspace it started in, for the runs of one context (``key``)."""

    cli: WarmCli
    run_dir: Path
    key: str
    idle_since: float = 0.0


class IdlePool:
    """The idle processes; thread-safe. ``retire`` stops one that leaves the pool (it is
    called outside the pool's lock, from the caller's thread or the reaper's)."""

    def __init__(
        self,
        retire: Callable[[Started], None],
        idle_seconds: float = IDLE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        most_queries: int = MOST_QUERIES,
    ) -> None:
        self._retire = retire
        self._idle_seconds = idle_seconds
        self._most_queries = most_queries
        self._clock = clock
        self._idle: list[Started] = []  # the most recently used last
        self._wake = threading.Condition()
        self._closed = False
        self._reaper: threading.Thread | None = None

    def take(self, key: str) -> Started | None:
        """The most recently used idle process of context ``key`` (it is the warmest), if
        any; one that died while idle is stopped on the way."""
        dead: list[Started] = []
        found = None
        with self._wake:
            for at in range(len(self._idle) - 1, -1, -1):
                if self._idle[at].key != key:
                    continue
                one = self._idle.pop(at)
                if one.cli.alive():
                    found = one
                    break
                dead.append(one)
        for one in dead:
            self._retire(one)
        return found

    def make_room(self, key: str) -> None:
        """Before a process of ``key`` starts: stop the least recently used idle process of
        another context, if there is one."""
        with self._wake:
            victim = next((s for s in self._idle if s.key != key), None)
            if victim is not None:
                self._idle.remove(victim)
        if victim is not None:
            self._retire(victim)

    def give_back(self, started: Started) -> bool:
        """Keep ``started`` for the next run of its context; False (the caller stops it) once
        the pool is closed or the process has answered its share of queries."""
        with self._wake:
            if self._closed or started.cli.queries >= self._most_queries:
                return False
            started.idle_since = self._clock()
            self._idle.append(started)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="claude-code-idle", daemon=True
                )
                self._reaper.start()
            self._wake.notify()
        return True

    def idle(self) -> int:
        with self._wake:
            return len(self._idle)

    def close(self) -> list[Started]:
        """Take no more; the idle processes, for the caller to stop."""
        with self._wake:
            self._closed = True
            taken, self._idle = self._idle, []
            self._wake.notify()
        return taken

    def _reap(self) -> None:
        """Stop each process once it has been idle for ``idle_seconds``."""
        while True:
            with self._wake:
                if self._closed:
                    return
                now = self._clock()
                expired = [s for s in self._idle if now - s.idle_since >= self._idle_seconds]
                if not expired:
                    soonest = min((s.idle_since for s in self._idle), default=None)
                    wait = None if soonest is None else soonest + self._idle_seconds - now
                    self._wake.wait(wait)
                    continue
                self._idle = [s for s in self._idle if s not in expired]
            for started in expired:
                # a folder that cannot be emptied must not end the reaping
                with contextlib.suppress(OSError):
                    self._retire(started)
