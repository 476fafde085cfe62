"""Controlling a CLI process: reading its lines as written, and stopping it with all it
started."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from typing import IO

KILL_GRACE = 0.3  # how long to wait for a killed process to be reaped


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
