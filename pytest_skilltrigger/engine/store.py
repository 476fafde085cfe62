"""The result store: every run recorded in SQLite, so unchanged checks cost nothing.

Rows are keyed by a hash of the full request context (listing, competitors, prompt, model,
backend) and the query. Rerunning an unchanged description reuses its stored runs instead of
paying for them again. Several samplings may read the runs of one request (two skills of a
listing whose sets share a query), and each may add runs, in whatever order processes finish:
so the store also keeps which runs each sampling's verdict used (``samplings``), and a rerun
starts from exactly those. A verdict is then a function of stored runs that never change,
and a rerun makes no call and flips nothing. The database runs in WAL mode with a busy
timeout so readers in xdist workers and the writing controller never block each other for
long, and every write is one transaction, so an interrupted run never leaves it corrupt.
Errors are never stored: they are not results.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.redact import redact

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created REAL NOT NULL,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    context_key TEXT NOT NULL,
    query TEXT NOT NULL,
    status TEXT NOT NULL,
    chosen TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_input_tokens INTEGER NOT NULL DEFAULT 0,
    cache_creation_1h_input_tokens INTEGER NOT NULL DEFAULT 0,
    invoked_as TEXT,
    run_id TEXT,
    path TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_context ON runs (context_key, query, id);
CREATE TABLE IF NOT EXISTS samplings (
    context_key TEXT NOT NULL,
    query TEXT NOT NULL,
    sampling TEXT NOT NULL,
    created REAL NOT NULL,
    runs TEXT NOT NULL,
    PRIMARY KEY (context_key, query, sampling)
);
CREATE TABLE IF NOT EXISTS captures (
    key TEXT PRIMARY KEY,
    created REAL NOT NULL,
    request TEXT NOT NULL
);
"""

# columns later versions added to ``runs``, with their definitions (older stores get them)
ADDED_COLUMNS = {
    "cache_creation_1h_input_tokens": "INTEGER NOT NULL DEFAULT 0",
    "invoked_as": "TEXT",
    "run_id": "TEXT",
    "path": "TEXT",  # the read-only calls before the choice (--trigger-within=turn), JSON
}
# after the columns: each run's identity, unique; an older store's runs are named by their row
RUN_IDS = """
UPDATE runs SET run_id = 'row' || id WHERE run_id IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS runs_by_run_id ON runs (run_id);
"""
COLUMNS = (
    "status, chosen, invoked_as, run_id, path, input_tokens, output_tokens,"
    " cache_creation_input_tokens, cache_read_input_tokens, cache_creation_1h_input_tokens"
)


