"""Reading the Messages API stream just far enough to know what the model chose first.

Only the events that matter are JSON-decoded; thinking blocks, text deltas and pings are
skipped on their event name alone. The decision is the first ``tool_use`` block, wherever it
comes (after thinking, after a text preamble): ``Skill`` with its ``skill`` input assembled from
fragments of any size, or another tool named in ``content_block_start``. A message that ends
without a tool is "text". An ``error`` event is raised so the caller can retry.

The per-event logic is :class:`~pytest_skilltrigger.backends.first_choice.FirstChoice`, shared
with the Claude Code backend, which receives the same events wrapped in JSON lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pytest_skilltrigger.backends.first_choice import (
    DECODED_EVENTS,
    Decision,
    FirstChoice,
    StreamError,
)
from pytest_skilltrigger.backends.message_assembly import MessageAssembly
from pytest_skilltrigger.model.outcome import Usage


def decide(chunks: Iterable[bytes]) -> Decision:
    """Consume a raw event stream until the first decision (see :class:`EventReader`)."""
    return EventReader(chunks).decide()


class EventReader:
    """A raw event stream, in byte chunks as they arrive, read event by event.

    Work stays at byte level: an event is split off at its blank line, only its name is
    decoded, and its data (its ``data:`` lines joined) is JSON-decoded only when
    :meth:`FirstChoice.wants` it. Line ends may be ``\\n``, ``\\r\\n`` or ``\\r`` (a
    ``\\r\\n`` cut between two chunks included).
    """

    def __init__(self, chunks: Iterable[bytes], assembly: MessageAssembly | None = None) -> None:
        self.choice = FirstChoice()
        #: every block of the message, when the run needs it back (a turn): then every event
        #: is decoded
        self.assembly = assembly
        self._chunks = iter(chunks)
        self._events: list[bytes] = []
        self._pending = b""

    @property
    def usage(self) -> Usage:
        """The tokens the stream has reported so far (also when it failed after its start)."""
        return self.choice.usage

    def decide(self) -> Decision:
        """Read until the first decision. Raises :class:`StreamError` on an ``error`` event
        or a stream that ends undecided."""
        for event in self._read():
            decision = self._feed(event)
            if decision is not None:
                return decision
        # An event not closed by its blank line is incomplete (the connection was cut inside
        # it): the event-stream rules discard it.
        raise StreamError("stream ended before the model chose anything (connection cut)")

    def drain(self, limit: int) -> Usage:
        """Read the tail of a decided stream, at most ``limit`` more bytes, for the usage its
        ``message_delta`` reports (the output tokens, thinking included, are known only
        there); a read that fails leaves the usage as it was."""
        try:
            for event in self._read(limit):  # to the stream's end: the connection is reused
                if b"message_delta" in event:
                    _feed_event(self.choice, event)
        except Exception:  # the HTTP library's read errors; the decision stands
            pass
        return self.choice.usage

    def finish(self) -> None:
        """Read a decided stream to its end into the assembly (a turn sends the message
        back); an ``error`` event raises :class:`StreamError`, a cut stream too."""
        for event in self._read():
            self._feed(event)
        if self.assembly is not None and not self.assembly.complete:
            raise StreamError("stream ended before the message did (connection cut)")

    def _feed(self, event: bytes) -> Decision | None:
        if self.assembly is None:
            return _feed_event(self.choice, event)
        decoded = _decoded(event)
        if decoded is None:
            return None
        name, payload = decoded
        self.assembly.feed(name, payload)
        return self.choice.feed(name, payload) if self.choice.wants(name) else None

    def _read(self, limit: int | None = None) -> Iterator[bytes]:
        """Whole events, as the chunks complete them (at most ``limit`` more bytes read)."""
        seen = 0
        while True:
            while self._events:
                yield self._events.pop(0)
            if limit is not None and seen >= limit:
                return
            chunk = next(self._chunks, None)
            if chunk is None:
                return
            seen += len(chunk)
            pending = self._pending + chunk
            if b"\r" in pending:
                carry = pending.endswith(b"\r")  # its "\n" may start the next chunk
                body = pending[:-1] if carry else pending
                pending = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                pending += b"\r" if carry else b""
            if b"\n\n" in pending:
                *self._events, pending = pending.split(b"\n\n")
            self._pending = pending


_EVENT_NAMES = {name.encode(): name for name in (*DECODED_EVENTS, "content_block_delta", "ping")}


def _feed_event(choice: FirstChoice, event: bytes) -> Decision | None:
    """One event block (``event:`` and ``data:`` lines); comments and other fields are ignored."""
    if event.startswith(b"event:"):  # the usual shape: skip an unwanted event on its name alone
        end = event.find(b"\n")
        raw = event[6 : end if end >= 0 else None].strip()
        if not choice.wants(_EVENT_NAMES.get(raw) or raw.decode("utf-8", "replace")):
            return None
    name, data = _fields(event)
    if not data or (name and not choice.wants(name)):
        return None
    payload = _payload(data)
    if payload is None:
        return None
    if not name:  # no event line: the data names its type
        name = str(payload.get("type", ""))
        if not choice.wants(name):
            return None
    return choice.feed(name, payload)


def _decoded(event: bytes) -> tuple[str, dict[str, Any]] | None:
    """An event block's name and data, every one decoded (a turn's assembly reads all)."""
    name, data = _fields(event)
    payload = _payload(data) if data else None
    if payload is None:
        return None
    return name or str(payload.get("type", "")), payload


def _fields(event: bytes) -> tuple[str, list[bytes]]:
    """An event block's name (empty without an ``event:`` line) and its ``data:`` lines."""
    name = ""
    data: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[5:])
        elif line.startswith(b"event:"):
            raw = line[6:].strip()
            name = _EVENT_NAMES.get(raw) or raw.decode("utf-8", "replace")
    return name, data


def _payload(data: list[bytes]) -> dict[str, Any] | None:
    """The JSON object the data lines hold (None for any other JSON value)."""
    payload = json.loads(b"\n".join(data))
    return payload if isinstance(payload, dict) else None
