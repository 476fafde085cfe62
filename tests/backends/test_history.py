"""An entry asked after earlier turns: the builtin request puts the history where the pinned
CLI puts a resumed conversation, per model; the claude-code backend resumes it in the run's
own workspace; the store keeps its runs apart; bad history is one line before any call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.api.request import build_request
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.skills.catalog import find_targets
from pytest_skilltrigger.skills.evalset import load_eval_set
from pytest_skilltrigger.skills.history import (
    history_text,
    read_session_file,
    session_lines,
)
from pytest_skilltrigger.support.errors import InputError
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.backends.test_plugin_eval_cli import run_official_runner
from tests.cli_session import cli_request
from tests.fake_messages_api import FakeMessagesAPI, extract_query
from tests.plugin.test_plugin_eval_items import make_plugin, write_case

TURNS = [
    {"role": "user", "content": "Q1 I have a folder of scanned invoices"},
    {"role": "assistant", "content": "A1 I can help with those. What would you like?"},
    {"role": "user", "content": "Q2 first, how many are there"},
    {"role": "assistant", "content": "A2 There are twelve PDF files."},
]
QUERY = "now merge them into one file"
CONTEXT = TriggerContext("pdf", "Merge and split PDF files.")


def shape(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Each message's role and what it holds: the text of a plain string, the kinds of its
    blocks (``reminders+query``), ``empty`` for an empty list."""
    found = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            held = content
        elif not content:
            held = "empty"
        elif message["role"] == "system":
            held = "sections"
        elif message["role"] == "assistant":
            held = " ".join(b.get("text", b["type"]) for b in content)
        else:
            last = content[-1].get("text", "")
            held = ("reminders+" if len(content) > 1 else "") + last
        found.append((message["role"], held))
    return found


def write_session(path: Path, turns: list[dict[str, Any]], cwd: Path) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in session_lines(turns, str(cwd))))
    return path


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_the_builtin_request_puts_the_history_where_the_cli_does(model: str) -> None:
    body = build_request(CONTEXT.with_history(history_text(TURNS)), QUERY, model)
    expected = [
        ("user", TURNS[0]["content"]),
        ("assistant", TURNS[1]["content"]),
        ("user", TURNS[2]["content"]),
        ("assistant", TURNS[3]["content"]),
        ("user", "reminders+" + QUERY),
    ]
    if model == "claude-opus-5-5":  # the listing follows the last user message
        expected.insert(1, ("system", "empty"))
        expected.append(("system", "sections"))
    assert shape(body) == expected


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_the_cli_resumes_a_history_as_the_builtin_request_lays_it_out(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    """A hand-written session file resumed by the pinned CLI: the same messages, in the same
    roles and places, as the builtin request of the same history."""
    project = tmp_path / "project"
    (project / ".claude" / "skills" / "pdf").mkdir(parents=True)
    (project / ".claude" / "skills" / "pdf" / "SKILL.md").write_text(
        "---\ndescription: Merge and split PDF files.\n---\nBody\n"
    )
    session = write_session(tmp_path / "h.jsonl", TURNS, project)
    body = cli_request(
        claude_bin,
        fake_api,
        project,
        tmp_path / "home",
        query=QUERY,
        model=model,
        args=["--resume", str(session)],
    )
    builtin = build_request(CONTEXT.with_history(history_text(TURNS)), QUERY, model)
    assert shape(body) == shape(builtin)


@pytest.mark.slow
def test_the_claude_code_backend_resumes_the_history_in_its_workspace(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's request holds the history before the query, a kept process asks the next
    query after the same history, and the run's decision is the new turn's first tool call;
    nothing is written into the user's HOME."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    fake_api.script(QUERY, ["skill:pdf"])
    context = CONTEXT.with_history(history_text(TURNS))
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        first = backend.run(context, QUERY)
        again = backend.run(context, QUERY)
        plain = backend.run(CONTEXT, QUERY)
    finally:
        backend.close()
    assert first.chosen == again.chosen == plain.chosen == "skill:pdf"
    bodies = list(fake_api.requests)
    assert [m["content"] for m in bodies[0]["messages"][:1]] == [TURNS[0]["content"]]
    assert bodies[1]["messages"] == bodies[0]["messages"]  # the kept process: the same
    assert bodies[2]["messages"][0]["content"] != TURNS[0]["content"]  # no history there
    assert not (home / ".claude" / "projects").exists()


def test_an_entry_with_history_or_a_history_file_is_read(tmp_path: Path) -> None:
    write_session(tmp_path / "earlier.jsonl", TURNS[:2], tmp_path)
    rows = [
        {"query": QUERY, "should_trigger": True, "history": TURNS},
        {"query": QUERY, "should_trigger": True, "history_file": "earlier.jsonl"},
        {"query": QUERY, "should_trigger": True},
    ]
    (tmp_path / "set.json").write_text(json.dumps(rows))
    entries = load_eval_set(tmp_path / "set.json").entries
    assert entries[0].history == history_text(TURNS)
    assert entries[1].history == history_text(TURNS[:2])
    assert entries[2].history is None
    keys = {CONTEXT.with_history(e.history).key() for e in entries}
    assert len(keys) == 3  # the store keeps each history's runs apart
    assert CONTEXT.with_history(None).key() == CONTEXT.key()  # and no other key moves


@pytest.mark.parametrize(
    "entry,problem",
    [
        ({"history": [{"role": "bot", "content": "hi"}]}, "history turn 1: role 'bot'"),
        ({"history": []}, "history must be a non-empty list"),
        ({"history": [{"role": "user"}]}, "content must be text or a list"),
        ({"history_file": "missing.jsonl"}, "history file not found"),
        ({"history": TURNS, "history_file": "x.jsonl"}, "not both"),
        (
            {"history": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}]},
            "ends with a tool call",
        ),
    ],
)
def test_a_bad_history_is_one_line(tmp_path: Path, entry: dict[str, Any], problem: str) -> None:
    (tmp_path / "set.json").write_text(
        json.dumps([{"query": QUERY, "should_trigger": True, **entry}])
    )
    with pytest.raises(InputError) as raised:
        load_eval_set(tmp_path / "set.json")
    assert problem in str(raised.value) and "\n" not in str(raised.value)


