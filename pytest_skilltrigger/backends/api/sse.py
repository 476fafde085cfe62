"""Reading the Messages API stream just far enough to know what the model chose first.

Only the events that matter are JSON-decoded; thinking blocks, text deltas and pings are
skipped on their event name alone. The decision is the first ``tool_use`` block, wherever it
comes (after thinking, after a text preamble): ``Skill`` with its ``skill`` input assembled from
fragments of any size, or another tool named in ``content_block_start``. A message that ends
without a tool is "text". An ``error`` event is raised so the caller can retry.

The per-event logic lives in :class:`FirstChoice` so the Claude Code backend, which receives
the same raw events wrapped in JSON lines, decides exactly the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.engine.outcome import Usage


class StreamError(Exception):
    """An ``error`` event inside a started stream, or a stream that ended early."""

    def __init__(self, message: str, *, retryable: bool = True, error_type: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.error_type = error_type


RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}

# Events whose data FirstChoice reads; deltas only while a tool's input is being assembled.
_DECODED_EVENTS = frozenset(
    {"content_block_start", "content_block_stop", "message_start", "message_delta",
     "message_stop", "error"}
)  # fmt: skip


@dataclass
class Decision:
    """What the model chose first: ``skill:<name>``, ``tool:<Name>`` or ``text``.

    ``tool_input`` is the assembled input of a tool the reader was asked to inspect (the
    Claude Code backend needs a ``Read``'s path to recognise a skill being loaded by hand).
    """

    chosen: str
    usage: Usage = field(default_factory=Usage)
    tool_input: dict[str, Any] | None = None


class FirstChoice:
    """The decision state of one streamed message, fed one decoded event at a time.

    ``inspect`` names the tools whose input must be assembled before deciding; every other
    tool decides on its ``content_block_start`` alone, which is as early as possible.
    """

    def __init__(self, inspect: frozenset[str] = frozenset({"Skill"})) -> None:
        self.inspect = inspect
        self.usage = Usage()
        self._block: int | None = None
        self._tool = ""
        self._fragments: list[str] = []

    def wants(self, event: str) -> bool:
        """Whether :meth:`feed` needs this event's data (lets callers skip decoding it)."""
        if event == "content_block_delta":
            return self._block is not None
        return event in _DECODED_EVENTS

    def feed(self, event: str, data: dict[str, Any]) -> Decision | None:
        """Take one event; return the decision once made, raise :class:`StreamError`."""
        if event == "content_block_delta":
            if self._block is not None and data.get("index") == self._block:
                self._fragments.append(data.get("delta", {}).get("partial_json", ""))
        elif event == "content_block_start":
            block = data.get("content_block", {})
            if block.get("type") == "tool_use" and self._block is None:
                name = str(block.get("name"))
                if name not in self.inspect:
                    return Decision(f"tool:{name}", self.usage)
                self._block, self._tool = data.get("index"), name
                initial = block.get("input") or {}
                if isinstance(initial, dict) and initial:
                    decision = self._decide(initial)
                    if decision.chosen != "tool:Skill":
                        return decision
        elif event == "content_block_stop":
            if self._block is not None and data.get("index") == self._block:
                try:
                    parsed = json.loads("".join(self._fragments) or "{}")
                except ValueError:
                    parsed = {}
                return self._decide(parsed if isinstance(parsed, dict) else {})
        elif event == "message_start":
            self.usage = Usage.from_dict(data.get("message", {}).get("usage"))
        elif event == "message_delta":
            out = data.get("usage", {}).get("output_tokens")
            if out is not None:
                self.usage = Usage(
                    self.usage.input_tokens,
                    int(out),
                    self.usage.cache_creation_input_tokens,
                    self.usage.cache_read_input_tokens,
                )
        elif event == "message_stop":
            return Decision("text", self.usage)
        elif event == "error":
            err = data.get("error", {})
            etype = str(err.get("type", "error"))
            raise StreamError(
                f"{etype}: {err.get('message', 'error event in stream')}",
                retryable=etype in RETRYABLE_STREAM_ERRORS,
                error_type=etype,
            )
        return None

    def _decide(self, tool_input: dict[str, Any]) -> Decision:
        return Decision(choice_of(self._tool, tool_input), self.usage, tool_input)


def choice_of(tool: str, tool_input: dict[str, Any]) -> str:
    """What a tool call means: ``skill:<name>`` for a Skill call naming one, else
    ``tool:<Name>``."""
    if tool == "Skill" and tool_input.get("skill"):
        return f"skill:{tool_input['skill']}"
    return f"tool:{tool}"


def decide(chunks: Iterable[bytes]) -> Decision:
    """Consume a raw event stream, in byte chunks as they arrive, until the first decision.

    Raises :class:`StreamError` on an ``error`` event or a stream that ends undecided. Work
    stays at byte level: an event is split off at its blank line, only its name is decoded,
    and its data (its ``data:`` lines joined) is JSON-decoded only when
    :meth:`FirstChoice.wants` it. Line ends may be
    ``\\n``, ``\\r\\n`` or ``\\r`` (a ``\\r\\n`` cut between two chunks included).
    """
    choice = FirstChoice()
    pending = b""
    for chunk in chunks:
        pending += chunk
        if b"\r" in pending:
            carry = pending.endswith(b"\r")  # its "\n" may start the next chunk
            body = pending[:-1] if carry else pending
            pending = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (
                b"\r" if carry else b""
            )
        if b"\n\n" not in pending:
            continue
        *events, pending = pending.split(b"\n\n")
        for event in events:
            decision = _feed_event(choice, event)
            if decision is not None:
                return decision
    # An event not closed by its blank line is incomplete (the connection was cut inside it):
    # the event-stream rules discard it.
    raise StreamError("stream ended before the model chose anything (connection cut)")


_EVENT_NAMES = {name.encode(): name for name in (*_DECODED_EVENTS, "content_block_delta", "ping")}


def _feed_event(choice: FirstChoice, event: bytes) -> Decision | None:
    """One event block (``event:`` and ``data:`` lines); comments and other fields are ignored."""
    if event.startswith(b"event:"):  # the usual shape: skip an unwanted event on its name alone
        end = event.find(b"\n")
        raw = event[6:end if end >= 0 else None].strip()
        if not choice.wants(_EVENT_NAMES.get(raw) or raw.decode("utf-8", "replace")):
            return None
    name = ""
    data: list[bytes] = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[5:])
        elif line.startswith(b"event:"):
            raw = line[6:].strip()
            name = _EVENT_NAMES.get(raw) or raw.decode("utf-8", "replace")
    if not data or (name and not choice.wants(name)):
        return None
    payload = json.loads(b"\n".join(data))
    if not isinstance(payload, dict):
        return None
    if not name:  # no event line: the data names its type
        name = str(payload.get("type", ""))
        if not choice.wants(name):
            return None
    return choice.feed(name, payload)
