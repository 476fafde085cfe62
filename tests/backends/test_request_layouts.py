"""The builtin request lays out each model's first request as the pinned CLI does.

Where the listing sits (a system-role message after the user's, or the fifth of the reminder
blocks that open the user's message), which block is cached, and the output and thinking
settings come from a table per model (``model/request_layouts.py``). The unit tests pin
the shapes; the tests marked ``slow`` capture the pinned CLI's own request for the same
context and model and hold ours against it, structure for structure (the texts around the
listing are our own words, so only their number and order are compared).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.api.message_batches import MessageBatches
from pytest_skilltrigger.backends.api.request import (
    LISTING_HEADER,
    MARKER,
    build_request,
    builtin_template,
    listing_lines,
    listing_section,
    listing_text,
)
from pytest_skilltrigger.backends.base import BatchRequest
from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
from pytest_skilltrigger.model.request_layouts import (
    LAYOUTS,
    REMINDER,
    SYSTEM_MESSAGE,
    UNKNOWN_MODEL_LAYOUT,
    layout_for,
)
from tests.backends import test_claude_code_cli
from tests.fake_messages_api import FakeMessagesAPI, extract_query, parse_listing

SKILL = "pdf-tools"
DESCRIPTION = "Merge, split and extract pages from PDF documents. Use when combining PDF files."
SIBLING = "csv-tidy"
SIBLING_DESCRIPTION = "Clean messy CSV files: delimiters, encodings, duplicate rows."
CONTEXT = TriggerContext(SKILL, DESCRIPTION, (ListedSkill(SIBLING, SIBLING_DESCRIPTION),))
QUERY = "merge these three pdf files into one"
HEADER_START = "The following skills are available"

# the pinned CLI, installed on first use as the other CLI tests install it
claude_bin = test_claude_code_cli.claude_bin
REMINDER_OPEN = "<system-reminder>\n"

# model: (placement, max_tokens, thinking type, thinking budget, effort), as the pinned CLI
# sends them
OBSERVED = {
    "claude-opus-5-5": (SYSTEM_MESSAGE, 128_000, "adaptive", None, "medium"),
    "claude-sonnet-5-5": (SYSTEM_MESSAGE, 128_000, "adaptive", None, "medium"),
    "claude-opus-4-7": (REMINDER, 64_000, "adaptive", None, "xhigh"),
    "claude-sonnet-4-6": (REMINDER, 32_000, "adaptive", None, "high"),
    "claude-haiku-4-5": (REMINDER, 32_000, "enabled", 31_999, None),
}


def texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    return [content] if isinstance(content, str) else [b["text"] for b in content]


def listing_place(body: dict[str, Any]) -> tuple[int, str, int]:
    """(message index, its role, block index) of the block that holds the skills header."""
    (place,) = [
        (m, message["role"], b)
        for m, message in enumerate(body["messages"])
        for b, text in enumerate(texts(message))
        if HEADER_START in text
    ]
    return place


def cached_blocks(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(message index, block index) of every message block marked for caching."""
    return [
        (m, b)
        for m, message in enumerate(body["messages"])
        for b, block in enumerate(message["content"])
        if isinstance(block, dict) and "cache_control" in block
    ]


def settings(body: dict[str, Any]) -> tuple[str, int, str | None, int | None, str | None]:
    thinking = body.get("thinking") or {}
    return (
        SYSTEM_MESSAGE if len(body["messages"]) > 1 else REMINDER,
        body["max_tokens"],
        thinking.get("type"),
        thinking.get("budget_tokens"),
        (body.get("output_config") or {}).get("effort"),
    )


def skills_part(text: str) -> tuple[list[str], list[str]]:
    """The lines of a skills section (header to the first empty line after the listing),
    and the paragraphs that follow it in the same text."""
    after = text[text.index(HEADER_START) :].split("\n\n")
    lines = after[1].removesuffix("\n</system-reminder>").split("\n")
    return lines, [p for p in after[2:] if p.strip()]


# -- the table ---------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(OBSERVED))
def test_each_observed_model_gets_its_row(model: str) -> None:
    body = build_request(CONTEXT, QUERY, model)
    assert settings(body) == OBSERVED[model]
    assert "display" not in body.get("thinking", {})  # the CLI's display setting is not ours


