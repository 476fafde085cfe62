"""The claude-code backend without the real CLI: its stream reading and its process handling.

The event lines below are trimmed recordings of ``claude -p --output-format stream-json
--verbose --include-partial-messages`` (Claude Code 2.1.328, run against the suite's fake
Messages API): only ``uuid``/``session_id`` noise is dropped, the shapes and the fragment
boundaries are the CLI's own. The process tests use a tiny stand-in ``claude`` script, so
timeouts, crashes and kills are checked in milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_skilltrigger.backends.api.sse import decide
from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.backends.claude_code.stream import read_stream
from pytest_skilltrigger.backends.claude_code.workspace import credential_store_dir, skill_file
from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
from pytest_skilltrigger.support.redact import redact

# -- recorded lines -----------------------------------------------------------------------------

INIT = {
    "type": "system",
    "subtype": "init",
    "cwd": "/tmp/skilltrigger-cc-x/run-y/project",
    "tools": ["Task", "Bash", "Edit", "Read", "Skill", "Write"],
    "model": "claude-opus-5-5",
    "apiKeySource": "ANTHROPIC_API_KEY",
    "claude_code_version": "2.1.328",
    "skills": ["pdf-tools", "deep-research", "dataviz", "update-config", "code-review"],
}
STATUS = {"type": "system", "subtype": "status", "status": "requesting"}
USAGE = {
    "input_tokens": 0,
    "cache_creation_input_tokens": 12241,
    "cache_read_input_tokens": 0,
    "output_tokens": 1,
}


def ev(event: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    return {"type": "stream_event", "event": event, "parent_tool_use_id": parent}


def message_start(msg_id: str = "msg_fake_1") -> dict[str, Any]:
    return ev(
        {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-5-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": USAGE,
            },
        }
    )


def thinking(index: int = 0) -> list[dict[str, Any]]:
    pieces = ["The user wants something done. Let me ", "check whether one of th", "e tools"]
    return [
        ev(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""},
            }
        ),
        {"type": "system", "subtype": "thinking_tokens", "estimated_tokens": 10},
        *[
            ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "thinking_delta", "thinking": p},
                }
            )
            for p in pieces
        ],
        ev(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "signature_delta", "signature": "kW9L1XlUPSevciBp+pXb"},
            }
        ),
        assistant([{"type": "thinking", "thinking": "".join(pieces), "signature": "kW9L"}]),
        ev({"type": "content_block_stop", "index": index}),
    ]


def text_block(index: int, pieces: list[str]) -> list[dict[str, Any]]:
    return [
        ev(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        ),
        *[
            ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "text_delta", "text": p},
                }
            )
            for p in pieces
        ],
        assistant([{"type": "text", "text": "".join(pieces)}]),
        ev({"type": "content_block_stop", "index": index}),
    ]


def tool_block(
    index: int, name: str, fragments: list[str], *, with_assistant: bool = True
) -> list[dict[str, Any]]:
    try:
        tool_input = json.loads("".join(fragments) or "{}")
    except ValueError:
        tool_input = {}  # a block cut off mid-input
    start = {"type": "tool_use", "id": "toolu_fake_2", "name": name, "input": {}}
    lines = [
        ev(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": start,
            }
        ),
        *[
            ev(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": f},
                }
            )
            for f in fragments
        ],
    ]
    if with_assistant:  # the CLI emits the complete block before the stream's block stop
        block = {"type": "tool_use", "id": "toolu_fake_2", "name": name, "input": tool_input}
        lines.append(assistant([block]))
    lines.append(ev({"type": "content_block_stop", "index": index}))
    return lines


def assistant(content: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    message = {
        "id": "msg_fake_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-5-5",
        "content": content,
        "stop_reason": None,
        "usage": USAGE,
    }
    return {"type": "assistant", "message": message, "parent_tool_use_id": None, **extra}


def message_end(stop_reason: str) -> list[dict[str, Any]]:
    return [
        ev(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 97},
            }
        ),
        ev({"type": "message_stop"}),
    ]


RESULT_OK = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "result": "Done.",
    "stop_reason": "end_turn",
    "usage": {**USAGE, "output_tokens": 106},
}
SKILL_FRAGMENTS = ["", "{", '"skill', '": "', "pdf-t", "o", 'ols"}']
READ_FRAGMENTS = [
    "",
    '{"f',
    "i",
    "le_p",
    'ath":',
    ' ".cl',
    "aud",
    "e/s",
    "k",
    "ills",
    "/pd",
    "f-to",
    "o",
    "ls/SKI",
    'LL.md"}',
]


def lines_of(*parts: Any) -> list[str]:
    out: list[str] = []
    for part in parts:
        for item in part if isinstance(part, list) else [part]:
            out.append(json.dumps(item) + "\n")
    return out


class Tracked:
    """An iterator that remembers how far the reader got (it must stop at the decision)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.taken = 0

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.taken += 1
            yield line


