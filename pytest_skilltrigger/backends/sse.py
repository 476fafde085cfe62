"""Reading the Messages API stream just far enough to know what the model chose first.

Only the events that matter are JSON-decoded; thinking blocks, text deltas and pings are
skipped on their event name alone. The decision is the first ``tool_use`` block, wherever it
comes (after thinking, after a text preamble): ``Skill`` with its ``skill`` input assembled from
fragments of any size, or another tool named in ``content_block_start``. A message that ends
without a tool is "text". An ``error`` event is raised so the caller can retry.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from pytest_skilltrigger.outcome import Usage


class StreamError(Exception):
    """An ``error`` event inside a started stream, or a stream that ended early."""

    def __init__(self, message: str, *, retryable: bool = True, error_type: str = "") -> None:
        super().__init__(message)
        self.retryable = retryable
        self.error_type = error_type


RETRYABLE_STREAM_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


@dataclass
class Decision:
    """What the model chose first: ``skill:<name>``, ``tool:<Name>`` or ``text``."""

    chosen: str
    usage: Usage = field(default_factory=Usage)


def decide(lines: Iterable[str]) -> Decision:
    """Consume SSE lines until the first decision; raise :class:`StreamError` on failure."""
    event = ""
    usage = Usage()
    skill_block: int | None = None
    fragments: list[str] = []
    for line in lines:
        if not line:
            continue
        if line.startswith("event:"):
            event = line[6:].strip()
            continue
        if not line.startswith("data:"):
            continue
        if event == "content_block_delta":
            if skill_block is None:
                continue  # thinking, text or signature deltas: nothing to decide on
            data = json.loads(line[5:])
            if data.get("index") == skill_block:
                fragments.append(data.get("delta", {}).get("partial_json", ""))
        elif event == "content_block_start":
            data = json.loads(line[5:])
            block = data.get("content_block", {})
            if block.get("type") == "tool_use" and skill_block is None:
                if block.get("name") != "Skill":
                    return Decision(f"tool:{block.get('name')}", usage)
                skill_block = data.get("index")
                initial = block.get("input") or {}
                if isinstance(initial, dict) and initial.get("skill"):
                    return Decision(f"skill:{initial['skill']}", usage)
        elif event == "content_block_stop":
            if skill_block is not None and json.loads(line[5:]).get("index") == skill_block:
                raw = "".join(fragments) or "{}"
                try:
                    name = json.loads(raw).get("skill")
                except (ValueError, AttributeError):
                    name = None
                return Decision(f"skill:{name}" if name else "tool:Skill", usage)
        elif event == "message_start":
            usage = Usage.from_dict(json.loads(line[5:]).get("message", {}).get("usage"))
        elif event == "message_delta":
            out = json.loads(line[5:]).get("usage", {}).get("output_tokens")
            if out is not None:
                usage = Usage(
                    usage.input_tokens,
                    int(out),
                    usage.cache_creation_input_tokens,
                    usage.cache_read_input_tokens,
                )
        elif event == "message_stop":
            return Decision("text", usage)
        elif event == "error":
            err = json.loads(line[5:]).get("error", {})
            etype = str(err.get("type", "error"))
            raise StreamError(
                f"{etype}: {err.get('message', 'error event in stream')}",
                retryable=etype in RETRYABLE_STREAM_ERRORS,
                error_type=etype,
            )
    raise StreamError("stream ended before the model chose anything (connection cut)")
