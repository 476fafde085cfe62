"""What a trigger run sends to the Messages API, built without importing the SDK.

The request is shaped like Claude Code's: a short agent system prompt, the ordinary tools
(Bash, Read, Edit, Write), a ``Skill`` tool, and the skill listing where the pinned CLI puts it
for the model under test (:mod:`~pytest_skilltrigger.model.request_layouts`): a system-role
message after the user's, or one of the reminder blocks that open the user's message, with
that model's output and thinking settings. The sections around the listing are our own short
texts in the CLI's order.
Kept apart from the backend so that computing a store key (a hash of this request) never pays
for importing the SDK: a run served entirely from the store makes no call and no import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from pytest_skilltrigger.model import request_layouts as layouts
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.listing_budget import fit_of
from pytest_skilltrigger.model.request_layouts import RequestLayout, layout_for
from pytest_skilltrigger.skills.history import turns_of

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

# Our own short text for each section Claude Code puts around the listing (see
# :mod:`~pytest_skilltrigger.model.request_layouts`); only their order and place follow the
# CLI. None changes from run to run or day to day (no date, no path): the request, and so the
# store's keys and the prompt cache, stay the same.
SECTION_TEXTS = {
    layouts.ENVIRONMENT: (
        "# Environment\nThis session runs in the user's project folder on their own machine. "
        "Paths are relative to that folder, and shell commands run in it."
    ),
    layouts.DEFERRED_TOOLS: (
        "Tools for notebooks, web pages and web search exist but are not loaded in this session."
    ),
    layouts.AGENTS: (
        "Helpers a task can be handed to:\n"
        "- general-purpose: open-ended research and multi-step work.\n"
        "- explore: finding files and code in a large project.\n"
        "- plan: working out an approach before any code is changed.\n\n"
        "Independent subtasks can go to several helpers at once."
    ),
    layouts.BUDGET: "Most of this conversation's context window is still free.",
    layouts.GIT_STATUS: "The project folder is a git repository; its status is not shown here.",
    layouts.DATE: "No date is given for this session.",
    layouts.ATTRIBUTION: (
        "Commits and pull requests made from this session carry no line crediting an "
        "assistant unless the user asks for one."
    ),
}


def listing_lines(context: TriggerContext, model: str | None = None) -> list[str]:
    """The listing's lines: ``- name: description`` per skill, or ``- name`` for the skills
    ``model``'s listing budget shows as bare names, as Claude Code does."""
    fit = fit_of(context, model)
    return [fit.line(s) for s in context.listing()]


def listing_section(context: TriggerContext, model: str | None = None) -> str:
    """The skills section: the header line, an empty line, then the listing's lines."""
    return LISTING_HEADER + "\n\n" + "\n".join(listing_lines(context, model))


def reminder(text: str) -> str:
    """A text as one ``<system-reminder>`` block, the way the CLI wraps its reminders."""
    return "<system-reminder>\n" + text + "\n</system-reminder>"


def listing_text(context: TriggerContext, model: str | None = None) -> str:
    """The skills section as a reminder block (its form in the user's message)."""
    return reminder(listing_section(context, model))


def section_text(section: str, context: TriggerContext, model: str) -> str:
    """One section's text, unwrapped."""
    if section == layouts.SKILLS:
        return listing_section(context, model)
    if section == layouts.IDENTITY:
        return f"The model answering in this session is {model}."
    return SECTION_TEXTS[section]


