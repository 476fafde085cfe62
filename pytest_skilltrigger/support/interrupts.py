"""SIGTERM treated like Ctrl-C while the plugin holds something that must be cleaned up.

SIGTERM's default action (a CI job being cancelled) ends the process without running
``finally`` blocks or atexit handlers: improvement rounds would stop mid-write and Claude Code
processes (in their own sessions) would be orphaned with their workspaces. Raising
KeyboardInterrupt instead lets the normal interrupt path clean up.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def trap_sigterm(only_if_default: bool = False) -> Callable[[], None]:
    """Make SIGTERM raise KeyboardInterrupt; returns the function that undoes it.

    Signals can only be handled from the main thread; elsewhere (and, with
    ``only_if_default``, when someone else already handles SIGTERM) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    if only_if_default and signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _interrupt)

    def restore() -> None:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)

    return restore


@contextlib.contextmanager
def sigterm_as_interrupt(only_if_default: bool = False) -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block (see :func:`trap_sigterm`)."""
    restore = trap_sigterm(only_if_default)
    try:
        yield
    finally:
        restore()
