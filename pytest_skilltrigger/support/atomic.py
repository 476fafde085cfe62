"""Atomic file writes: every file the plugin writes goes through here.

A reader (a browser reloading the HTML report, CI picking up the JSON, the user's editor
holding SKILL.md) must only ever see the old file or the complete new one, and an
interrupted run must not leave a half-written file or a temporary file behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

from pytest_skilltrigger.support.interrupts import interrupts_deferred


def atomic_write_bytes(
    path: str | os.PathLike[str], data: bytes, *, overwrite: bool = True
) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename.

    The temporary file lives beside the target so that ``os.replace`` is a rename on one file
    system (atomic on POSIX and Windows). It is removed on any failure, and
    Ctrl-C or SIGTERM is held until the file is written or removed
    (:func:`~pytest_skilltrigger.support.interrupts.interrupts_deferred`), so nothing is left
    behind. With ``overwrite=False`` the file is linked into place instead, which fails with
    FileExistsError when ``path`` exists, even if it appeared a moment ago: a file the user
    made is never replaced.
    """
    # write through a symbolic link (as an editor would) instead of replacing the link itself
    target = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(target)
    os.makedirs(folder, exist_ok=True)
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = os.stat(target).st_mode & 0o7777
    with interrupts_deferred():
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".skilltrigger.tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            # a replaced file keeps its mode; a new one gets what the user's umask allows, as
            # any other program's new file would (mkstemp alone would leave it 0600)
            os.chmod(tmp, mode if mode is not None else 0o666 & ~current_umask())
            if overwrite:
                os.replace(tmp, target)
            else:
                os.link(tmp, target)
                os.unlink(tmp)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise


def atomic_write_text(
    path: str | os.PathLike[str], text: str, encoding: str = "utf-8", *, overwrite: bool = True
) -> None:
    """Encode ``text`` and write it atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode(encoding), overwrite=overwrite)


def current_umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_problem(path: str | os.PathLike[str], *, folder: bool = False) -> str | None:
    """Why ``path`` could not be written (a file, or with ``folder`` a folder to write into),
    or None when it could. Nothing is created: the nearest existing ancestor must be a folder
    this process may create entries in, and an existing path must be of the right kind and
    writable."""
    target = os.path.abspath(os.fspath(path))
    if os.path.exists(target):
        if folder and not os.path.isdir(target):
            return "exists and is not a folder"
        if not folder and os.path.isdir(target):
            return "is a folder, not a file"
        if not os.access(target, os.W_OK | (os.X_OK if folder else 0)):
            return "is not writable"
        if not folder and not os.access(os.path.dirname(target), os.W_OK | os.X_OK):
            return f"its folder {os.path.dirname(target)} is not writable"
        return None
    probe = os.path.dirname(target)
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        return f"cannot be created: {probe} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"cannot be created: {probe} is not writable"
    return None