# -- stream reading -----------------------------------------------------------------------------


def test_thinking_then_preamble_then_fragmented_skill_call() -> None:
    lines = lines_of(
        INIT,
        STATUS,
        message_start(),
        thinking(0),
        text_block(1, ["I'l", "l take", " a look ", "at that."]),
        tool_block(2, "Skill", SKILL_FRAGMENTS),
        message_end("tool_use"),
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result"}]}},
        RESULT_OK,
    )
    tracked = Tracked(lines)
    verdict = read_stream(tracked)
    assert verdict.chosen == "skill:pdf-tools"
    assert verdict.error is None
    assert verdict.skills == tuple(INIT["skills"])
    assert verdict.cli_version == "2.1.328"
    assert verdict.usage.cache_creation_input_tokens == 12241
    # decided on the complete assistant block, before the block's stop event
    assert tracked.taken == len(lines) - 5


def test_skill_decided_from_stream_events_alone() -> None:
    """Without the assistant copy, the fragments are assembled up to the block's stop."""
    lines = lines_of(
        INIT,
        message_start(),
        thinking(0),
        tool_block(1, "Skill", SKILL_FRAGMENTS, with_assistant=False),
        message_end("tool_use"),
    )
    assert read_stream(lines).chosen == "skill:pdf-tools"


def test_other_tool_first_decides_on_block_start() -> None:
    fragments = ["", '{"c', "omm", "a", 'nd": "', "ls -la", '"}']
    lines = lines_of(INIT, message_start(), thinking(0), tool_block(1, "Bash", fragments))
    tracked = Tracked(lines)
    verdict = read_stream(tracked)
    assert verdict.chosen == "tool:Bash"
    # init, message_start, 8 thinking lines, then the Bash block start: no fragment needed
    assert tracked.taken == 1 + 1 + 8 + 1


def test_skill_after_another_tool_is_not_a_trigger() -> None:
    lines = lines_of(
        INIT,
        message_start(),
        tool_block(0, "Bash", ['{"command": "ls"}']),
        tool_block(1, "Skill", SKILL_FRAGMENTS),
    )
    assert read_stream(lines).chosen == "tool:Bash"


def test_read_of_the_skill_file_counts_as_the_skill() -> None:
    lines = lines_of(
        INIT,
        message_start(),
        thinking(0),
        text_block(1, ["I'll t", "ake a look at that."]),
        tool_block(2, "Read", READ_FRAGMENTS, with_assistant=False),
    )
    assert read_stream(lines).chosen == "skill:pdf-tools"


