"""The first-choice rule both backends share: what the model chose first in one streamed
message, fed one decoded event at a time.

The decision is the first ``tool_use`` block, wherever it comes (after thinking, after a text
preamble): ``Skill`` with its ``skill`` input assembled from fragments of any size, or another
tool named in ``content_block_start``. A message that ends without a tool is "text". An
``error`` event is raised so the caller can retry. The API backend feeds it raw SSE events
(:mod:`pytest_skilltrigger.backends.api.sse`); the Claude Code backend the same events wrapped
in JSON lines (:mod:`pytest_skilltrigger.backends.claude_code.stream`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from pytest_skilltrigger.model.outcome import Usage


class StreamError(Exception):
    """An ``error`` event inside a started stream, or a stream that ended early."""

    def __init__(self, message: str, *, retryable: bool = True, error_type: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.error_type = error_type


RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}

# Events whose data FirstChoice reads; deltas only while a tool's input is being assembled.
DECODED_EVENTS = frozenset(
    {
        "content_block_start",
        "content_block_stop",
        "message_start",
        "message_delta",
        "message_stop",
        "error",
    }
)


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
        self._blocks = 0  # answer blocks started: a message with none decided nothing

    def wants(self, event: str) -> bool:
        """Whether :meth:`feed` needs this event's data (lets callers skip decoding it)."""
        if event == "content_block_delta":
            return self._block is not None
        return event in DECODED_EVENTS

    def feed(self, event: str, data: dict[str, Any]) -> Decision | None:
        """Take one event; return the decision once made, raise :class:`StreamError`."""
        handle = self._HANDLERS.get(event)
        return handle(self, data) if handle is not None else None

    def _delta(self, data: dict[str, Any]) -> Decision | None:
        if self._block is not None and data.get("index") == self._block:
            self._fragments.append(data.get("delta", {}).get("partial_json", ""))
        return None

    def _block_start(self, data: dict[str, Any]) -> Decision | None:
        """A tool's block decides at once, but for a tool whose input is inspected, which is
        assembled until its block ends (unless it came whole and names no skill)."""
        block = data.get("content_block", {})
        if block.get("type") not in THINKING:
            self._blocks += 1  # an answer: text or a tool (thinking alone is none)
        if block.get("type") != "tool_use" or self._block is not None:
            return None
        name = str(block.get("name"))
        if name not in self.inspect:
            return Decision(f"tool:{name}", self.usage)
        self._block, self._tool = data.get("index"), name
        initial = block.get("input") or {}
        if isinstance(initial, dict) and initial:
            decision = self._decide(initial)
            if decision.chosen != "tool:Skill":
                return decision
        return None

    def _block_stop(self, data: dict[str, Any]) -> Decision | None:
        if self._block is None or data.get("index") != self._block:
            return None
        try:
            parsed = json.loads("".join(self._fragments) or "{}")
        except ValueError:
            parsed = {}
        return self._decide(parsed if isinstance(parsed, dict) else {})

    def _message_start(self, data: dict[str, Any]) -> Decision | None:
        self.usage = Usage.from_dict(data.get("message", {}).get("usage"))
        return None

    def _message_delta(self, data: dict[str, Any]) -> Decision | None:
        out = data.get("usage", {}).get("output_tokens")
        if out is not None:
            self.usage = replace(self.usage, output_tokens=int(out))
        return None

    def _message_stop(self, data: dict[str, Any]) -> Decision | None:
        if not self._blocks:  # an empty answer is no answer: never read as "did not trigger"
            raise empty_answer()
        return Decision("text", self.usage)

    def _error(self, data: dict[str, Any]) -> Decision | None:
        err = data.get("error", {})
        etype = str(err.get("type", "error"))
        raise StreamError(
            f"{etype}: {err.get('message', 'error event in stream')}",
            retryable=etype in RETRYABLE_STREAM_ERRORS,
            error_type=etype,
        )

    _HANDLERS: ClassVar[dict[str, Callable[[FirstChoice, dict[str, Any]], Decision | None]]] = {
        "content_block_delta": _delta,
        "content_block_start": _block_start,
        "content_block_stop": _block_stop,
        "message_start": _message_start,
        "message_delta": _message_delta,
        "message_stop": _message_stop,
        "error": _error,
    }

    def _decide(self, tool_input: dict[str, Any]) -> Decision:
        return Decision(choice_of(self._tool, tool_input), self.usage, tool_input)


def choice_of(tool: str, tool_input: dict[str, Any]) -> str:
    """What a tool call means: ``skill:<name>`` for a Skill call naming one, else
    ``tool:<Name>``."""
    if tool == "Skill" and tool_input.get("skill"):
        return f"skill:{tool_input['skill']}"
    return f"tool:{tool}"


# blocks that are not an answer: a message of these alone decided nothing
THINKING = ("thinking", "redacted_thinking")


def empty_answer() -> StreamError:
    """The error of an answer with no content block: nothing was decided (a retry may)."""
    return StreamError(
        "the answer held no text and no tool call: nothing was decided",
        retryable=True,
        error_type="empty_response",
    )


def decide_message(
    content: Sequence[dict[str, Any]], stop_reason: str | None, usage: Usage
) -> Decision | None:
    """The same rule read from a whole message (a batch answer, which is not streamed): the
    first ``tool_use`` block decides; a message without one is "text". None when the answer
    was cut at ``max_tokens`` before a tool call was complete: it might still have called
    one, so it decides nothing. An answer with no answer block (thinking alone is none) is an error
    (:func:`empty_answer`), as in a stream: never "did not trigger"."""
    capped = stop_reason == "max_tokens"
    answered = any(block.get("type") not in THINKING for block in content)
    if not answered and not capped:  # (cut at the cap before any answer: undecided)
        raise empty_answer()
    for block in content:
        if block.get("type") != "tool_use":
            continue
        name = str(block.get("name"))
        given = block.get("input")
        tool_input: dict[str, Any] = given if isinstance(given, dict) else {}
        if name == "Skill" and not tool_input.get("skill") and capped:
            return None  # cut inside the call: which skill is unknown
        return Decision(choice_of(name, tool_input), usage, tool_input)
    return None if capped else Decision("text", usage)
