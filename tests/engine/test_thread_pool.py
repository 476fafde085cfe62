"""The daemon thread pool behind every trigger run: first in, first out; an interrupted
session drops what is queued instead of waiting for it."""

from __future__ import annotations

import threading

import pytest

from pytest_skilltrigger.engine.thread_pool import DaemonPool


def test_one_thread_runs_tasks_in_order_and_threads_are_daemons() -> None:
    pool = DaemonPool(1, name="order")
    done: list[int] = []
    for n in range(20):
        pool.submit(done.append, n)
    pool.shutdown(wait=True)
    assert done == list(range(20))
    assert all(t.daemon for t in pool._threads)


def test_shutdown_without_waiting_drops_queued_work() -> None:
    pool = DaemonPool(1)
    release = threading.Event()
    ended = threading.Event()
    done: list[int] = []
    pool.submit(lambda: (release.wait(5), ended.set()))
    for n in range(10):
        pool.submit(done.append, n)
    pool.shutdown(wait=False)
    assert not ended.is_set()  # it did not wait for the running work (five seconds)
    release.set()
    ended.wait(5)
    assert done == []
    with pytest.raises(RuntimeError):
        pool.submit(done.append, 99)


def test_work_runs_concurrently_up_to_the_size() -> None:
    pool = DaemonPool(4)
    lock = threading.Lock()
    running = [0, 0]  # now, most at once
    gate = threading.Barrier(4, timeout=5)

    def task() -> None:
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        gate.wait()
        with lock:
            running[0] -= 1

    for _ in range(4):
        pool.submit(task)
    pool.shutdown(wait=True)
    assert running[1] == 4