def build_messages(
    layout: RequestLayout,
    context: TriggerContext,
    query: str,
    model: str,
    hook_output: str | None = None,
) -> list[dict[str, Any]]:
    """The request's messages in ``layout``: the user's message (its reminders, then the
    query), and after it the system-role message when the layout has one. The block the CLI
    marks for caching is marked here too: the system message, else the query. With the
    listing in the reminders, the last reminder is marked as well: every run of a context
    then reads the reminders (the listing) from the cache instead of writing them again,
    which the CLI's one marker on the query would make each run pay for; what the model is
    shown does not change. ``hook_output``: what the project's ``UserPromptSubmit`` hooks
    said for this query, after the listing and before the date (and CLAUDE.md)."""
    cached = {"cache_control": {"type": "ephemeral"}}
    earlier = history_messages(layout, context)
    if earlier and layout.system_sections:
        # the history is the same in every run of the context: cached up to its end (where
        # the listing is in the reminders, the marked last reminder caches it already)
        earlier = [*earlier[:-1], _marked(earlier[-1], cached)]
    content = _reminder_blocks(layout, context, model, hook_output)
    if layout.system_sections and context.project is not None:
        content = [*_project_blocks(context), *content]  # at the front of the user's message
    if not layout.system_sections:
        if content:
            content[-1] = {**content[-1], **cached}
        content.append({"type": "text", "text": query, **cached})
        return [*earlier, {"role": "user", "content": content}, *read_turns(layout, context)]
    content.append({"type": "text", "text": query})
    sections = "\n\n".join(_system_texts(layout, context, model, hook_output))
    return [
        *earlier,
        {"role": "user", "content": content},
        {"role": "system", "content": [{"type": "text", "text": sections, **cached}]},
        *read_turns(layout, context),
    ]