@pytest.mark.parametrize(
    "path,chosen",
    [
        ("/w/run-1/config/skills/zed/SKILL.md", "skill:zed"),  # the user's
        ("/w/run-1/plugins/00-acme/skills/alpha/SKILL.md", "skill:acme:alpha"),
        ("/w/run-1/plugins/1000-team/skills/gamma/SKILL.md", "skill:team:gamma"),
        ("/w/run-1/project/docs/SKILL.md", "tool:Read"),
    ],
)
def test_a_read_of_a_users_or_a_plugins_skill_file_counts_as_that_skill(
    path: str, chosen: str
) -> None:
    fragments = [json.dumps({"file_path": path})]
    lines = lines_of(INIT, message_start(), tool_block(0, "Read", fragments))
    assert read_stream(lines).chosen == chosen


def test_read_of_another_file_is_the_read_tool() -> None:
    lines = lines_of(INIT, message_start(), tool_block(0, "Read", ['{"file_path": "README.md"}']))
    assert read_stream(lines).chosen == "tool:Read"


def test_final_answer_without_a_tool_is_text() -> None:
    lines = lines_of(
        INIT,
        message_start(),
        thinking(0),
        text_block(1, ["Here is", " a short answer."]),
        message_end("end_turn"),
        RESULT_OK,
    )
    tracked = Tracked(lines)
    assert read_stream(tracked).chosen == "text"
    assert tracked.taken == len(lines) - 1  # decided on message_stop, before the result


def test_result_without_partial_messages_is_text() -> None:
    lines = lines_of(INIT, assistant([{"type": "text", "text": "Paris."}]), RESULT_OK)
    verdict = read_stream(lines)
    assert verdict.chosen == "text"
    assert verdict.usage.output_tokens == 106


def test_api_error_reported_by_the_cli_is_an_error() -> None:
    """Recorded with a 404 model: the CLI turns it into an assistant text message."""
    error_message = assistant(
        [{"type": "text", "text": "There's an issue with the selected model (claude-opus-5-5)."}],
        error="model_not_found",
        request_id="req_fake_2",
        is_api_error_message=True,
        api_error_status=404,
        api_error_type="not_found_error",
    )
    error_message["message"]["model"] = "<synthetic>"
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "api_error_status": 404,
        "result": "There's an issue with the selected model (claude-opus-5-5).",
        "terminal_reason": "api_error",
    }
    verdict = read_stream(lines_of(INIT, STATUS, error_message, result))
    assert verdict.chosen is None
    assert verdict.error is not None and "404" in verdict.error
    assert "selected model" in verdict.error
    assert verdict.fatal
    assert verdict.request_id == "req_fake_2"


def test_error_result_alone_is_an_error() -> None:
    result = {"type": "result", "subtype": "error_during_execution", "is_error": True}
    verdict = read_stream(lines_of(INIT, result))
    assert verdict.chosen is None
    assert verdict.error == "error_during_execution"
    assert not verdict.fatal


def test_authentication_retries_stop_at_once() -> None:
    """The CLI retries a 401 ten times over minutes; one is enough to know."""
    retry = {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 1,
        "max_retries": 10,
        "retry_delay_ms": 514,
        "error_status": 401,
        "error": "authentication_failed",
    }
    verdict = read_stream(lines_of(INIT, STATUS, retry, retry))
    assert verdict.error is not None and "401" in verdict.error
    assert verdict.fatal


def test_overload_retry_then_stream_error_then_success() -> None:
    retry = {"type": "system", "subtype": "api_retry", "error_status": 529, "error": "overloaded"}
    lines = lines_of(
        INIT,
        retry,
        message_start("msg_1"),
        thinking(0),
        tool_block(1, "Skill", ['{"skill": "pd'], with_assistant=False)[:2],
        ev({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        message_start("msg_2"),
        tool_block(0, "Bash", ['{"command": "ls"}']),
    )
    assert read_stream(lines).chosen == "tool:Bash"


def test_exit_without_decision_is_an_error() -> None:
    lines = lines_of(INIT, STATUS, message_start(), thinking(0))
    verdict = read_stream(lines)
    assert verdict.chosen is None
    assert verdict.error is not None and "before the model chose" in verdict.error
    assert read_stream([]).skills is None


def test_subagent_events_and_noise_are_ignored() -> None:
    sub = ev(
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "Bash", "input": {}},
        },
        parent="toolu_agent",
    )
    lines = [
        "not json at all\n",
        "\n",
        *lines_of(INIT, message_start(), sub, tool_block(0, "Skill", SKILL_FRAGMENTS)),
    ]
    assert read_stream(lines).chosen == "skill:pdf-tools"


