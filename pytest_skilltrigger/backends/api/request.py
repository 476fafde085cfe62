"""What a trigger run sends to the Messages API, built without importing the SDK.

The request is shaped like Claude Code's: a short agent system prompt, the ordinary tools
(Bash, Read, Edit, Write), a ``Skill`` tool, and the skill listing as a reminder block before
the user's query. The stable prefix (tools, system, listing) is marked for prompt caching.
Kept apart from the backend so that computing a store key (a hash of this request) never pays
for importing the SDK: a run served entirely from the store makes no call and no import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.listing_budget import fit_of

SYSTEM_PROMPT = (
    "You are an agentic coding assistant working in the user's terminal and project folder. "
    "You help with software engineering and everyday computer tasks: reading and changing "
    "files, running commands, explaining code, and producing documents and data. Use the "
    "tools you are given to act rather than describing what you would do. Be concise.\n\n"
    "Skills are packaged instructions and resources for particular kinds of task. When a "
    "listed skill covers the user's request, call the Skill tool with its name before doing "
    "anything else, because the skill holds knowledge you do not have yet. Do not call it "
    "for skills that are not listed, and do not call it when no listed skill fits."
)

SKILL_TOOL: dict[str, Any] = {
    "name": "Skill",
    "description": (
        "Load a skill: a set of instructions, scripts and references packaged for one kind of "
        "task. Call this first whenever one of the skills listed in the conversation matches "
        "what the user is asking for. Only names from that listing are valid."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string", "description": "The exact name of a listed skill."},
            "args": {"type": "string", "description": "Optional arguments for the skill."},
        },
        "required": ["skill"],
    },
}

ORDINARY_TOOLS: list[dict[str, Any]] = [
    {
        "name": "Bash",
        "description": "Run a shell command in the project folder and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "Read",
        "description": "Read a file from the local file system.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
    {
        "name": "Edit",
        "description": "Replace an exact string in a file with another string.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "old_string", "new_string"],
        },
    },
    {
        "name": "Write",
        "description": "Write a whole file, creating it or replacing its content.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["file_path", "content"],
        },
    },
]

LISTING_HEADER = "The following skills are available through the Skill tool:"


def listing_text(context: TriggerContext, model: str | None = None) -> str:
    """The listing block: a header line, then ``- name: description`` per skill, or ``- name``
    for the skills ``model``'s listing budget shows as bare names, as Claude Code does."""
    fit = fit_of(context, model)
    lines = [fit.line(s) for s in context.listing()]
    return (
        "<system-reminder>\n" + LISTING_HEADER + "\n\n" + "\n".join(lines) + "\n</system-reminder>"
    )


def build_request(context: TriggerContext, query: str, model: str) -> dict[str, Any]:
    """The keyword arguments of one ``messages.create`` call (without ``stream``)."""
    tools = [*ORDINARY_TOOLS, {**SKILL_TOOL, "cache_control": {"type": "ephemeral"}}]
    return {
        "model": model,
        "max_tokens": 4096,
        "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
        "tools": tools,
        "tool_choice": {"type": "auto"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": listing_text(context, model),
                        "cache_control": {"type": "ephemeral"},
                    },
                    {"type": "text", "text": query},
                ],
            }
        ],
    }


#: stands for the query in a request template until a query takes its place
MARKER = "SKILLTRIGGER-QUERY-5f0c1d7e"


@dataclass(frozen=True)
class ApiRequest:
    """One request to the Messages API: its parameters, the headers it needs beyond the
    client's own, and whether it goes to the beta endpoint (a captured CLI request does)."""

    params: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    beta: bool = False


class RequestTemplate:
    """A context's request with :data:`MARKER` in the text that holds the query.

    Every run of a context sends the same request but for the query, so the way to the
    marker is found once and :meth:`for_query` copies only the containers on that way: a
    request of tens of kilobytes is not copied or rebuilt per run.
    """

    def __init__(
        self, params: dict[str, Any], headers: Mapping[str, str] | None = None, beta: bool = False
    ) -> None:
        self.params = params
        self.headers = dict(headers or {})
        self.beta = beta
        self.path = _path_to_marker(params)
        if self.path is None:
            raise ValueError("the request does not hold the query marker exactly once")
        self.size = len(json.dumps(params, ensure_ascii=False).encode("utf-8")) - len(MARKER)

    def for_query(self, query: str) -> ApiRequest:
        """The request of ``query``."""
        assert self.path is not None  # checked when made
        params = _replaced(self.params, self.path, query)
        return ApiRequest(params, self.headers, self.beta)

    def size_with(self, query: str) -> int:
        """The request's size in bytes, as sent, without building it (the estimates)."""
        return self.size + len(json.dumps(query, ensure_ascii=False).encode("utf-8")) - 2


def _path_to_marker(value: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The keys and indices that lead to the one string holding the marker, or None when
    no string or several do."""
    found: list[tuple[str | int, ...]] = []
    _find_marker(value, path, found)
    return found[0] if len(found) == 1 and _marker_count(value) == 1 else None


def _find_marker(
    value: Any, path: tuple[str | int, ...], found: list[tuple[str | int, ...]]
) -> None:
    if isinstance(value, str):
        if MARKER in value:
            found.append(path)
    elif isinstance(value, dict):
        for key, item in value.items():
            _find_marker(item, (*path, key), found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find_marker(item, (*path, index), found)


def _marker_count(value: Any) -> int:
    return json.dumps(value, ensure_ascii=False).count(MARKER)


def _replaced(value: Any, path: tuple[str | int, ...], query: str) -> Any:
    """``value`` with the marker at ``path`` replaced by ``query``; what is off the way is
    shared, not copied."""
    if not path:
        return str(value).replace(MARKER, query)
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replaced(value[head], rest, query)}
    copied = list(value)
    copied[int(head)] = _replaced(value[int(head)], rest, query)
    return copied


@lru_cache(maxsize=256)
def builtin_template(context: TriggerContext, model: str) -> RequestTemplate:
    """The builtin request of a context, streamed, as a template (contexts are frozen
    dataclasses, so they can key the cache)."""
    return RequestTemplate({**build_request(context, MARKER, model), "stream": True})