def _marked(message: dict[str, Any], cached: dict[str, Any]) -> dict[str, Any]:
    """A message with its last block marked for caching (a text turn made a block)."""
    content = message["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    if not blocks:
        return message
    return {**message, "content": [*blocks[:-1], {**blocks[-1], **cached}]}


def _reminder_blocks(
    layout: RequestLayout, context: TriggerContext, model: str, hook_output: str | None
) -> list[dict[str, Any]]:
    """The reminder blocks that open the user's message, in the layout's order; the hook's
    output and CLAUDE.md before the date, a mode's section after the listing."""
    content: list[dict[str, Any]] = []
    for section in layout.reminders:
        if section == layouts.DATE and hook_output:
            content.append({"type": "text", "text": reminder(HOOK_HEADER + hook_output)})
        if section == layouts.DATE and context.project is not None:
            content += _project_blocks(context)  # after the budget, before the date
        text = reminder(section_text(section, context, model))
        if section == layouts.ATTRIBUTION:
            text += "\n"  # as the CLI's attribution reminder ends
        content.append({"type": "text", "text": text})
        if section == layouts.SKILLS and context.permission_mode in MODE_TEXTS:
            content.append({"type": "text", "text": reminder(MODE_TEXTS[context.permission_mode])})
    return content


def _system_texts(
    layout: RequestLayout, context: TriggerContext, model: str, hook_output: str | None
) -> list[str]:
    """The sections of the system-role message: a mode's right after the listing, the
    hook's output right before the date."""
    texts = [section_text(s, context, model) for s in layout.system_sections]
    if context.permission_mode in MODE_TEXTS:
        texts.insert(
            layout.system_sections.index(layouts.SKILLS) + 1, MODE_TEXTS[context.permission_mode]
        )
    if hook_output and layouts.DATE in layout.system_sections:
        texts.insert(len(texts) - 1 - _after_date(layout), HOOK_HEADER + hook_output)
    return texts


READ_ID = "toolu_skilltrigger_read"


def discovery_texts(context: TriggerContext) -> list[str]:
    """The announcement of a subfolder's skills found by a Read (our words, the CLI's
    layout): which skills were found, then their listing, each line saying where it
    applies."""
    sub = context.subfolder
    found = context.discovered()
    if sub is None or not found:
        return []
    names = "\n".join(f"- {s.name}" for s in found)
    lines = "\n".join(context.discovery_line(s) for s in found)
    return [
        f"Skills found in {sub.folder}/.claude/skills can now be used with the Skill tool:\n"
        + names,
        LISTING_HEADER + "\n\n" + lines,
    ]


def read_turns(layout: RequestLayout, context: TriggerContext) -> list[dict[str, Any]]:
    """What follows the query when the session reaches a subfolder's skill by reading a file
    there (none otherwise): the model's Read, its result, and the announcement of the
    skills found, as a system-role message where the layout has one, else as reminders at
    the end of the result (as the pinned CLI does for each model)."""
    texts = discovery_texts(context)
    sub = context.subfolder
    if sub is None or not texts:
        return []
    call = {
        "type": "tool_use",
        "id": READ_ID,
        "name": "Read",
        "input": {"file_path": sub.read_path},
    }
    result = sub.read_text
    if not layout.system_sections:
        result += "".join("\n\n" + reminder(text) for text in texts)
    turns: list[dict[str, Any]] = [
        {"role": "assistant", "content": [call]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": READ_ID, "content": result}],
        },
    ]
    if layout.system_sections:
        turns.append({"role": "system", "content": [{"type": "text", "text": "\n\n".join(texts)}]})
    return turns


HOOK_HEADER = "The project's UserPromptSubmit hook added:\n"


def _after_date(layout: RequestLayout) -> int:
    """How many sections of the system message follow the date."""
    sections = layout.system_sections
    return len(sections) - 1 - sections.index(layouts.DATE)


# Our own short texts for the permission modes that change the request (acceptEdits and
# dontAsk do not): where the pinned CLI puts its own, right after the listing.
MODE_TEXTS = {
    "plan": (
        "Plan mode is on: research the request and present a plan for the user to approve. "
        "Make no edits and run nothing that changes the system until the user accepts it."
    ),
    "auto": "Auto mode is on: routine actions need no confirmation from the user.",
}
PROJECT_HEADER = (
    "The project's own instructions follow. They take precedence over default behaviour and "
    "must be followed exactly as written.\n\nContents of CLAUDE.md (the project's "
    "instructions, checked into the codebase):\n\n"
)


def _project_blocks(context: TriggerContext) -> list[dict[str, Any]]:
    """The project's CLAUDE.md as a reminder block (none without one)."""
    project = context.project
    if project is None or project.claude_md is None:
        return []
    return [{"type": "text", "text": reminder(PROJECT_HEADER + project.claude_md)}]


def history_messages(layout: RequestLayout, context: TriggerContext) -> list[dict[str, Any]]:
    """The conversation before the query, as the pinned CLI resends a resumed one: a user
    turn's text as it is, an assistant turn's as content blocks, and (where the listing is a
    system-role message) an empty system-role message after the first user turn, the mark
    the CLI leaves where that turn's reminders were. The reminders and the listing come with
    the new user message, after the history."""
    if context.history is None:
        return []
    messages: list[dict[str, Any]] = []
    for turn in turns_of(context.history):
        content = turn["content"]
        if turn["role"] == "assistant" and isinstance(content, str):
            content = [{"type": "text", "text": content}]
        messages.append({"role": turn["role"], "content": content})
        if layout.system_sections and len(messages) == 1 and turn["role"] == "user":
            messages.append({"role": "system", "content": []})
    return messages


def build_request(
    context: TriggerContext, query: str, model: str, hook_output: str | None = None
) -> dict[str, Any]:
    """The keyword arguments of one ``messages.create`` call (without ``stream``), laid out
    for ``model`` as the pinned CLI lays out its request (with what the project's hooks said
    for ``query``, if anything)."""
    layout = layout_for(model)
    tools = [*ORDINARY_TOOLS, {**SKILL_TOOL, "cache_control": {"type": "ephemeral"}}]
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": layout.max_tokens,
        "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
        "tools": tools,
        "tool_choice": {"type": "auto"},
        "messages": build_messages(layout, context, query, model, hook_output),
    }
    thinking = layout.thinking_param()
    if thinking is not None:
        params["thinking"] = thinking
    if layout.effort is not None:
        params["output_config"] = {"effort": layout.effort}
    return params


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

    #: whether only the query differs from run to run (a batch then splices the query into
    #: one serialised frame); a template that adds per-query text says False
    fixed = True

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

    def key_params(self) -> dict[str, Any]:
        """The parameters the store keys the context's runs by: the request of an empty
        query (what differs per query is keyed with the query)."""
        return self.for_query("").params

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