class ResultStore:
    """A SQLite file of runs. Thread-safe; one connection per thread."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._conn().executescript(SCHEMA)
        self._add_missing_columns()
        self._conn().executescript(RUN_IDS)

    def _add_missing_columns(self) -> None:
        """Bring a store an earlier version made up to this schema (its old rows take each
        new column's default: no 1-hour cache writes, as they were priced then, no name the
        model wrote apart from the skill's own, and an identity made of the row's). Another
        process may add a column at the same moment; that is not an error."""
        conn = self._conn()
        have = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        for column, definition in ADDED_COLUMNS.items():
            if column in have:
                continue
            try:
                conn.execute(f"ALTER TABLE runs ADD COLUMN {column} {definition}")
            except sqlite3.OperationalError as exc:
                if "duplicate column" not in str(exc):
                    raise

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    def lookup(self, context_key: str, query: str, limit: int) -> list[RunOutcome]:
        """The oldest ``limit`` stored runs of this request, oldest first: what a sampling
        with no runs of its own starts from. Later runs only ever go after these, so the
        runs a verdict read stay the first ones."""
        rows = (
            self._conn()
            .execute(
                f"SELECT {COLUMNS} FROM runs WHERE context_key = ? AND query = ?"
                " ORDER BY id LIMIT ?",
                (context_key, query, limit),
            )
            .fetchall()
        )
        return [_outcome(row) for row in rows]

    def used(self, context_key: str, query: str, sampling: str) -> list[RunOutcome] | None:
        """The runs this sampling's verdict used last time, in its order; None when it has
        none kept (or one of them is missing: a session stopped before storing it)."""
        conn = self._conn()
        row = conn.execute(
            "SELECT runs FROM samplings WHERE context_key = ? AND query = ? AND sampling = ?",
            (context_key, query, sampling),
        ).fetchone()
        if row is None:
            return None
        ids = json.loads(row[0])
        found = {outcome.run_id: outcome for outcome in map(_outcome, self._rows(conn, ids))}
        if len(found) != len(set(ids)):
            return None
        return [found[run_id] for run_id in ids]

    @staticmethod
    def _rows(conn: sqlite3.Connection, ids: list[str]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(ids), 500):  # within SQLite's limit of bound values
            part = ids[start : start + 500]
            marks = ", ".join("?" * len(part))
            rows += conn.execute(
                f"SELECT {COLUMNS} FROM runs WHERE run_id IN ({marks})", part
            ).fetchall()
        return rows

    def record(
        self,
        origin: tuple[str, str],
        context_key: str,
        query: str,
        outcomes: Sequence[RunOutcome],
        sampling: str | None = None,
    ) -> int:
        """Store the runs of one query not stored yet (errors never: they are not results),
        and with ``sampling``, that these are the runs its verdict used; one transaction,
        and none when nothing is new. ``origin`` is the backend and model that ran them.
        Returns how many runs were added."""
        runs = [o for o in outcomes if o.status != "error"]
        conn = self._conn()
        have = {
            outcome.run_id for outcome in map(_outcome, self._rows(conn, [o.run_id for o in runs]))
        }
        new = [o for o in runs if o.run_id not in have]
        used = json.dumps([o.run_id for o in runs]) if sampling is not None else None
        if used is not None and not new:
            kept = conn.execute(
                "SELECT runs FROM samplings WHERE context_key = ? AND query = ? AND sampling = ?",
                (context_key, query, sampling),
            ).fetchone()
            if kept is not None and kept[0] == used:
                used = None
        if not new and used is None:
            return 0
        now = time.time()
        backend, model = origin
        rows = [
            (
                now,
                backend,
                o.model or model,
                context_key,
                query,
                o.status,
                redact(o.chosen) if o.chosen else None,
                o.usage.input_tokens,
                o.usage.output_tokens,
                o.usage.cache_creation_input_tokens,
                o.usage.cache_read_input_tokens,
                o.usage.cache_creation_1h_input_tokens,
                redact(o.invoked_as) if o.invoked_as else None,
                o.run_id,
                json.dumps([redact(step) for step in o.path]) if o.path else None,
            )
            for o in new
        ]
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR IGNORE INTO runs (created, backend, model, context_key, query,"
                    " status, chosen, input_tokens, output_tokens, cache_creation_input_tokens,"
                    " cache_read_input_tokens, cache_creation_1h_input_tokens, invoked_as, run_id,"
                    " path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                if used is not None:
                    conn.execute(
                        "INSERT OR REPLACE INTO samplings (context_key, query, sampling, created,"
                        " runs) VALUES (?, ?, ?, ?, ?)",
                        (context_key, query, sampling, now, used),
                    )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return len(rows)

    def forget(self, context_key: str, query: str) -> int:
        """Drop every run of one request, and which runs its samplings used: a result that
        must be asked again (a failed control) is never replayed. Returns the runs dropped."""
        conn = self._conn()
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                dropped = conn.execute(
                    "DELETE FROM runs WHERE context_key = ? AND query = ?", (context_key, query)
                ).rowcount
                conn.execute(
                    "DELETE FROM samplings WHERE context_key = ? AND query = ?",
                    (context_key, query),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return int(dropped)

    def load_capture(self, key: str) -> str | None:
        """A captured CLI request (JSON text) stored under ``key``, or None."""
        row = self._conn().execute("SELECT request FROM captures WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def save_capture(self, key: str, request: str) -> None:
        """Keep a captured CLI request, so a later session starts no CLI for it."""
        conn = self._conn()  # first: opening a connection takes the lock too
        with self._lock:
            conn.execute(
                "INSERT OR REPLACE INTO captures (key, created, request) VALUES (?, ?, ?)",
                (key, time.time(), request),
            )

    def count(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def release(self) -> None:
        """Close the calling thread's connection, if it has one: a short-lived thread (a
        model's batches) must not leave one open for the rest of the session."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            return
        self._local.conn = None
        with self._lock:
            self._connections = [c for c in self._connections if c is not conn]
        conn.close()

    @property
    def open_connections(self) -> int:
        """How many threads' connections are open (each thread opens its own on first use)."""
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        """Close every thread's connection (not only the caller's), releasing their files."""
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
        self._local = threading.local()


class StoredCaptures:
    """The Claude Code CLI's captured requests, kept in the store between sessions; written
    only by a process that writes the store (xdist workers read what the controller wrote)."""

    def __init__(self, store: ResultStore, writable: bool) -> None:
        self.store = store
        self.writable = writable

    def load_capture(self, key: str) -> str | None:
        return self.store.load_capture(key)

    def save_capture(self, key: str, request: str) -> None:
        if self.writable:
            self.store.save_capture(key, request)


def _outcome(row: tuple[Any, ...]) -> RunOutcome:
    status, chosen, invoked_as, run_id, path, *tokens = row
    return RunOutcome(
        status,
        chosen=chosen,
        invoked_as=invoked_as,
        usage=Usage(*tokens),
        from_store=True,
        run_id=run_id,
        path=tuple(json.loads(path)) if path else (),
    )


def prepare_store(path: str) -> None:
    """Create (or check) the store file now, so that a path that cannot hold it is a
    one-line input error before anything runs, and other processes find it ready to read."""
    try:
        ResultStore(path).close()
    except (OSError, sqlite3.Error) as exc:
        raise InputError(path, f"cannot use as the result store: {exc}") from None
