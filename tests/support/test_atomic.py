"""Atomic writes: a reader sees the old file or the whole new one, a failed or interrupted
write leaves the old file and no temporary file, a replaced file keeps its mode and a new one
gets the user's umask, a symbolic link stays a link; write_problem says why a path cannot be
written without creating anything."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skilltrigger.support import atomic
from pytest_skilltrigger.support.atomic import (
    atomic_write_bytes,
    atomic_write_text,
    current_umask,
    write_problem,
)
from tests.helpers import interruptible

as_root = os.geteuid() == 0 if hasattr(os, "geteuid") else False


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_file_is_written_whole_in_missing_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "report.json"
    atomic_write_bytes(target, b"\x00{}\xff")
    assert target.read_bytes() == b"\x00{}\xff"
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.json"]


def test_text_is_encoded_with_the_given_encoding(tmp_path: Path) -> None:
    target = tmp_path / "SKILL.md"
    atomic_write_text(target, "déjà vu")
    assert target.read_bytes() == "déjà vu".encode()
    atomic_write_text(target, "déjà vu", encoding="latin-1")
    assert target.read_bytes() == "déjà vu".encode("latin-1")


def test_an_existing_file_is_replaced_not_appended_to(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("a much longer old content than the new one")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


@pytest.mark.parametrize("failing", ["fsync", "replace"])
@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, error: BaseException
) -> None:
    target = tmp_path / "SKILL.md"
    target.write_text("old")

    def fail(*args: object) -> None:
        raise error

    monkeypatch.setattr(atomic.os, failing, fail)
    with pytest.raises(type(error)):
        atomic_write_text(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["SKILL.md"]


def test_a_failed_first_write_creates_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object) -> None:
        raise OSError("no room")

    monkeypatch.setattr(atomic.os, "replace", fail)
    with pytest.raises(OSError, match="no room"):
        atomic_write_text(tmp_path / "new.json", "{}")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_a_replaced_file_keeps_its_mode(tmp_path: Path, umask_027: None) -> None:
    target = tmp_path / "run.sh"
    target.write_text("old")
    target.chmod(0o751)
    atomic_write_text(target, "new")
    assert mode(target) == 0o751 and target.read_text() == "new"


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_a_new_file_gets_what_the_umask_allows(tmp_path: Path, mask: int, expected: int) -> None:
    old = os.umask(mask)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
    finally:
        os.umask(old)
    assert mode(tmp_path / "new.txt") == expected  # not mkstemp's 0600 (unless asked)


def test_current_umask_reads_without_changing_it(umask_027: None) -> None:
    assert current_umask() == 0o027
    assert current_umask() == 0o027  # reading set it straight back


def test_atomic_write_keeps_a_symlinked_file_a_symlink(tmp_path: Path) -> None:
    from pytest_skilltrigger.support.atomic import atomic_write_text

    real = tmp_path / "shared" / "SKILL.md"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "SKILL.md"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["SKILL.md"]


def test_a_symlinked_file_keeps_the_mode_of_the_file_it_points_to(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    real.chmod(0o600)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and mode(real) == 0o600 and real.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_write_problem_accepts_new_and_existing_paths_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    assert write_problem(tmp_path / "file.txt") is None
    assert write_problem(tmp_path / "deep" / "er" / "new.json") is None
    assert write_problem(tmp_path / "deep" / "results", folder=True) is None
    assert write_problem(tmp_path, folder=True) is None
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_write_problem_names_the_wrong_kind_of_path(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    assert write_problem(tmp_path) == "is a folder, not a file"
    assert write_problem(blocker, folder=True) == "exists and is not a folder"
    assert write_problem(blocker / "sub" / "r.json") == (
        f"cannot be created: {blocker} is a file, not a folder"
    )
    assert write_problem(blocker / "results", folder=True) == (
        f"cannot be created: {blocker} is a file, not a folder"
    )


NOBODY = 65534  # the unprivileged user root checks modes as (root itself may write anywhere)

WRITE_PROBLEMS = """
import json, sys
from pytest_skilltrigger.support.atomic import write_problem
root = sys.argv[1]
print(json.dumps([
    write_problem(f"{root}/read-only.txt"),
    write_problem(f"{root}/locked/file.txt"),
    write_problem(f"{root}/locked/new/r.json"),
    write_problem(f"{root}/locked", folder=True),
]))
"""


def test_write_problem_names_what_is_not_writable(tmp_path: Path) -> None:
    """Modes decide for an ordinary user; run as root (CI), the check runs as ``nobody`` in
    a folder ``nobody`` can reach, so it is made there too rather than skipped."""
    import json
    import shutil
    import subprocess
    import sys
    import tempfile

    base = Path(tempfile.mkdtemp(dir="/tmp")) if as_root else tmp_path
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir()
        (locked / "file.txt").write_text("x")
        read_only = base / "read-only.txt"
        read_only.write_text("x")
        read_only.chmod(0o444)
        if as_root:  # the user's own files, in a folder of root's it may not write
            os.chown(read_only, NOBODY, NOBODY)
            os.chown(locked / "file.txt", NOBODY, NOBODY)
        locked.chmod(0o555)
        python, env = sys.executable, None
        if as_root:  # (the virtualenv's interpreter may sit under root's home: a system one)
            python = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or ""
            if not python:
                pytest.skip("running as root with no system python3 for the nobody user")
            env = {"PYTHONPATH": str(Path(atomic.__file__).resolve().parents[2])}
        done = subprocess.run(
            [python, "-c", WRITE_PROBLEMS, str(base)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            user=NOBODY if as_root else None,
            cwd="/",
            env=env,
        )
        if (
            as_root
            and done.returncode
            and "Error: " in done.stderr
            and ("No module named" in done.stderr or "Permission denied" in done.stderr)
        ):
            pytest.skip(f"the nobody user cannot read this checkout: {done.stderr[-200:]}")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [
            "is not writable",
            f"its folder {locked} is not writable",
            f"cannot be created: {locked} is not writable",
            "is not writable",
        ]
    finally:
        (base / "locked").chmod(0o755)
        if as_root:
            shutil.rmtree(base, ignore_errors=True)


CHILD = """
import os, sys
from pytest_skilltrigger.support.atomic import atomic_write_text

folder, stop = sys.argv[1], os.path.join(sys.argv[1], "STOP")
data = "x" * 4000
print("ready", flush=True)
done = False
while not done:
    try:  # two levels: an interrupt may also land in the inner handler
        try:
            while not os.path.exists(stop):
                atomic_write_text(os.path.join(folder, "out.json"), data)
            done = True
        except KeyboardInterrupt:
            pass
    except KeyboardInterrupt:
        pass
"""


def test_interrupts_at_random_points_never_leave_a_temporary_file(tmp_path: Path) -> None:
    """Thousands of Ctrl-Cs at random moments of a loop of atomic writes: whatever bytecode
    each one lands on (inside mkstemp, between it and the clean-up, inside the clean-up), no
    temporary file is left and the file is always whole. Without holding the signal for the
    write this leaves temporary files within a few thousand interrupts."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        rng = random.Random(7)
        for _ in range(3000):
            time.sleep(rng.uniform(0, 0.002))
            child.send_signal(signal.SIGINT)
        (tmp_path / "STOP").touch()
        child.communicate(timeout=60)
    finally:
        child.kill()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["STOP", "out.json"]
    assert (tmp_path / "out.json").read_text() == "x" * 4000
