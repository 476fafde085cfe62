"""The next request of a turn that looked around (``--trigger-within=turn``), laid out as the
pinned CLI lays out its follow-up: the conversation so far, the model's message echoed
unchanged (thinking with its signature, text, each tool call), then one user message holding
every call's result in the calls' order; the one prompt-cache mark moves to the last block.
The request's other parameters (system, tools, thinking, the listing) stay as they were, so a
captured CLI request goes on as the CLI's would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pytest_skilltrigger.backends.api.request import ApiRequest

CACHE_MARK = {"type": "ephemeral"}


def follow_up(
    request: ApiRequest, content: Sequence[dict[str, Any]], results: Sequence[dict[str, Any]]
) -> ApiRequest:
    """``request`` with the model's message and the calls' results after its messages."""
    messages = [_unmarked(m) for m in request.params["messages"]]
    answered = [dict(block) for block in results]
    if answered:
        answered[-1]["cache_control"] = dict(CACHE_MARK)
    messages += [
        {"role": "assistant", "content": [dict(block) for block in content]},
        {"role": "user", "content": answered},
    ]
    return replace(request, params={**request.params, "messages": messages})


def _unmarked(message: dict[str, Any]) -> dict[str, Any]:
    """A message without the prompt-cache marks on its blocks (only the last block of the
    last message keeps one)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    blocks = [
        {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block, dict)
        else block
        for block in content
    ]
    return {**message, "content": blocks}


def _without_mark(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    return {k: v for k, v in block.items() if k != "cache_control"}


def offered_tools(request: ApiRequest) -> frozenset[str]:
    """The tools the request offers the model, by name."""
    tools = request.params.get("tools") or []
    return frozenset(str(t.get("name")) for t in tools if isinstance(t, dict))


def request_size(request: ApiRequest) -> int:
    """The request's size in bytes, as sent (a follow-up's input estimate)."""
    return len(json.dumps(request.params, ensure_ascii=False).encode("utf-8"))
