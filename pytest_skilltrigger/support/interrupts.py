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
from typing import Any


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


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends, then act as they would have.

    Why: a KeyboardInterrupt can land between any two bytecodes, also between creating a
    temporary file and the ``try`` that removes it, or inside that clean-up itself; no
    ``try`` can close such a window. Holding the signal for a block that takes milliseconds
    (an atomic write) closes it. Signals only reach Python code in the main thread, so
    elsewhere nothing needs holding.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(signum)
        if handler is not signal.SIG_IGN and handler is not None:
            previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(held):
            handler = previous[number]
            if callable(handler):
                handler(number, None)  # Python's own raises KeyboardInterrupt
            else:
                signal.raise_signal(number)  # the default action, now that it is back
