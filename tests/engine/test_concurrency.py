"""The adjustable limit of runs in flight: it holds runs past the limit, lets them start as
it grows, and counts what a governor and the summary read (waiting, the most at once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_skilltrigger.engine.concurrency import Concurrency


@contextmanager
def holders(concurrency: Concurrency, count: int) -> Iterator[threading.Event]:
    """``count`` threads that each take a slot and hold it until the event is set."""
    release = threading.Event()

    def hold() -> None:
        with concurrency.slot():
            release.wait()

    threads = [threading.Thread(target=hold, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    try:
        yield release
    finally:
        release.set()
        for thread in threads:
            thread.join(5)


def settle(concurrency: Concurrency, in_flight: int, waiting: int) -> None:
    """Wait (a few seconds at most) until the counts are these."""
    deadline = time.monotonic() + 60  # a loaded machine's slow spell, not a timing
    while (concurrency.in_flight, concurrency.waiting) != (in_flight, waiting):
        assert time.monotonic() < deadline, (concurrency.in_flight, concurrency.waiting)
        time.sleep(0.005)


def test_runs_past_the_limit_wait_and_start_as_it_grows() -> None:
    concurrency = Concurrency(2, most=8)
    with holders(concurrency, 5):
        settle(concurrency, in_flight=2, waiting=3)
        concurrency.set_limit(4)
        settle(concurrency, in_flight=4, waiting=1)
        assert concurrency.peak == 4
    assert (concurrency.in_flight, concurrency.waiting, concurrency.peak) == (0, 0, 4)


def test_the_limit_stays_between_one_and_the_most() -> None:
    concurrency = Concurrency(3, most=6)
    concurrency.set_limit(50)
    assert concurrency.limit == 6
    concurrency.set_limit(0)
    assert concurrency.limit == 1
    assert Concurrency(9).most == 9  # without a most, the pool is sized by the limit


def test_a_lower_limit_starts_no_run_until_enough_have_ended() -> None:
    concurrency = Concurrency(3)
    release = threading.Event()
    started: list[int] = []

    def run(n: int) -> None:
        with concurrency.slot():
            started.append(n)
            release.wait()

    first = [threading.Thread(target=run, args=(n,), daemon=True) for n in range(3)]
    for thread in first:
        thread.start()
    settle(concurrency, in_flight=3, waiting=0)
    concurrency.set_limit(1)
    late = threading.Thread(target=run, args=(3,), daemon=True)
    late.start()
    settle(concurrency, in_flight=3, waiting=1)
    release.set()
    for thread in [*first, late]:
        thread.join(5)
    assert sorted(started) == [0, 1, 2, 3]
    assert concurrency.peak == 3  # the late run started alone


def test_the_average_counts_only_the_time_runs_were_in_flight() -> None:
    concurrency = Concurrency(2)
    assert concurrency.average_in_flight() == 0.0
    with holders(concurrency, 2):
        settle(concurrency, in_flight=2, waiting=0)
        time.sleep(0.05)
    time.sleep(0.05)  # idle time afterwards does not lower it
    assert 1.5 < concurrency.average_in_flight() <= 2.0