def test_dated_names_and_a_larger_window_follow_their_model_and_unknown_names_the_default() -> None:
    assert layout_for("claude-haiku-4-5-20251001") is LAYOUTS["claude-haiku-4-5"]
    assert layout_for("claude-sonnet-4-6[1m]") is LAYOUTS["claude-sonnet-4-6"]
    assert layout_for("claude-opus-5-5") is LAYOUTS["claude-opus-5-5"]  # not claude-opus-5
    assert layout_for("claude-opus-5") is LAYOUTS["claude-opus-5"]
    assert layout_for("claude-sonnet-4-20250514") is LAYOUTS["claude-sonnet-4"]
    assert layout_for(None) is LAYOUTS["claude-opus-5-5"]
    unknown = layout_for("claude-fennec-9")
    assert unknown is UNKNOWN_MODEL_LAYOUT and unknown.placement == SYSTEM_MESSAGE
    # the API refuses a thinking budget that leaves no room for an answer
    assert all(layout.thinking_budget < layout.max_tokens for layout in LAYOUTS.values())


# -- the shapes --------------------------------------------------------------------------------


def test_reminder_layout_puts_the_listing_fifth_and_caches_the_reminders_and_query() -> None:
    body = build_request(CONTEXT, QUERY, "claude-haiku-4-5")
    (message,) = body["messages"]
    assert message["role"] == "user"
    blocks = message["content"]
    assert len(blocks) == 10
    assert all(b["text"].startswith(REMINDER_OPEN) for b in blocks[:-1])
    assert blocks[4]["text"] == listing_text(CONTEXT, "claude-haiku-4-5")
    assert blocks[-1] == {"type": "text", "text": QUERY, "cache_control": {"type": "ephemeral"}}
    # the CLI's marker on the query, and ours on the last reminder: runs share the listing
    assert cached_blocks(body) == [(0, 8), (0, 9)]
    assert "claude-haiku-4-5" in blocks[1]["text"]  # the model's identity
    assert "output_config" not in body


def test_system_message_layout_holds_the_listing_after_the_users_message() -> None:
    body = build_request(CONTEXT, QUERY, "claude-opus-5-5")
    user, system = body["messages"]
    assert user["role"] == "user" and system["role"] == "system"
    assert [b["text"].startswith(REMINDER_OPEN) for b in user["content"]] == [True, True, False]
    assert user["content"][-1] == {"type": "text", "text": QUERY}
    (block,) = system["content"]
    assert block["cache_control"] == {"type": "ephemeral"} and cached_blocks(body) == [(1, 0)]
    text = block["text"]
    assert "<system-reminder>" not in text  # plain sections, as the CLI writes them here
    assert listing_section(CONTEXT, "claude-opus-5-5") in text
    lines, after = skills_part(text)
    assert lines == listing_lines(CONTEXT, "claude-opus-5-5")
    assert len(after) == 1  # the date closes the message
    assert len(text[: text.index(HEADER_START)].rstrip().split("\n\n")) == 5
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "medium"}


def test_the_oldest_models_get_fewer_reminders_and_no_thinking() -> None:
    body = build_request(CONTEXT, QUERY, "claude-3-haiku-20240307")
    assert listing_place(body) == (0, "user", 3)
    assert len(body["messages"][0]["content"]) == 8
    assert "thinking" not in body and "output_config" not in body
    assert body["max_tokens"] == 4_096


@pytest.mark.parametrize("model", ["claude-haiku-4-5", "claude-opus-5-5"])
def test_the_template_holds_the_query_once_and_the_fake_reads_the_listing(model: str) -> None:
    template = builtin_template(CONTEXT, model)
    assert template.path is not None and template.path[:2] == ("messages", 0)
    assert not template.beta and not template.headers  # no beta is needed for either
    request = template.for_query(QUERY)
    assert request.params == {**build_request(CONTEXT, QUERY, model), "stream": True}
    assert extract_query(request.params) == QUERY
    listed = [f"- {name}: {text}" for name, text in parse_listing(request.params)]
    assert listed == listing_lines(CONTEXT, model)
    assert LISTING_HEADER.startswith(HEADER_START)


