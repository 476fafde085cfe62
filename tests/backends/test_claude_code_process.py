"""One CLI process answering one query after another: each query given as a stream-json user
message, the output read as it is written up to the decision, the turn ended (an interrupt
when a tool call is still running) and the conversation rewound; a process that hangs,
crashes or does not settle is killed with all it started, its stderr kept for the message.

A stand-in CLI (a Python script speaking the same stream-json lines) plays each behaviour;
the real CLI's side of the protocol is held in ``tests/backends/test_claude_code_cli.py``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.claude_code import process
from pytest_skilltrigger.backends.claude_code.process import CliCall, WarmCli
from pytest_skilltrigger.support.machine import PeakMemory

# The stand-in: for each user message it writes ``decide(query)``'s lines; it answers an
# interrupt with the turn's result and a rewind with ``REWOUND``; everything it reads goes
# to ``stdin.jsonl``. ``body`` (run first) may redefine any of these.
STAND_IN = """
import json, os, subprocess, sys, time
LOG = open({log!r}, "a")
INIT = {{"type": "system", "subtype": "init", "skills": ["pdf"], "model": "m"}}
REWOUND = True
# the turn's result: what the CLI counted, more than the stream showed at the decision
INTERRUPTED = {{"type": "result", "subtype": "error_during_execution",
    "usage": {{"output_tokens": 42}}}}

def out(*lines):
    for line in lines:
        sys.stdout.write(json.dumps(line) + "\\n")
    sys.stdout.flush()

def decide(query):
    if "pdf" in query.lower():  # a tool call: the turn goes on until interrupted
        return [INIT, {{"type": "assistant", "message": {{"content": [
            {{"type": "tool_use", "name": "Skill", "input": {{"skill": "pdf"}}}}]}}}}]
    return [INIT, {{"type": "result", "subtype": "success", "usage": {{"output_tokens": 3}}}}]

def answer(request_id, **response):
    out({{"type": "control_response", "response": {{
        "subtype": "success", "request_id": request_id, "response": response}}}})

{body}

for line in sys.stdin:
    LOG.write(line); LOG.flush()
    msg = json.loads(line)
    if msg["type"] == "user":
        out(*decide(msg["message"]["content"]))
    elif msg["request"]["subtype"] == "interrupt":
        out(INTERRUPTED)
        answer(msg["request_id"])
    elif msg["request"]["subtype"] == "rewind_conversation":
        answer(msg["request_id"], rewound=REWOUND)
"""


def stand_in(tmp_path: Path, body: str = "", timeout: float = 10.0) -> WarmCli:
    script = tmp_path / "cli.py"
    log = str(tmp_path / "stdin.jsonl")
    script.write_text(STAND_IN.format(log=log, body=textwrap.dedent(body)))
    call = CliCall([sys.executable, str(script)], tmp_path, dict(os.environ), timeout)
    return WarmCli(call, memory=PeakMemory())


def given(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "stdin.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (or is a zombie of init), waiting a moment for it."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return "zombie" in Path(f"/proc/{pid}/status").read_text()


def test_one_process_answers_queries_one_after_another(tmp_path: Path) -> None:
    """A tool call is interrupted (the turn still runs), a plain answer is not (its result
    ended the turn); each query is rewound by its own id and the process stays."""
    cli = stand_in(tmp_path)
    try:
        first = cli.ask("merge these PDFs")
        second = cli.ask("what time is it")
        assert first.verdict.chosen == "skill:pdf" and second.verdict.chosen == "text"
        assert first.verdict.usage.output_tokens == 42  # priced at the turn's result
        assert second.verdict.usage.output_tokens == 3
        assert cli.reusable and cli.proc.poll() is None
        assert first.returncode is None and not first.timed_out
    finally:
        cli.stop()
    kinds = [m.get("request", {}).get("subtype", m["type"]) for m in given(tmp_path)]
    assert kinds == ["user", "interrupt", "rewind_conversation", "user", "rewind_conversation"]
    users = [m for m in given(tmp_path) if m["type"] == "user"]
    rewinds = [m for m in given(tmp_path) if m.get("request", {}).get("target_message_uuid")]
    assert [u["message"] for u in users] == [
        {"role": "user", "content": "merge these PDFs"},
        {"role": "user", "content": "what time is it"},
    ]
    assert [r["request"]["target_message_uuid"] for r in rewinds] == [u["uuid"] for u in users]


def test_stop_ends_the_process_and_its_children(tmp_path: Path) -> None:
    body = f"""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open({str(tmp_path / "child.pid")!r}, "w").write(str(child.pid))
    """
    cli = stand_in(tmp_path, body)
    assert cli.ask("merge these PDFs").verdict.chosen == "skill:pdf"
    cli.stop()
    assert not cli.reusable and cli.proc.returncode is not None
    assert gone(int((tmp_path / "child.pid").read_text()))


def test_a_process_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    cli = stand_in(tmp_path, "def decide(query):\n    time.sleep(60)\n", timeout=1.0)
    finished = cli.ask("merge these PDFs")
    assert finished.timed_out and finished.verdict.undecided
    assert finished.verdict.chosen is None
    assert not cli.reusable and cli.proc.returncode is not None


def test_a_crash_keeps_its_exit_code_and_the_end_of_its_stderr(tmp_path: Path) -> None:
    body = """
    def decide(query):
        for n in range(30):
            print(f"line {n}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)
    """
    cli = stand_in(tmp_path, body)
    finished = cli.ask("merge these PDFs")
    assert finished.returncode == 3 and not finished.timed_out
    assert finished.verdict.undecided and not cli.reusable
    assert finished.stderr_tail.splitlines() == [f"line {n}" for n in range(10, 30)]


def test_a_refused_rewind_keeps_the_verdict_and_ends_the_process(tmp_path: Path) -> None:
    """A conversation that could not be taken back would show in the next query: the
    process takes none."""
    cli = stand_in(tmp_path, "REWOUND = False\n")
    finished = cli.ask("what time is it")
    assert finished.verdict.chosen == "text" and not finished.timed_out
    assert not cli.reusable and cli.proc.returncode is not None


def test_a_process_that_does_not_settle_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "SETTLE_TIMEOUT", 1.0)
    cli = stand_in(tmp_path, "def answer(request_id, **response):\n    time.sleep(60)\n")
    finished = cli.ask("what time is it")
    assert finished.verdict.chosen == "text" and not finished.timed_out
    # killed, not waited for through its minute of sleep
    assert not cli.reusable and cli.proc.returncode is not None and cli.proc.returncode < 0


def test_a_result_the_interrupt_adds_is_not_read_as_the_next_query(tmp_path: Path) -> None:
    """The turn ended by itself before the interrupt came, and the interrupt makes one more
    ``result`` (success, no tool): it belongs to the query before, never to the next."""
    body = """
    def decide(query):
        if "pdf" in query.lower():
            return [INIT, {"type": "assistant", "message": {"content": [
                {"type": "tool_use", "name": "Skill", "input": {"skill": "pdf"}}]}},
                {"type": "result", "subtype": "error_max_turns"}]
        return [INIT, {"type": "assistant", "message": {"content": [
            {"type": "tool_use", "name": "Bash", "input": {"command": "date"}}]}}]
    INTERRUPTED = {"type": "result", "subtype": "success", "usage": {}}
    """
    cli = stand_in(tmp_path, body)
    try:
        assert cli.ask("merge these PDFs").verdict.chosen == "skill:pdf"
        assert cli.ask("what time is it").verdict.chosen == "tool:Bash"
        assert cli.reusable
    finally:
        cli.stop()
