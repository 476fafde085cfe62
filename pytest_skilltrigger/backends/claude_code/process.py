"""Controlling a CLI process: reading its lines as written, and stopping it with all it
started."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from typing import IO

KILL_GRACE = 0.3  # SIGTERM first (it tidies up), but a decided run must not wait long


def read_lines(stream: IO[str]) -> Iterator[str]:
    """Lines as the CLI writes them (``readline`` does not read ahead like iteration may)."""
    while True:
        line = stream.readline()
        if not line:
            return
        yield line


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Stop the CLI and anything it started: SIGTERM to its group, SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            proc.kill()
        else:
            killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE)
                return
            except subprocess.TimeoutExpired:
                killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