def test_a_bare_listed_skill_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the listing budget the lines change, not where they sit."""
    monkeypatch.setenv("SLASH_COMMAND_TOOL_CHAR_BUDGET", "6100")
    body = build_request(CONTEXT, QUERY, "claude-haiku-4-5")
    assert listing_place(body) == (0, "user", 4)
    assert f"\n- {SIBLING}\n" in body["messages"][0]["content"][4]["text"]


def test_each_layout_runs_live_and_in_batches_through_the_sdk(
    fake_api: FakeMessagesAPI,
) -> None:
    """The SDK sends a system-role message and each model's thinking settings as they are,
    live and in a message batch, on the ordinary endpoints."""
    fake_api.script(QUERY, ["skill:pdf-tools"] * 4)
    for model in ("claude-haiku-4-5", "claude-opus-5-5"):
        backend = AnthropicBackend(model=model, timeout=10, max_retries=0)
        try:
            outcome = backend.run(CONTEXT, QUERY)
            batches = MessageBatches(backend)
            (batch_id,) = batches.create([BatchRequest("q", CONTEXT, QUERY)])
            while not batches.status(batch_id).ended:
                time.sleep(0.05)
            (answer,) = batches.results(batch_id, {"q": CONTEXT})
        finally:
            backend.close()
        assert outcome.status == "triggered", outcome.error
        assert answer.outcome.status == "triggered", answer.outcome.error
        live = fake_api.requests[-1]
        assert live["messages"] == build_request(CONTEXT, QUERY, model)["messages"]
        assert settings(live) == OBSERVED[model]
        batched = fake_api.batch_requests_log[-1]
        assert batched["messages"] == live["messages"]
    sent = [*fake_api.request_headers, *fake_api.batch_headers]
    assert len(sent) == 4 and not [h for h in sent if "anthropic-beta" in h]


# -- against the pinned CLI's own request ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(OBSERVED))
def test_the_builtin_request_has_the_shape_of_the_clis(
    model: str, claude_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's request for the same context and model, captured on a loopback recorder,
    against ours for a marker query: the listing in the same message (same role) and block,
    the same number of reminder blocks before and after it, the query last in the user's
    message, the same blocks cached, the same listing lines for the project's skills and the
    same number of lines in all, and the same output and thinking settings. The CLI runs in
    a workspace marked as a git repository, so its git-status reminder is there, as in ours."""
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cli = ClaudeCodeBackend(model=model, timeout=90, claude_bin=claude_bin)
    try:
        theirs = cli.capture(CONTEXT).body
    finally:
        cli.close()
    ours = build_request(CONTEXT, MARKER, model)

    assert [m["role"] for m in ours["messages"]] == [m["role"] for m in theirs["messages"]]
    assert listing_place(ours) == listing_place(theirs)
    # the CLI's cached blocks, and where the listing is in the user's message, the last
    # reminder too (so that runs read the listing from the cache)
    extra = [(0, len(texts(ours["messages"][0])) - 2)] if len(ours["messages"]) == 1 else []
    assert cached_blocks(ours) == sorted(cached_blocks(theirs) + extra)
    for body in (ours, theirs):
        user = texts(body["messages"][0])
        assert user[-1] == MARKER
        assert all(t.startswith(REMINDER_OPEN) for t in user[:-1])
    assert [len(texts(m)) for m in ours["messages"]] == [len(texts(m)) for m in theirs["messages"]]

    place = listing_place(ours)
    our_text = texts(ours["messages"][place[0]])[place[2]]
    their_text = texts(theirs["messages"][place[0]])[place[2]]
    our_lines, our_after = skills_part(our_text)
    their_lines, their_after = skills_part(their_text)
    project = [line for line in our_lines if line.startswith((f"- {SIBLING}:", f"- {SKILL}:"))]
    assert their_lines[: len(project)] == our_lines[: len(project)] == project
    entries = [line for line in their_lines if line.startswith("- ")]  # not continuation lines
    assert len(entries) == len(our_lines)
    assert len(our_after) == len(their_after)
    before = [t[: t.index(HEADER_START)].rstrip() for t in (our_text, their_text)]
    assert len(before[0].split("\n\n")) == len(before[1].split("\n\n"))

    assert settings(ours) == settings(theirs) == OBSERVED[model]
