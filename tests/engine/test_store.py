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


def test_errors_are_never_stored_and_a_run_is_stored_once(tmp_path: Path) -> None:
    """A run is stored by whoever hands it in first (an xdist worker's result may carry runs
    another sampling of its process made); by its identity, never twice."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    known = run("not_triggered", from_store=True)
    written = store.record(("anthropic", "m"), "ctx", "q", [run("triggered"), run("error"), known])
    assert written == 2 and store.count() == 2
    assert store.record(("anthropic", "m"), "ctx", "q", [run("error"), known]) == 0
    assert store.count() == 2
    store.close()


def test_lookup_returns_the_oldest_runs_oldest_first_marked_as_stored(tmp_path: Path) -> None:
    """Later runs only go after the ones a verdict read: what a lookup gives never shifts."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    store.record(("anthropic", "m"), "ctx", "q", [run("triggered"), run("not_triggered")])
    store.record(("anthropic", "m"), "ctx", "q", [run("triggered")])
    found = store.lookup("ctx", "q", 2)
    assert [o.status for o in found] == ["triggered", "not_triggered"]
    assert all(o.from_store for o in found)
    assert found[0].usage == Usage(10, 2, 3, 4)
    assert store.lookup("other-context", "q", 5) == []
    assert store.lookup("ctx", "another query", 5) == []
    store.close()


def test_a_sampling_reads_back_exactly_the_runs_its_verdict_used(tmp_path: Path) -> None:
    """Two samplings of one request (two skills whose sets share a query) each add runs, in
    whatever order their processes finish: each reads back its own runs, in its order."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    shared = [run("triggered"), run("not_triggered")]
    mine = [*shared, run("triggered"), run("triggered")]
    theirs = [*shared, run("not_triggered")]
    store.record(("anthropic", "m"), "ctx", "q", theirs, "b")
    store.record(("anthropic", "m"), "ctx", "q", mine, "a")
    assert store.count() == 5
    assert [o.run_id for o in store.used("ctx", "q", "a") or []] == [o.run_id for o in mine]
    assert [o.run_id for o in store.used("ctx", "q", "b") or []] == [o.run_id for o in theirs]
    assert store.used("ctx", "q", "c") is None
    assert store.record(("anthropic", "m"), "ctx", "q", mine, "a") == 0  # nothing new
    store.close()


def test_a_sampling_whose_runs_are_not_all_stored_reads_none(tmp_path: Path) -> None:
    """A session stopped before another result stored the runs a verdict named: the
    sampling starts afresh from the store's oldest runs instead of from part of its own."""
    path = str(tmp_path / "s.sqlite")
    store = ResultStore(path)
    store.record(("anthropic", "m"), "ctx", "q", [run("triggered")], "a")
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM runs")
    assert store.used("ctx", "q", "a") is None
    store.close()


def test_runs_survive_reopening_and_many_threads_write_safely(tmp_path: Path) -> None:
    path = str(tmp_path / "nested" / "s.sqlite")  # missing folders are made
    store = ResultStore(path)

    def write(n: int) -> None:
        for _ in range(20):
            store.record(("anthropic", "m"), "ctx", f"q{n}", [run("triggered")])

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
    store.record(("anthropic", "m"), "ctx", "q", [run("not_triggered", chosen=f"tool:{secret}")])
    store.close()
    rows = sqlite3.connect(str(tmp_path / "s.sqlite")).execute("SELECT chosen FROM runs").fetchall()
    assert secret not in repr(rows)


def test_one_hour_cache_writes_are_kept_and_an_older_store_is_brought_up_to_date(
    tmp_path: Path,
) -> None:
    """A stored run shown again is priced as it was paid: its 1-hour cache writes are kept.
    A store an earlier version made (no such column) gains it, its old rows counting none."""
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL, "
        "backend TEXT NOT NULL, model TEXT NOT NULL, context_key TEXT NOT NULL, query TEXT NOT "
        "NULL, status TEXT NOT NULL, chosen TEXT, input_tokens INTEGER NOT NULL DEFAULT 0, "
        "output_tokens INTEGER NOT NULL DEFAULT 0, cache_creation_input_tokens INTEGER NOT NULL "
        "DEFAULT 0, cache_read_input_tokens INTEGER NOT NULL DEFAULT 0);"
        "INSERT INTO runs (created, backend, model, context_key, query, status, chosen, "
        "input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens) "
        "VALUES (0, 'anthropic', 'm', 'ctx', 'q', 'triggered', 'skill:pdf', 10, 2, 3, 4);"
    )
    old.close()
    store = ResultStore(str(path))
    again = ResultStore(str(path))  # a second process opening it after: nothing to add
    hour = RunOutcome("triggered", chosen="skill:pdf", usage=Usage(10, 2, 300, 4, 200))
    assert store.record(("anthropic", "m"), "ctx", "q", [hour]) == 1
    found = again.lookup("ctx", "q", 5)
    assert [o.usage for o in found] == [Usage(10, 2, 3, 4), Usage(10, 2, 300, 4, 200)]
    assert [o.invoked_as for o in found] == [None, None]  # and no other name the model wrote
    store.close()
    again.close()


def test_the_name_the_model_wrote_is_kept_with_its_run(tmp_path: Path) -> None:
    """A rerun from the store says which name the model used (a plugin skill called by its
    bare name), as the run that was made did."""
    store = ResultStore(str(tmp_path / "runs.sqlite"))
    bare = RunOutcome(
        "triggered", chosen="skill:acme:alpha", invoked_as="alpha", usage=Usage(10, 2)
    )
    listed = RunOutcome("triggered", chosen="skill:acme:alpha", usage=Usage(10, 2))
    assert store.record(("anthropic", "m"), "ctx", "q", [bare, listed]) == 2
    found = store.lookup("ctx", "q", 5)
    assert [(o.chosen, o.invoked_as) for o in found] == [
        ("skill:acme:alpha", "alpha"),
        ("skill:acme:alpha", None),
    ]
    assert all(o.from_store for o in found)
    store.close()


def test_a_short_lived_thread_releases_its_connection(tmp_path: Path) -> None:
    """A model's batches run in a thread of their own each time: its connection is closed
    when it ends, so a long session does not pile up open files."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    store.record(("anthropic", "m"), "ctx", "q0", [run("triggered")])  # this thread's own
    assert store.open_connections == 1

    def write(n: int) -> None:
        store.record(("anthropic", "m"), "ctx", f"q{n}", [run("triggered")])
        store.release()
        store.release()  # nothing left to close: no error

    for n in range(1, 21):
        thread = threading.Thread(target=write, args=(n,))
        thread.start()
        thread.join()
    assert store.open_connections == 1  # this thread's only
    assert store.count() == 21 and len(store.lookup("ctx", "q20", 5)) == 1
    store.close()


def test_a_capture_is_saved_from_a_thread_that_has_no_connection_yet(tmp_path: Path) -> None:
    """Saving opens the thread's connection before it takes the store's lock (opening one
    takes that lock too): it must not hang."""
    store = ResultStore(str(tmp_path / "s.sqlite"))
    thread = threading.Thread(target=store.save_capture, args=("key", '{"a": 1}'), daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert store.load_capture("key") == '{"a": 1}'
    store.close()
