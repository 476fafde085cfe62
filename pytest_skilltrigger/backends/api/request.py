"""What a trigger run sends to the Messages API, built without importing the SDK.

The request is shaped like Claude Code's: a short agent system prompt, the ordinary tools
(Bash, Read, Edit, Write), a ``Skill`` tool, and the skill listing as a reminder block before
the user's query. The stable prefix (tools, system, listing) is marked for prompt caching.
Kept apart from the backend so that computing a store key (a hash of this request) never pays
for importing the SDK: a run served entirely from the store makes no call and no import.
"""

from __future__ import annotations

import json
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


def request_body(context: TriggerContext, query: str, model: str) -> bytes:
    """The JSON body of one streamed trigger request, ready to send.

    Everything but the query is the same for every run of a context, so it is serialised once
    and the query's JSON string is spliced in: the same bytes ``json.dumps`` gives for
    :func:`build_request` plus ``"stream": true``, without re-encoding tools, system prompt and
    listing on every call.
    """
    head, tail = _body_frame(context, model)
    return head + json.dumps(query).encode("ascii") + tail


def body_length(context: TriggerContext, query: str, model: str) -> int:
    """The size of :func:`request_body` without building it (for the budget's estimate)."""
    head, tail = _body_frame(context, model)
    return len(head) + len(tail) + len(json.dumps(query))


_BODY_TAIL = '}]}], "stream": true}'


@lru_cache(maxsize=256)
def _body_frame(context: TriggerContext, model: str) -> tuple[bytes, bytes]:
    """The body before and after the query, which is the very last value of the request.

    Contexts are frozen dataclasses, so they can key the cache.
    """
    whole = json.dumps({**build_request(context, "", model), "stream": True})
    if not whole.endswith('""' + _BODY_TAIL):  # build_request changed shape: fail loudly
        raise AssertionError("the query must be the last value of the request body")
    return whole[: -len(_BODY_TAIL) - 2].encode("ascii"), _BODY_TAIL.encode("ascii")
