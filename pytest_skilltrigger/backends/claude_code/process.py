"""Controlling a CLI process: reading its lines as written, and stopping it with all it
started."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pytest_skilltrigger.backends.claude_code.stream import CliVerdict, read_stream
from pytest_skilltrigger.support.machine import PeakMemory, peak_rss

KILL_GRACE = 0.3  # how long to wait for a killed process to be reaped
STDERR_LINES = 20

#: the peak memory of the CLI processes this Python process ran, each read just before it is
#: stopped: what the governor of the runs in flight counts one more CLI process at
cli_memory = PeakMemory()


@dataclass(frozen=True)
class CliCall:
    """One start of the CLI: its arguments, its folder, its environment, and the longest it
    may take."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float


@dataclass(frozen=True)
class Finished:
    """How one CLI run ended: what its output said, its exit code, whether the watchdog
    killed it, the last lines of its stderr (for an error's message), and the most memory it
    held (None: not known, e.g. it ended before it was stopped, or there is no ``/proc``)."""

    verdict: CliVerdict
    returncode: int | None
    timed_out: bool
    stderr_tail: str
    peak_rss: int | None = None


def run_until_decided(
    call: CliCall, query: str, started: Callable[[subprocess.Popen[str]], None]
) -> Finished:
    """Start the CLI in its own process group, give it ``query`` on stdin (an argument
    starting with "-" would read as an option), read its output until the first decision,
    then kill the group at once. ``started`` is told the process as soon as it exists (the
    backend's close() must be able to kill it); a watchdog kills it after ``timeout``."""
    proc = subprocess.Popen(
        call.command,
        cwd=call.cwd,
        env=call.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        start_new_session=True,
    )
    started(proc)
    assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
    stderr = proc.stderr
    err_reader = threading.Thread(
        target=lambda: tail.extend(read_lines(stderr)), name="claude-code-stderr", daemon=True
    )
    err_reader.start()
    timed_out = threading.Event()

    def on_timeout() -> None:
        timed_out.set()
        kill_group(proc)

    watchdog = threading.Timer(call.timeout, on_timeout)
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            proc.stdin.write(query)
            proc.stdin.close()
        except OSError:
            pass  # it died at once; stdout and stderr say why
        verdict = read_stream(read_lines(proc.stdout))
    finally:
        watchdog.cancel()
        # read while it runs: once reaped, its pid may name another process
        peak = peak_rss(proc.pid) if proc.poll() is None else None
        kill_group(proc)
        try:
            proc.wait(KILL_GRACE * 5)
        except subprocess.TimeoutExpired:
            pass
        err_reader.join(KILL_GRACE)
        proc.stdout.close()
    stderr_tail = "\n".join(line.rstrip() for line in tail if line.strip())
    cli_memory.record(peak)
    return Finished(verdict, proc.returncode, timed_out.is_set(), stderr_tail, peak)


def read_lines(stream: IO[str]) -> Iterator[str]:
    """Lines as the CLI writes them (``readline`` does not read ahead like iteration may)."""
    while True:
        line = stream.readline()
        if not line:
            return
        yield line


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Stop the CLI and everything it started at once (SIGKILL to its process group).

    Not SIGTERM first: a run decided at a ``Skill`` call is followed within moments by the
    CLI's next request, which a grace period lets it send (and the user pay for).
    """
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            proc.kill()
        else:
            killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
