"""The result store: every run recorded in SQLite, so unchanged checks cost nothing.

Rows are keyed by a hash of the full request context (listing, competitors, prompt, model,
backend) and the query. Rerunning an unchanged description reuses its stored runs instead of
paying for them again. The database runs in WAL mode with a busy timeout so readers in xdist
workers and the writing controller never block each other for long, and every write is one
transaction, so an interrupted run never leaves it corrupt. Errors are never stored: they are
not results.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable

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
    invoked_as TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_context ON runs (context_key, query, id);
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
}


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

    def _add_missing_columns(self) -> None:
        """Bring a store an earlier version made up to this schema (its old rows take each
        new column's default: no 1-hour cache writes, as they were priced then, and no name
        the model wrote apart from the skill's own). Another process may add a column at the
        same moment; that is not an error."""
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
        """The newest ``limit`` stored runs for this context and query (``refresh`` replaces
        what later runs read), returned oldest first."""
        rows = (
            self._conn()
            .execute(
                "SELECT status, chosen, invoked_as, input_tokens, output_tokens,"
                " cache_creation_input_tokens, cache_read_input_tokens,"
                " cache_creation_1h_input_tokens FROM runs"
                " WHERE context_key = ? AND query = ? ORDER BY id DESC LIMIT ?",
                (context_key, query, limit),
            )
            .fetchall()
        )
        return [
            RunOutcome(
                status, chosen=chosen, invoked_as=invoked_as, usage=Usage(*tokens), from_store=True
            )
            for status, chosen, invoked_as, *tokens in reversed(rows)
        ]

    def record(
        self,
        backend: str,
        model: str,
        context_key: str,
        query: str,
        outcomes: Iterable[RunOutcome],
    ) -> int:
        """Store the fresh, successful runs of one query in a single transaction."""
        rows = [
            (
                time.time(),
                backend,
                model,
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
            )
            for o in outcomes
            if o.status != "error" and not o.from_store
        ]
        if not rows:
            return 0
        conn = self._conn()
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT INTO runs (created, backend, model, context_key, query, status,"
                    " chosen, input_tokens, output_tokens, cache_creation_input_tokens,"
                    " cache_read_input_tokens, cache_creation_1h_input_tokens, invoked_as)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        return len(rows)

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


def prepare_store(path: str) -> None:
    """Create (or check) the store file now, so that a path that cannot hold it is a
    one-line input error before anything runs, and other processes find it ready to read."""
    try:
        ResultStore(path).close()
    except (OSError, sqlite3.Error) as exc:
        raise InputError(path, f"cannot use as the result store: {exc}") from None
