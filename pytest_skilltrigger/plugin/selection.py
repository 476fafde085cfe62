"""Which skill folders a run collects, and making pytest collect them.

Skills come from ``--trigger-skill-path``, from the ``skill_paths`` ini key and from the paths given
to pytest. ``--trigger-skill-path`` alone collects only those skills; with explicit paths it adds
them. Skills from the ini key join a run without explicit paths (``pytest``) and follow
pytest's own selection otherwise (``pytest tests/test_x.py`` leaves them, ``pytest
skills/pdf`` takes that one). Without the ini key, a path given to pytest that holds skills
collects them, as it collects the tests in it (``pytest skills``, ``pytest
skills/pdf/SKILL.md``); a plain ``pytest`` then collects none, so a project that only has
the plugin installed pays nothing. Only the skills in play are read, so a broken eval set under
``skills/`` does not stop a run that never collects it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pytest_skilltrigger.support.paths import SKILL_FILE, holds_skills, within


@dataclass(frozen=True)
class Selection:
    """The skill paths of a run (absolute): given with ``--trigger-skill-path``, from the ini key
    those the run will collect, and the paths given to pytest that hold skills."""

    given: list[str]
    ini: list[str]
    named: list[str] = dataclasses.field(default_factory=list)

    @property
    def paths(self) -> list[str]:
        found: list[str] = []
        for path in self.given + self.named + self.ini:
            if not any(within(path, seen) for seen in found):
                found.append(path)
        return found


def select(config: pytest.Config, given: list[str], ini: list[str]) -> Selection:
    """The skill paths in play for this command line."""
    in_play = _ini_in_play(config, given, ini)
    named = []
    if explicit(config) and not ini:  # the ini key says where the project's skills are
        for chosen in arg_paths(config.args):
            if any(within(chosen, path) for path in given + in_play):
                continue  # already in play
            if holds_skills(chosen):
                named.append(os.path.dirname(chosen) if os.path.isfile(chosen) else chosen)
    return Selection(given, in_play, named)


def _ini_in_play(config: pytest.Config, given: list[str], ini: list[str]) -> list[str]:
    if not explicit(config):
        return [] if given else ini  # --trigger-skill-path alone collects only those skills
    in_play: list[str] = []
    for chosen in arg_paths(config.args):
        for path in ini:
            if within(path, chosen):  # the argument holds the whole ini folder
                found = path
            elif within(chosen, path):  # the argument is inside it: just that skill
                found = _skill_folder(chosen, path)
            else:
                continue
            if found not in in_play:
                in_play.append(found)
    return in_play


def adjust_args(config: pytest.Config, selection: Selection, files: Sequence[str]) -> None:
    """Add the files of the skills in play (each SKILL.md, each routing set) to pytest's
    arguments where the command line does not name them. ``--trigger-skill-path`` alone collects
    those files and nothing else: a repository's own tests, or a stray ``test_*.py`` in a
    skill's folder, are not collected (name their folder to run them as well)."""
    is_explicit = explicit(config)
    if selection.given:
        args = list(config.args) if is_explicit else []
    elif selection.ini and not is_explicit:
        args = list(config.args)
    else:
        return
    covered = arg_paths(args)
    for path in files:
        if not any(within(path, c) for c in covered):
            args.append(path)
    config.args[:] = args


class OpenPaths:
    """The way pytest's walk must take to reach the files of the skills in play: a skill
    under ``.claude/skills`` (a monorepo's ``packages/foo/.claude/skills/bar``) is in a
    folder that ``norecursedirs`` keeps pytest out of (``.*``). The folders on the way to a
    file are entered whatever ``norecursedirs`` says; inside a folder it keeps pytest out
    of, nothing else is collected."""

    def __init__(self, files: Sequence[str], norecursedirs: Sequence[str]) -> None:
        self.files = frozenset(files)
        ways: set[str] = set()
        for path in files:
            folder = os.path.dirname(path)
            while folder not in ways and folder != os.path.dirname(folder):
                ways.add(folder)
                folder = os.path.dirname(folder)
        self.ways = frozenset(ways)
        patterns = [p for p in norecursedirs if "/" not in p and os.sep not in p]
        self.opened = tuple(
            folder
            for folder in sorted(ways)
            if any(fnmatch.fnmatch(os.path.basename(folder), p) for p in patterns)
        )

    def ignored(self, path: str) -> bool | None:
        """pytest's ``pytest_ignore_collect`` answer for ``path``: inside a folder opened for
        a file, False on the way to it and True for anything else; None elsewhere (pytest
        decides, ``--ignore`` included)."""
        if not any(within(path, folder) for folder in self.opened):
            return None
        return path not in self.files and path not in self.ways


def explicit(config: pytest.Config) -> bool:
    """True when pytest's own selection names what to run: the command line's paths, or the
    folder pytest was started in when that is not rootdir (``cd skills/pdf && pytest``
    collects that skill, as it would collect the tests there)."""
    source = config.args_source
    if source == pytest.Config.ArgsSource.ARGS:
        return True
    if source != pytest.Config.ArgsSource.INVOCATION_DIR:
        return False
    here = config.invocation_params.dir
    if here != config.rootpath:
        return True
    return config.inipath is None and is_skill_place(str(here))


def is_skill_place(folder: str) -> bool:
    """Whether ``folder`` is a skill's own folder or a folder of skills (``skills/``,
    ``.claude/skills``): ``cd skills/pdf && pytest`` means that skill even in a repository
    with no pytest ini file, where pytest takes the folder for its rootdir. A project's
    root, which holds its skills further down, is neither: a plain ``pytest`` there
    collects no skill."""
    if os.path.isfile(os.path.join(folder, SKILL_FILE)):
        return True
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return any(os.path.isfile(os.path.join(folder, name, SKILL_FILE)) for name in names)


def arg_paths(args: list[str]) -> list[str]:
    """The file system paths of pytest arguments (``path::node`` ids included), absolute."""
    return [os.path.abspath(a.split("::")[0]) for a in args]


def _skill_folder(chosen: str, root: str) -> str:
    """The skill folder holding ``chosen`` (a file or folder below the ini folder ``root``),
    or ``chosen`` itself when it is a folder of skills."""
    folder = chosen if os.path.isdir(chosen) else os.path.dirname(chosen)
    probe = folder
    while within(probe, root):
        if os.path.isfile(os.path.join(probe, "SKILL.md")):
            return probe
        if probe == root:
            break
        probe = os.path.dirname(probe)
    return folder
