"""One CLI process, run until the model has chosen: its output read as it is written, the
whole process group killed at the decision or at the timeout, stderr kept for the message."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

from pytest_skilltrigger.backends.claude_code.process import CliCall, run_until_decided

SKILL_CALL = [
    {"type": "system", "subtype": "init", "skills": ["pdf"], "model": "m"},
    {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Skill", "input": {"skill": "pdf"}}]},
    },
]


def fake_cli(tmp_path: Path, body: str) -> list[str]:
    """A stand-in CLI: a Python script that echoes its stdin to a file, then runs ``body``."""
    script = tmp_path / "cli.py"
    script.write_text(
        "import json, os, subprocess, sys, time\n"
        f"open({str(tmp_path / 'stdin.txt')!r}, 'w').write(sys.stdin.read())\n"
        + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def run(tmp_path: Path, body: str, timeout: float = 10.0):
    started = []
    call = CliCall(fake_cli(tmp_path, body), tmp_path, dict(os.environ), timeout)
    finished = run_until_decided(call, "merge these PDFs", started.append)
    assert len(started) == 1  # the backend could kill it from the start
    return finished


def test_the_decision_stops_the_process_and_its_children_at_once(tmp_path: Path) -> None:
    lines = "".join(json.dumps(line) + "\n" for line in SKILL_CALL)
    body = f"""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open({str(tmp_path / "child.pid")!r}, 'w').write(str(child.pid))
    sys.stdout.write({lines!r}); sys.stdout.flush()
    time.sleep(60)
    """
    began = time.monotonic()
    finished = run(tmp_path, body)
    assert time.monotonic() - began < 10
    assert finished.verdict.chosen == "skill:pdf" and finished.verdict.skills == ("pdf",)
    assert not finished.timed_out
    assert (tmp_path / "stdin.txt").read_text() == "merge these PDFs"  # given on stdin
    child = int((tmp_path / "child.pid").read_text())
    for _ in range(50):  # the group was killed: the child is gone (or a zombie of init)
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        status = Path(f"/proc/{child}/status").read_text()
        assert "zombie" in status


def test_a_process_that_hangs_is_killed_at_the_timeout(tmp_path: Path) -> None:
    finished = run(tmp_path, "time.sleep(60)\n", timeout=1.0)
    assert finished.timed_out and finished.verdict.undecided
    assert finished.verdict.chosen is None


def test_a_crash_keeps_its_exit_code_and_the_end_of_its_stderr(tmp_path: Path) -> None:
    body = """
    for n in range(30):
        print(f"line {n}", file=sys.stderr)
    sys.exit(3)
    """
    finished = run(tmp_path, body)
    assert finished.returncode == 3 and not finished.timed_out
    assert finished.verdict.undecided
    assert finished.stderr_tail.splitlines() == [f"line {n}" for n in range(10, 30)]
