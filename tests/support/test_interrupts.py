"""SIGTERM as Ctrl-C: inside ``sigterm_as_interrupt`` a SIGTERM raises KeyboardInterrupt, and
the handler before it is back afterwards (also when the block raised); off the main thread,
and with ``only_if_default`` when someone else handles SIGTERM, nothing changes."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt, trap_sigterm

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGTERM"), reason="no SIGTERM")


class Recorder:
    """A SIGTERM handler that records its calls (and so never ends the test process)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, signum: int, frame: object) -> None:
        self.calls += 1


@pytest.fixture
def previous() -> Iterator[Recorder]:
    """A known SIGTERM handler installed for the test; the original restored after it."""
    recorder = Recorder()
    original = signal.signal(signal.SIGTERM, recorder)
    try:
        yield recorder
    finally:
        signal.signal(signal.SIGTERM, original)


def send_sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    # the handler runs in the main thread between bytecodes; give it the chance here
    for _ in range(1000):
        pass


def test_sigterm_is_a_keyboard_interrupt_inside_the_block(previous: Recorder) -> None:
    with pytest.raises(KeyboardInterrupt), sigterm_as_interrupt():
        send_sigterm()
    assert previous.calls == 0
    assert signal.getsignal(signal.SIGTERM) is previous


def test_the_previous_handler_is_back_after_the_block(previous: Recorder) -> None:
    with sigterm_as_interrupt():
        assert signal.getsignal(signal.SIGTERM) is not previous
    assert signal.getsignal(signal.SIGTERM) is previous
    send_sigterm()  # no KeyboardInterrupt now: the previous handler sees it
    assert previous.calls == 1


def test_the_previous_handler_is_back_when_the_block_raises(previous: Recorder) -> None:
    with pytest.raises(ValueError), sigterm_as_interrupt():
        raise ValueError("boom")
    assert signal.getsignal(signal.SIGTERM) is previous


def test_only_if_default_leaves_someone_elses_handler(previous: Recorder) -> None:
    restore = trap_sigterm(only_if_default=True)
    assert signal.getsignal(signal.SIGTERM) is previous
    restore()
    assert signal.getsignal(signal.SIGTERM) is previous


def test_only_if_default_traps_the_default_action(previous: Recorder) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    restore = trap_sigterm(only_if_default=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            send_sigterm()
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_off_the_main_thread_nothing_changes(previous: Recorder) -> None:
    seen: list[object] = []

    def in_thread() -> None:
        restore = trap_sigterm()
        seen.append(signal.getsignal(signal.SIGTERM))
        restore()
        with sigterm_as_interrupt():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [previous, previous]
    assert signal.getsignal(signal.SIGTERM) is previous


def test_restoring_off_the_main_thread_leaves_the_trap(previous: Recorder) -> None:
    restore = trap_sigterm()
    try:
        thread = threading.Thread(target=restore)
        thread.start()
        thread.join()
        assert signal.getsignal(signal.SIGTERM) is not previous
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is previous
