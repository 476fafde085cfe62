"""The result store: what is kept, what a lookup returns, and what is never written."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.model.outcome import RunOutcome, Usage


def run(status: str, *, from_store: bool = False, chosen: str | None = None) -> RunOutcome:
    return RunOutcome(
        status,  # type: ignore[arg-type]
        chosen=chosen or ("skill:pdf" if status == "triggered" else "text"),
        usage=Usage(10, 2, 3, 4),
        error="boom" if status == "error" else None,
        from_store=from_store,
    )


def test_errors_and_reused_runs_are_never_stored(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "s.sqlite"))
    written = store.record(
        "anthropic",
        "m",
        "ctx",
        "q",
        [run("triggered"), run("error"), run("not_triggered", from_store=True)],
    )
    assert written == 1 and store.count() == 1
    assert store.record("anthropic", "m", "ctx", "q", [run("error")]) == 0
    store.close()


def test_lookup_returns_the_newest_runs_oldest_first_marked_as_stored(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "s.sqlite"))
    store.record("anthropic", "m", "ctx", "q", [run("triggered"), run("triggered")])
    store.record("anthropic", "m", "ctx", "q", [run("not_triggered")])
    found = store.lookup("ctx", "q", 2)
    assert [o.status for o in found] == ["triggered", "not_triggered"]
    assert all(o.from_store for o in found)
    assert found[0].usage == Usage(10, 2, 3, 4)
    assert store.lookup("other-context", "q", 5) == []
    assert store.lookup("ctx", "another query", 5) == []
    store.close()


def test_runs_survive_reopening_and_many_threads_write_safely(tmp_path: Path) -> None:
    path = str(tmp_path / "nested" / "s.sqlite")  # missing folders are made
    store = ResultStore(path)

    def write(n: int) -> None:
        for _ in range(20):
            store.record("anthropic", "m", "ctx", f"q{n}", [run("triggered")])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()
    again = ResultStore(path)
    assert again.count() == 80
    assert len(again.lookup("ctx", "q3", 100)) == 20
    again.close()


def test_what_the_model_chose_is_redacted_before_it_is_stored(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "s.sqlite"))
    secret = "sk-ant-api03-" + "x" * 40
    store.record("anthropic", "m", "ctx", "q", [run("not_triggered", chosen=f"tool:{secret}")])
    store.close()
    rows = sqlite3.connect(str(tmp_path / "s.sqlite")).execute("SELECT chosen FROM runs").fetchall()
    assert secret not in repr(rows)
