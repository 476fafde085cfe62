"""Finding the skills below a path, as pytest finds tests."""

from __future__ import annotations

import os

from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE, skill_folders


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
        return list(skill_folders(root))
    except OSError as exc:
        where = str(exc.filename or root)
        raise InputError(where, f"cannot be listed ({exc.strerror or exc})") from None
