"""Atomic file writes: every file the plugin writes goes through here.

A reader (a browser reloading the HTML report, CI picking up the JSON, the user's editor
holding SKILL.md) must only ever see the old file or the complete new one, and an
interrupted run must not leave a half-written file or a temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.

    The temporary file lives beside the target so that ``os.replace`` is a rename on one file
    system (atomic on POSIX and Windows). It is removed on any failure, including
    KeyboardInterrupt, so nothing is left behind.
    """
    # write through a symbolic link (as an editor would) instead of replacing the link itself
    target = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(target).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".", suffix=".skilltrigger.tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Encode ``text`` and write it atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode(encoding))