def test_sse_decide_still_reads_raw_streams() -> None:
    """The shared state machine must keep the Messages API reader's behaviour."""
    frames = []
    for item in [message_start(), *thinking(0), *tool_block(1, "Skill", SKILL_FRAGMENTS)]:
        if item["type"] == "stream_event":
            event = item["event"]
            frames.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
    assert decide(frames).chosen == "skill:pdf-tools"


# -- helpers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "description",
    [
        "Plain words.",
        'Has "quotes", colons: and # hashes',
        "- starts with a dash\nand spans\n\nlines",
        "Unicode — “curly” ünïcödé 🎉 and \t tabs",
        "yes",
        "@at {braces} [brackets] *star &amp |pipe >gt %pct `tick",
    ],
)
def test_skill_file_frontmatter_is_valid_yaml(description: str) -> None:
    text = skill_file("my-skill", description)
    front = text.split("---\n")[1]
    assert yaml.safe_load(front) == {"name": "my-skill", "description": description}


def test_credential_store_follows_the_users_login() -> None:
    assert credential_store_dir({}) == ""
    assert credential_store_dir({"CLAUDE_CONFIG_DIR": "/home/u/cc"}) == "/home/u/cc"
    env = {"CLAUDE_CONFIG_DIR": "/a", "CLAUDE_SECURESTORAGE_CONFIG_DIR": "/b"}
    assert credential_store_dir(env) == "/b"


# -- the process, with a stand-in CLI ----------------------------------------------------------

FAKE_CLI = textwrap.dedent(
    """\
    import json, os, sys, time
    if sys.argv[1:] == ["--version"]:
        print("9.9.9 (Claude Code)")
        sys.exit(0)
    mode = os.environ["FAKE_CLI_MODE"]
    if mode == "badflag":  # refuses its arguments at once, before reading anything
        sys.stderr.write("error: unknown option '--include-partial-messages'\\n")
        sys.exit(1)
    if mode == "nologin":  # no credentials: one result line, and out
        sys.stdout.write(json.dumps({"type": "result", "subtype": "success", "is_error": True,
            "result": "Invalid API key · Please run /login"}) + "\\n")
        sys.exit(1)
    query = json.loads(sys.stdin.readline())["message"]["content"]  # the first user message
    project = os.getcwd()
    report = {
        "argv": sys.argv[1:],
        "query": query,
        "cwd": project,
        "files": sorted(
            os.path.relpath(os.path.join(d, f), project)
            for d, _, fs in os.walk(project) for f in fs
        ),
        "dirs": sorted(d for d in os.listdir(project)),
        "env": {k: os.environ.get(k) for k in (
            "CLAUDE_CONFIG_DIR", "CLAUDE_SECURESTORAGE_CONFIG_DIR", "TMPDIR",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDECODE", "ANTHROPIC_API_KEY")},
        "config": open(os.path.join(os.environ["CLAUDE_CONFIG_DIR"], ".claude.json")).read(),
        "pid": os.getpid(),
    }
    # Written whole, then renamed: a test polling for reports never reads a half-written one.
    final = os.environ["FAKE_CLI_REPORT"] + f".{os.getpid()}"
    with open(final + ".part", "w") as fh:
        json.dump(report, fh)
    os.replace(final + ".part", final)
    def out(obj):
        sys.stdout.write(json.dumps(obj) + "\\n")
        sys.stdout.flush()
    out({"type": "system", "subtype": "init", "skills": ["pdf-tools", "dataviz"]})
    def decide():
        out({"type": "assistant", "parent_tool_use_id": None, "message": {"content": [
            {"type": "tool_use", "name": "Skill", "input": {"skill": "pdf-tools"}}]}})
    if mode == "skill":  # the turn ends at the interrupt, the rewind is taken; then the next
        decide()
        for line in sys.stdin:
            msg = json.loads(line)
            if msg["type"] == "user":
                out({"type": "system", "subtype": "init", "skills": ["pdf-tools", "dataviz"]})
                decide()
            else:
                if msg["request"]["subtype"] == "interrupt":
                    out({"type": "result", "subtype": "error_during_execution"})
                out({"type": "control_response", "response": {"subtype": "success",
                     "request_id": msg["request_id"], "response": {"rewound": True}}})
    elif mode == "hang":
        sys.stderr.write("starting up\\nwaiting for the API\\n")
        sys.stderr.flush()
        time.sleep(60)
    elif mode == "cut":  # the stream ends mid-answer: the model's turn never finished
        out({"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}}})
        sys.exit(0)
    elif mode == "crash":
        for i in range(40):
            sys.stderr.write(f"trace line {i}\\n")
        sys.stderr.write("Error: boom, key sk-ant-api03-SECRETSECRETSECRET\\n")
        sys.exit(3)
    """
)


