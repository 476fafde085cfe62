"""Writing to the user's skill folder: an improved description back into SKILL.md (or
refusing to), and a drafted eval set beside it (never over an existing file).

Apart from :mod:`.rewrite` (text in, text out, used wherever a description is shown in a
skill's file, such as a Claude Code workspace) so that the one module that changes the
user's SKILL.md on disk is small and reached only from the controller.
"""

from __future__ import annotations

import os

from pytest_skilltrigger.skills.drafted_set import DraftedEntry, drafted_json
from pytest_skilltrigger.skills.frontmatter import decode_skill_md
from pytest_skilltrigger.skills.rewrite import replace_description
from pytest_skilltrigger.support.atomic import atomic_write_bytes, atomic_write_text
from pytest_skilltrigger.support.errors import InputError


class FileChangedError(Exception):
    """SKILL.md changed on disk since it was read: the user's edit wins, nothing is written."""

    def __init__(self, path: str) -> None:
        self.path = path
        super().__init__(
            f"{path}: changed on disk since it was read; not overwriting it "
            "(re-run to improve the new version)"
        )


def write_description(skill_md: str, new_description: str, expected_raw: bytes) -> None:
    """Replace the description in ``skill_md`` on disk, atomically.

    Refuses (FileChangedError) when the file's bytes differ from ``expected_raw``: the user
    edited it during the run, and their edit must not be lost. Nothing is written on any error.
    """
    path = os.fspath(skill_md)
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise FileChangedError(path) from None
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if raw != expected_raw:
        raise FileChangedError(path)
    text = decode_skill_md(raw, path)
    new_text = replace_description(text, new_description, path)
    atomic_write_bytes(path, new_text.encode("utf-8"))


def write_drafted_set(path: str, entries: list[DraftedEntry]) -> bool:
    """Write a drafted eval set to ``path`` unless a file is there already (False then: an
    eval set the user has, or made meanwhile, is never replaced)."""
    try:
        atomic_write_text(path, drafted_json(entries), overwrite=False)
    except FileExistsError:
        return False
    return True
