"""Skills of a monorepo's subfolder (``<folder>/.claude/skills`` below the project root), and
how a session reaches them.

The pinned CLI does not list such a skill when the session starts at the project root: it
finds it when the model reads a file under the folder, and announces it then (see
:class:`~pytest_skilltrigger.model.context.Subfolder`). So a subfolder's skill is tested
after a Read of a file there, or (``--trigger-cwd``) in a session started in its folder.
The project root is the nearest folder above the skill's folder that holds ``.git``: where
a user of a monorepo starts Claude Code; in a checkout without one (an unpacked archive, a CI
cache), pytest's rootdir when it lies above the folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import PurePath

from pytest_skilltrigger.model.context import Subfolder
from pytest_skilltrigger.skills.neighbours import folder_skills
from pytest_skilltrigger.skills.skill import Skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKIPPED_FOLDERS

# how much of the file read the Read result shows (lines, characters)
READ_LINES, READ_CHARS = 200, 4000


def scope_folder(skill_path: str) -> str | None:
    """The folder whose ``.claude/skills`` holds the skill, None for a skill kept elsewhere
    (a plugin's, a folder of skills given directly)."""
    parent = os.path.dirname(skill_path)
    claude = os.path.dirname(parent)
    if os.path.basename(parent) != "skills" or os.path.basename(claude) != ".claude":
        return None
    return os.path.dirname(claude)


def project_root(folder: str, rootdir: str | None = None) -> str | None:
    """The project root above ``folder``: the nearest folder strictly above it holding
    ``.git``, else ``rootdir`` when it lies strictly above it; None when ``folder`` is a
    root itself or no folder above it is one."""
    if os.path.exists(os.path.join(folder, ".git")):
        return None
    at = os.path.dirname(folder)
    while at != os.path.dirname(at):
        if os.path.exists(os.path.join(at, ".git")):
            return at
        at = os.path.dirname(at)
    if rootdir is not None and folder.startswith(rootdir.rstrip(os.sep) + os.sep):
        return rootdir
    return None


def rootdir_notes(skills: list[Skill], rootdir: str | None) -> list[str]:
    """One line for the header naming the subfolders whose project root is pytest's
    rootdir because no folder above them holds ``.git``."""
    folders = sorted(
        {
            scope
            for skill in skills
            if (scope := scope_folder(skill.path)) is not None
            and project_root(scope) is None
            and project_root(scope, rootdir) is not None
        }
    )
    if not folders or rootdir is None:
        return []
    shown = ", ".join(PurePath(os.path.relpath(f, rootdir)).as_posix() for f in folders)
    return [
        f"no .git above {shown}: its project root is pytest's rootdir ({rootdir}), where the "
        "session starts"
    ]


def check_cwd(cwd: str, skills: list[Skill], rootdir: str | None = None) -> str:
    """The ``--trigger-cwd`` folder, absolute, once it is known to be a subfolder of a
    project holding some of the session's skills; InputError naming it otherwise."""
    folder = os.path.abspath(cwd)
    if not os.path.isdir(folder):
        raise InputError(folder, "--trigger-cwd: not a folder")
    if project_root(folder, rootdir) is None:
        raise InputError(
            folder,
            "--trigger-cwd: outside the project (no folder above it holds .git, and it is "
            "not below pytest's rootdir), or its root",
        )
    if not any(scope_folder(s.path) == folder for s in skills):
        raise InputError(
            folder, "--trigger-cwd: none of the collected skills is in .claude/skills here"
        )
    return folder


def subfolder_of(
    skill: Skill,
    read: Callable[[str], Skill],
    cwd: str | None = None,
    rootdir: str | None = None,
) -> Subfolder | None:
    """Where ``skill`` is offered when it lives in a subfolder of a project (None for a
    skill of the project root, a plugin's, or one outside any project): after a Read of a
    file there, or in a session started there when that folder is ``cwd``."""
    scope = scope_folder(skill.path)
    root = project_root(scope, rootdir) if scope is not None else None
    if scope is None or root is None:
        return None
    folder = PurePath(os.path.relpath(scope, root)).as_posix()
    root_skills = tuple(folder_skills(os.path.join(root, ".claude", "skills"), read, ()))
    if cwd is not None and cwd == scope:
        return Subfolder(folder, started_in=True, root_skills=root_skills)
    path = next(_files(scope), None)
    if path is None:
        raise InputError(
            scope,
            "holds no file to read: the CLI finds this folder's skills when the model reads a "
            "file in it (add one, or test it with --trigger-cwd)",
        )
    relative = PurePath(os.path.relpath(path, root)).as_posix()
    return Subfolder(folder, relative, read_result(path), root_skills=root_skills)


def _files(folder: str) -> Iterator[str]:
    """The files below ``folder`` a model might read, sorted, not in hidden folders."""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.startswith(".") or name in SKIPPED_FOLDERS:
            continue
        if os.path.isfile(path):
            yield path
        elif os.path.isdir(path):
            yield from _files(path)


def read_result(path: str) -> str:
    """A file as the Read tool returns it: numbered lines, a tab after each number (only
    the first lines of a long file)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(READ_CHARS)
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    lines = text.split("\n")[:READ_LINES]
    return "\n".join(f"{number}\t{line}" for number, line in enumerate(lines, 1))