@pytest.fixture
def fake_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    script = tmp_path / "claude"
    script.write_text(f"#!{sys.executable}\n{FAKE_CLI}", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    report = tmp_path / "report.json"
    monkeypatch.setenv("FAKE_CLI_REPORT", str(report))
    monkeypatch.setenv("CLAUDECODE", "1")  # as when pytest itself runs inside Claude Code
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_SECURESTORAGE_CONFIG_DIR", raising=False)
    return script, report


def _reports(report: Path) -> list[dict[str, Any]]:
    found = sorted(report.parent.glob(report.name + ".*"))
    return [json.loads(p.read_text()) for p in found if p.suffix != ".part"]


CONTEXT = TriggerContext(
    "pdf-tools",
    'Merge "PDF" files: split, extract pages.',
    (ListedSkill("csv-cleaner", "Clean CSV files."), ListedSkill("pdf-tools", "old text")),
)


@contextmanager
def cli_backend(
    script: Path, monkeypatch: pytest.MonkeyPatch, mode: str, **options: Any
) -> Iterator[ClaudeCodeBackend]:
    """A backend on the stand-in CLI in ``mode``; closed on the way out, even after a failure."""
    monkeypatch.setenv("FAKE_CLI_MODE", mode)
    backend = ClaudeCodeBackend(claude_bin=str(script), **options)
    try:
        yield backend
    finally:
        backend.close()


def test_missing_binary_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="not found"):
        ClaudeCodeBackend(claude_bin=str(tmp_path / "no-such-claude"))


