"""The idle CLI processes between runs: a run takes the warmest one of its context; a new
process of another context makes an idle one give way; one idle too long is stopped; a closed
pool keeps none. Plain objects stand in for the processes: the pool never touches them but
through ``retire``."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from pytest_skilltrigger.backends.claude_code.pool import IdlePool, Started


def started(name: str, key: str, queries: int = 1, alive: bool = True) -> Started:
    cli = SimpleNamespace(queries=queries, alive=lambda: alive)
    return Started(cast(Any, cli), Path(name), key)


def test_a_run_takes_the_most_recently_used_process_of_its_context() -> None:
    retired: list[Started] = []
    pool = IdlePool(retired.append, idle_seconds=60)
    a1, a2, b1 = started("a1", "A"), started("a2", "A"), started("b1", "B")
    for one in (a1, b1, a2):
        assert pool.give_back(one)
    assert pool.take("A") is a2 and pool.take("A") is a1 and pool.take("A") is None
    assert pool.take("C") is None and pool.idle() == 1 and not retired
    pool.close()


def test_a_new_process_makes_the_oldest_idle_one_of_another_context_give_way() -> None:
    retired: list[Started] = []
    pool = IdlePool(retired.append, idle_seconds=60)
    a1, b1, b2 = started("a1", "A"), started("b1", "B"), started("b2", "B")
    for one in (b1, a1, b2):
        pool.give_back(one)
    pool.make_room("A")
    assert retired == [b1]  # the least recently used of the others; A's own stays
    pool.make_room("B")
    assert retired == [b1, a1]
    pool.make_room("B")
    assert retired == [b1, a1] and pool.take("B") is b2
    pool.close()


def test_a_process_idle_too_long_is_stopped_and_a_closed_pool_keeps_none() -> None:
    retired: list[Started] = []
    done = threading.Event()

    def retire(one: Started) -> None:
        retired.append(one)
        done.set()

    pool = IdlePool(retire, idle_seconds=0.2)
    a1 = started("a1", "A")
    pool.give_back(a1)
    assert done.wait(10) and retired == [a1] and pool.idle() == 0
    b1 = started("b1", "B")
    pool.give_back(b1)
    assert pool.close() == [b1]
    assert not pool.give_back(started("c1", "C"))  # the caller stops it instead
    time.sleep(0.3)
    assert retired == [a1]  # what close() handed back is the caller's to stop


def test_a_process_that_answered_its_share_of_queries_is_not_kept() -> None:
    pool = IdlePool(lambda one: None, idle_seconds=60, most_queries=3)
    assert pool.give_back(started("a1", "A", queries=2))
    assert not pool.give_back(started("a2", "A", queries=3))  # the caller stops it
    assert pool.idle() == 1
    pool.close()


def test_a_process_that_died_while_idle_is_stopped_not_handed_out() -> None:
    retired: list[Started] = []
    pool = IdlePool(retired.append, idle_seconds=60)
    a1, a2 = started("a1", "A"), started("a2", "A", alive=False)
    pool.give_back(a1)
    pool.give_back(a2)
    assert pool.take("A") is a1 and retired == [a2]
    pool.close()
