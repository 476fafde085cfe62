"""Paths: containment, and where skills may be found, shared by the pytest layer's
selection and the skill catalog (cheap: the pytest layer asks before any skill is read)."""

from __future__ import annotations

import os
from collections.abc import Iterator

SKILL_FILE = "SKILL.md"
# Folders never searched for skills: tooling and dependencies, not the user's skills.
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})


def within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def searched(folder: str, name: str) -> bool:
    """Whether the folder ``name`` inside ``folder`` is searched for skills: not hidden (but
    ``.claude``, where a project keeps its skills, and in it only ``skills``), not a
    virtualenv (whatever its name) and not tooling."""
    path = os.path.join(folder, name)
    if os.path.basename(folder) == ".claude":
        return name == "skills" and os.path.isdir(path)
    return (
        (not name.startswith(".") or name == ".claude")
        and name not in SKIPPED_FOLDERS
        and os.path.isdir(path)
        and not os.path.isfile(os.path.join(path, "pyvenv.cfg"))
    )


def skill_folders(root: str) -> Iterator[str]:
    """The folders below ``root`` that hold a SKILL.md, depth first, sorted by name; not
    into a skill's own folders. Raises OSError for a folder that cannot be listed."""
    for name in sorted(os.listdir(root)):
        if not searched(root, name):
            continue
        folder = os.path.join(root, name)
        if os.path.isfile(os.path.join(folder, SKILL_FILE)):
            yield folder  # a skill: its own folders are its resources
        else:
            yield from skill_folders(folder)


def holds_skills(path: str) -> bool:
    """Whether ``path`` is a SKILL.md, a skill's folder, or a folder with a skill below it
    (what a path given to pytest must be for its skills to be collected)."""
    if os.path.isfile(path):
        return os.path.basename(path) == SKILL_FILE
    if not os.path.isdir(path):
        return False
    if os.path.isfile(os.path.join(path, SKILL_FILE)):
        return True
    try:
        return next(skill_folders(path), None) is not None
    except OSError:
        return False