def test_a_decided_runs_process_is_kept_until_close_removes_it_and_its_workspace(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    script, report = fake_cli
    with cli_backend(script, monkeypatch, "skill", model="claude-test-1", timeout=20) as backend:
        assert backend.cli_version == "9.9.9"
        assert backend.model == "claude-test-1"
        outcome = backend.run(CONTEXT, "-merge these pdfs")
        assert outcome.status == "triggered", outcome
        again = backend.run(CONTEXT, "merge more pdfs")  # the same process answers
        assert again.status == "triggered" and len(_reports(report)) == 1
        assert outcome.chosen == "skill:pdf-tools"
        assert backend.observed_listings == [("pdf-tools", "dataviz")] * 2
        (seen,) = _reports(report)
        os.kill(seen["pid"], 0)  # kept: it still runs
        assert seen["query"] == "-merge these pdfs"
        assert seen["argv"][-2:] == ["--model", "claude-test-1"]
        # user-level settings and skills from the run's private config folder only
        assert "--setting-sources" in seen["argv"] and "user,project" in seen["argv"]
        assert seen["files"] == [
            ".claude/skills/csv-cleaner/SKILL.md",
            ".claude/skills/pdf-tools/SKILL.md",
        ]
        assert ".git" in seen["dirs"]
        env = seen["env"]
        assert env["CLAUDE_SECURESTORAGE_CONFIG_DIR"] == ""
        assert env["CLAUDE_CONFIG_DIR"].startswith(str(Path(seen["cwd"]).parent))
        assert env["TMPDIR"].startswith(str(Path(seen["cwd"]).parent))
        assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
        assert env["CLAUDECODE"] is None
    assert not Path(seen["cwd"]).exists()
    for _ in range(50):  # killed and reaped by close()
        try:
            os.kill(seen["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the CLI process outlived close()")


def test_the_skill_under_test_carries_the_description_under_test(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _report = fake_cli
    with cli_backend(script, monkeypatch, "skill", timeout=20) as backend:
        root = Path(backend._root)
        (root / "probe").mkdir()
        backend._install(root / "probe", CONTEXT)
        text = (root / "probe/project/.claude/skills/pdf-tools/SKILL.md").read_text()
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["description"] == CONTEXT.description
        assert backend.model == "claude-code-default"
    assert not Path(backend._root).exists()


def test_timeout_is_an_error_with_stderr(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    script, report = fake_cli
    with cli_backend(script, monkeypatch, "hang", timeout=1.0) as backend:
        outcome = backend.run(CONTEXT, "anything")
        assert outcome.status == "error"
        assert outcome.error is not None
        assert "timed out after 1s" in outcome.error
        assert "waiting for the API" in outcome.error
        (seen,) = _reports(report)
        assert not Path(seen["cwd"]).parent.exists()


def test_crash_is_an_error_with_the_last_stderr_lines_redacted(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _report = fake_cli
    with cli_backend(script, monkeypatch, "crash", timeout=20) as backend:
        outcome = backend.run(CONTEXT, "anything")
        assert outcome.status == "error"
        error = outcome.error or ""
        assert "exit code 3" in error
        assert "before the model chose" in error
        assert "trace line 39" in error and "trace line 5\n" not in error
        assert "SECRETSECRET" not in error and "[REDACTED]" in error


def test_close_kills_live_runs_and_removes_workspaces(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an interrupted session relies on: close() from another thread ends the runs."""
    import threading

    script, report = fake_cli
    monkeypatch.setenv("FAKE_CLI_MODE", "hang")
    backend = ClaudeCodeBackend(timeout=60, claude_bin=str(script))
    outcomes: list[Any] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(backend.run(CONTEXT, "q")))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 15
    while len(_reports(report)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    backend.close()
    for t in threads:
        t.join(10)
    assert [o.status for o in outcomes] == ["error"] * 3
    assert not Path(backend._root).exists()
    assert backend.run(CONTEXT, "q").status == "error"


def test_roots_of_dead_sessions_are_removed(fake_cli: tuple[Path, Path]) -> None:
    """A session killed outright leaves its root; the next one removes it, not live ones."""
    import subprocess
    import tempfile

    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = Path(tempfile.mkdtemp(prefix=f"skilltrigger-cc-{done.stdout.strip()}-"))
    live = Path(tempfile.mkdtemp(prefix=f"skilltrigger-cc-{os.getppid()}-"))
    (dead / "run-x" / "project").mkdir(parents=True)
    script, _report = fake_cli
    backend = ClaudeCodeBackend(claude_bin=str(script))
    try:
        assert not dead.exists()
        assert live.exists()
        assert Path(backend._root).name.startswith(f"skilltrigger-cc-{os.getpid()}-")
    finally:
        backend.close()
        live.rmdir()


def test_login_key_reaches_the_cli_only_through_its_environment(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The /login key of ~/.claude.json must work, but never be written into a run's files."""
    script, report = fake_cli
    key = "sk-ant-api03-LOGINKEYloginkeyLOGINKEY-0123456789"
    home = tmp_path / "home"
    home.mkdir()
    account = {
        "oauthAccount": {"emailAddress": "a@example.org"},
        "primaryApiKey": key,
        "customApiKeyResponses": {"approved": [key[-20:]]},
    }
    (home / ".claude.json").write_text(json.dumps(account), encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with cli_backend(script, monkeypatch, "skill", timeout=20) as backend:
        assert backend.run(CONTEXT, "merge these pdfs").status == "triggered"
    (seen,) = _reports(report)
    assert seen["env"]["ANTHROPIC_API_KEY"] == key
    config = json.loads(seen["config"])
    assert config["oauthAccount"] == {"emailAddress": "a@example.org"}
    assert key not in seen["config"] and key[-20:] not in seen["config"]
    assert redact(f"failed with {key}") == "failed with [REDACTED]"


def test_sigterm_kills_live_runs_and_removes_workspaces(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI cancellation (SIGTERM) must not leave CLI processes or workspaces behind."""
    script, report = fake_cli
    monkeypatch.setenv("FAKE_CLI_MODE", "hang")
    root_dir = Path(__file__).resolve().parents[2]
    code = textwrap.dedent(
        f"""
        import sys, threading, time
        sys.path.insert(0, {str(root_dir)!r})
        from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
        from pytest_skilltrigger.model.context import TriggerContext
        backend = ClaudeCodeBackend(claude_bin={str(script)!r}, timeout=60)
        print(backend._root, flush=True)
        context = TriggerContext("pdf-tools", "Merge PDF files.")
        threading.Thread(target=backend.run, args=(context, "q"), daemon=True).start()
        time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    root = Path(proc.stdout.readline().strip())
    deadline = time.monotonic() + 30
    while not _reports(report) and time.monotonic() < deadline:
        time.sleep(0.05)
    (seen,) = _reports(report)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)
    time.sleep(0.3)
    with pytest.raises(ProcessLookupError):
        os.kill(seen["pid"], 0)
    assert not root.exists()


@pytest.mark.parametrize(
    "mode,cause",
    [
        ("badflag", "unknown option"),
        ("nologin", "Invalid API key"),
        ("cut", "before the model chose"),
    ],
    ids=["a bad flag", "a missing login", "a stream cut mid-answer"],
)
def test_a_cli_that_fails_is_an_error_with_its_cause_never_a_non_trigger(
    fake_cli: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, mode: str, cause: str
) -> None:
    script, _report = fake_cli
    with cli_backend(script, monkeypatch, mode, timeout=20) as backend:
        outcome = backend.run(CONTEXT, "merge these pdfs")
    assert outcome.status == "error", outcome
    assert cause in (outcome.error or ""), outcome.error


def test_a_read_let_through_is_paid_and_the_next_choice_decides() -> None:
    """A subfolder run lets the Read of its file through: that request's cost, to its final
    output count, is kept, no problem is read into its end, and the next choice decides."""
    read = ['{"file_path": "apps/web/app.py"}']
    lines = lines_of(
        INIT,
        message_start("msg_fake_1"),
        tool_block(0, "Read", read),
        message_end("tool_use"),
        {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result"}]}},
        message_start("msg_fake_2"),
        tool_block(0, "Skill", SKILL_FRAGMENTS),
        message_end("tool_use"),
    )
    verdict = read_stream(lines, passes="apps/web/app.py")
    alone = read_stream(lines_of(INIT, message_start(), tool_block(0, "Skill", SKILL_FRAGMENTS)))
    assert verdict.chosen == "skill:pdf-tools" and verdict.last_problem is None
    assert verdict.requests == 2
    assert verdict.usage.output_tokens == 97 + alone.usage.output_tokens
    assert verdict.usage.input_tokens == 2 * alone.usage.input_tokens
