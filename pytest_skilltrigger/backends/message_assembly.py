"""A streamed message put back together, block by block (``--trigger-within=turn``).

A run that looks around sends the model's message back with the tools' results, as Claude
Code does: every block in order and unchanged (thinking with its signature, text, each tool
call with its input assembled from its fragments). The first-choice rule reads only what it
needs of the stream; this reads all of it, and only in a turn.
"""

from __future__ import annotations

import json
from typing import Any


class MessageAssembly:
    """The blocks of one streamed message, fed its events one at a time."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._fragments: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.complete = False

    def reset(self) -> None:
        """Forget what was fed: a retried request's message starts afresh."""
        self._blocks.clear()
        self._fragments.clear()
        self.stop_reason = None
        self.complete = False

    def feed(self, event: str, data: dict[str, Any]) -> None:
        index = data.get("index")
        if event == "content_block_start" and isinstance(index, int):
            block = dict(data.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = dict(block.get("input") or {})
                self._fragments[index] = []
            self._blocks[index] = block
        elif event == "content_block_delta" and index in self._blocks:
            self._delta(self._blocks[index], int(index), data.get("delta") or {})
        elif event == "content_block_stop" and index in self._fragments:
            text = "".join(self._fragments.pop(int(index)))
            if text:
                parsed = json.loads(text)
                self._blocks[int(index)]["input"] = parsed if isinstance(parsed, dict) else {}
        elif event == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
        elif event == "message_stop":
            self.complete = True

    def _delta(self, block: dict[str, Any], index: int, delta: dict[str, Any]) -> None:
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
        elif kind == "thinking_delta":
            block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = str(delta.get("signature") or "")
        elif kind == "input_json_delta":
            self._fragments.setdefault(index, []).append(str(delta.get("partial_json") or ""))

    def content(self) -> list[dict[str, Any]]:
        """The message's blocks in order, as an assistant message sends them back."""
        return [self._blocks[i] for i in sorted(self._blocks)]

    def tool_calls(self) -> list[tuple[str, str, dict[str, Any]]]:
        """Each tool call of the message in order: its id, tool and input."""
        return [
            (str(b.get("id")), str(b.get("name")), dict(b.get("input") or {}))
            for b in self.content()
            if b.get("type") == "tool_use"
        ]
