"""The claude-code backend's load on the machine: each CLI run's peak memory is read before
it is stopped (what the governor counts one more process at), and a session says what its
runs in flight started at and why, then how many were in flight on average.

The session test drives the real pinned CLI against the fake Messages API (slow: each CLI
start costs about a second of CPU); the memory test a stand-in CLI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.claude_code.process import CliCall, WarmCli
from pytest_skilltrigger.backends.claude_code.workspace import skill_file
from pytest_skilltrigger.support.machine import PeakMemory
from tests.backends.test_claude_code_cli import DESCRIPTION, SKILL, claude_bin  # noqa: F401
from tests.fake_messages_api import FakeMessagesAPI

HELD = 64 * 1024 * 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_runs_peak_memory_is_read_after_its_query(tmp_path: Path) -> None:
    """A stand-in CLI that touches memory, then decides and settles: the peak it reached is
    the run's, and the largest of the process's CLI runs."""
    init = {"type": "system", "subtype": "init", "skills": ["pdf"], "model": "m"}
    result = {"type": "result", "subtype": "success"}
    rewound = {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": "ID", "response": {"rewound": True}},
    }
    script = tmp_path / "cli.py"
    script.write_text(
        "import json, sys\n"
        f"held = bytearray({HELD})\n"
        "for i in range(0, len(held), 4096):\n"
        "    held[i] = 1\n"
        "del held\n"  # the peak stays what it was
        "for line in sys.stdin:\n"
        "    msg = json.loads(line)\n"
        "    if msg['type'] == 'user':\n"
        f"        print(json.dumps({init!r})); print(json.dumps({result!r}))\n"
        "    else:\n"
        f"        print(json.dumps({rewound!r}).replace('ID', msg['request_id']))\n"
        "    sys.stdout.flush()\n"
    )
    memory = PeakMemory()
    call = CliCall([sys.executable, str(script)], tmp_path, dict(os.environ), 30.0)
    cli = WarmCli(call, memory=memory)
    try:
        finished = cli.ask("merge these PDFs")
    finally:
        cli.stop()
    assert finished.verdict.chosen == "text"
    assert finished.peak_rss is not None and finished.peak_rss > HELD
    assert memory.largest is not None and memory.largest >= finished.peak_rss


def run_session(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, cli: str, *args: str
) -> pytest.RunResult:
    """Four items of two runs each through the real CLI, the runs waiting on the API as
    real ones do."""
    fake_api.latency = 0.5
    folder = pytester.path / "skills" / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, DESCRIPTION), encoding="utf-8")
    rows = [(f"merge the pdf reports of week {n}", n % 2 == 0) for n in range(4)]
    evals = [{"query": q, "should_trigger": s} for q, s in rows]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals), encoding="utf-8")
    for query, should in rows:
        fake_api.script(query, [f"skill:{SKILL}" if should else "text"])
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={folder}",
        "--trigger-backend=claude-code",
        f"--trigger-claude-bin={cli}",
        "--trigger-confidence=off",
        "--trigger-runs=2",
        "--trigger-no-early-stop",
        "--trigger-cache=off",
        "--trigger-timeout=90",
        *args,
        timeout=240,
    )
    result.assert_outcomes(passed=4)
    assert fake_api.stats["calls"] == 8
    return result


@pytest.mark.slow
def test_a_session_says_how_many_cli_runs_it_kept_in_flight(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811
) -> None:
    """The header says where the runs in flight start and why, the summary how many were in
    flight on average and the most memory a CLI process held."""
    result = run_session(pytester, fake_api, claude_bin)
    result.stdout.fnmatch_lines(
        [
            "skilltrigger: claude-code: runs in flight start at * (the CPU count) and grow "
            "while the CPU has room (up to *); memory holds about * CLI processes (* MB each, "
            "until one is measured)",
            "*skill trigger summary*",
            "skilltrigger: claude-code: * runs in flight on average, * at most (the limit *); "
            "a CLI process held at most * MB",
        ]
    )


@pytest.mark.slow
def test_under_xdist_the_workers_runs_in_flight_reach_the_summary_and_the_json(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811
) -> None:
    """The workers make the runs: each tells the controller its figures, which the summary
    and the JSON give added up."""
    report = pytester.path / "report.json"
    result = run_session(pytester, fake_api, claude_bin, "-n", "2", f"--trigger-json={report}")
    result.stdout.fnmatch_lines(
        [
            "*skill trigger summary*",
            "skilltrigger: claude-code: * runs in flight on average over 2 workers, * at most*"
            "a CLI process held at most * MB",
        ]
    )
    load = json.loads(report.read_text(encoding="utf-8"))["concurrency"]
    assert load["processes"] == 2 and load["backend"] == "claude-code"
    assert 1 <= load["most_in_flight"] <= 8 and load["average_in_flight"] > 0
    assert load["process_peak_rss_bytes"] > 0
