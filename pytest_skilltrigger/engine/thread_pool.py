"""A small pool of daemon threads for backend calls.

The standard ``ThreadPoolExecutor`` joins its threads when the interpreter exits, so an
interrupted session would wait for every in-flight HTTP call (and its retries) to finish.
Trigger runs are disposable once the user pressed Ctrl-C, so these threads are daemons: the
process can always exit at once, and ``shutdown(wait=False)`` drops queued work.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

_STOP = object()


class DaemonPool:
    """``submit(fn, *args)`` runs ``fn`` on one of ``size`` daemon threads, in FIFO order."""

    def __init__(self, size: int, name: str = "skilltrigger") -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(max(1, size))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._closed:
            raise RuntimeError("pool is shut down")
        self._queue.put((fn, args))

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is _STOP or self._closed:
                return
            fn, args = task
            fn(*args)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the threads; with ``wait`` let queued work finish first, else drop it."""
        if not wait:
            self._closed = True
        for _ in self._threads:
            self._queue.put(_STOP)
        if wait:
            for thread in self._threads:
                thread.join()
        self._closed = True
