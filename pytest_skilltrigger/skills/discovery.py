"""Finding the skills below a path, as pytest finds tests."""

from __future__ import annotations

import os

from pytest_skilltrigger.skills.skill import SKILL_FILE, Skill, read_skill
from pytest_skilltrigger.support.errors import InputError

# Folders never searched for skills: tooling and dependencies, not the user's skills.
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})


def discover_skills(path: str | os.PathLike[str]) -> list[Skill]:
    """Skills at ``path``: the skill folder itself, or every folder below it holding SKILL.md.

    The search goes to any depth, as pytest looks for tests (``plugins/*/skills/*`` works),
    but not into a skill's own folders, hidden folders, virtualenvs or ``node_modules``.
    Folders are visited sorted by name so that runs and reports are reproducible. A path to
    a SKILL.md file is accepted as its folder, since that is what users tab-complete to.
    """
    root = os.path.abspath(os.fspath(path))
    if not os.path.exists(root):
        raise InputError(root, "path does not exist")
    if os.path.isfile(root):
        if os.path.basename(root) == SKILL_FILE:
            return [read_skill(os.path.dirname(root))]
        raise InputError(root, "is a file, not a skill folder or a folder of skills")
    if os.path.isfile(os.path.join(root, SKILL_FILE)):
        return [read_skill(root)]
    skills = [read_skill(folder) for folder in _skill_folders(root)]
    if not skills:
        raise InputError(root, "holds no skill (no SKILL.md in it or in any folder below it)")
    return skills


def _skill_folders(root: str) -> list[str]:
    """The folders below ``root`` that hold a SKILL.md, depth first, sorted by name."""
    try:
        names = sorted(os.listdir(root))
    except OSError as exc:
        raise InputError(root, f"cannot be listed ({exc.strerror or exc})") from None
    found: list[str] = []
    for name in names:
        folder = os.path.join(root, name)
        if name.startswith(".") or name in SKIPPED_FOLDERS or not os.path.isdir(folder):
            continue
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            continue  # a virtualenv, whatever its name
        if os.path.isfile(os.path.join(folder, SKILL_FILE)):
            found.append(folder)  # a skill: its own folders are its resources
        else:
            found += _skill_folders(folder)
    return found