def test_a_broken_session_file_names_the_line(tmp_path: Path) -> None:
    lines = session_lines(TURNS, str(tmp_path))
    lines[2]["parentUuid"] = "nowhere"
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(InputError, match="line 3: parentUuid 'nowhere'"):
        read_session_file(str(path))
    path.write_text('{"type": "user", "message": {"role": "user", "content": "x"}, "uuid": "u"}\n')
    with pytest.raises(InputError, match="line 1: no timestamp"):
        read_session_file(str(path))
    path.write_text("{not json\n")
    with pytest.raises(InputError, match="line 1: not valid JSON"):
        read_session_file(str(path))


def test_the_estimate_counts_the_history_on_both_backends(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
) -> None:
    """A history's turns are input tokens of every run: the header's estimate counts them."""
    after = CONTEXT.with_history(history_text(TURNS))
    cli = ClaudeCodeBackend(claude_bin=claude_bin)
    api = AnthropicBackend()
    try:
        for backend in (cli, api):
            grown = backend.estimate(after, QUERY).input_tokens
            assert grown > backend.estimate(CONTEXT, QUERY).input_tokens
    finally:
        cli.close()
        api.close()


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_an_official_case_with_a_history_file_is_laid_out_as_the_runner_sends_it(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    """A ``claude plugin eval`` case with ``context.history_file``, run by the pinned CLI's
    own runner: its request holds the same messages, in the same roles and places, as the
    builtin request of the item the plugin collects from that case."""
    plugin = make_plugin(tmp_path)
    grader = 'name: used, type: tool_used, tool: Skill, input_match: \'"skill":"(acme:)?alpha"\''
    write_case(plugin, "resumed", QUERY, "{" + grader + "}", model=model)
    write_session(plugin / "evals" / "resumed" / "h.jsonl", TURNS, plugin)
    case = plugin / "evals" / "resumed" / "case.yaml"
    case.write_text(case.read_text() + "context:\n  history_file: h.jsonl\n")
    work = tmp_path / "work"
    work.mkdir()
    run_official_runner(claude_bin, plugin, fake_api, work)
    sent = [b for b in fake_api.requests if extract_query(b) == QUERY and b.get("tools")]
    assert sent, "the runner sent no request for the case"
    (target,) = [t for t in find_targets([str(plugin)]).targets if t.name == "acme:alpha"]
    (entry,) = [e for e in target.eval_set.entries if e.query == QUERY]
    builtin = build_request(target.context().with_history(entry.history), QUERY, model)
    assert shape(sent[0]) == shape(builtin)
