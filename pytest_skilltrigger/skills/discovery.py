"""Finding the skills below a path, as pytest finds tests, and as Claude Code finds a
plugin's or a marketplace's."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pytest_skilltrigger.skills.marketplace import (
    is_marketplace_root,
    plugin_of,
    read_marketplace,
)
from pytest_skilltrigger.skills.plugins import (
    Plugin,
    is_plugin_root,
    plugin_skills,
    read_plugin,
)
from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE, searched


@dataclass
class Discovered:
    """What a path holds: its skills, in the order found; the plugins in play, in the order
    Claude Code lists them (a marketplace's in its order, those that list no skill too);
    and what was left out of a marketplace, with why."""

    skills: list[Skill] = field(default_factory=list)
    plugins: list[Plugin] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_plugin(self, plugin: Plugin) -> None:
        """Take in a plugin's listed skills (a plugin met twice is taken once)."""
        if any(p.root == plugin.root for p in self.plugins):
            return
        self.plugins.append(plugin)
        for place in plugin_skills(plugin):
            self.skills.append(read_skill(place.folder, (plugin, place)))


def discover_skills(path: str | os.PathLike[str]) -> list[Skill]:
    """Skills at ``path`` (see :func:`discover`)."""
    return discover(path).skills


def discover(path: str | os.PathLike[str]) -> Discovered:
    """What ``path`` holds: a skill's folder (or its SKILL.md), a plugin (the skills its
    manifest lists), a marketplace (its plugins, in its order), or a folder with any of these
    below it.

    The search goes to any depth, as pytest looks for tests (``plugins/*/skills/*`` works),
    but not into a skill's own folders, hidden folders (but a project's ``.claude/skills``),
    virtualenvs or ``node_modules``. Folders are visited sorted by name so that runs and
    reports are reproducible.
    """
    root = os.path.abspath(os.fspath(path))
    if not os.path.exists(root):
        raise InputError(root, "path does not exist")
    found = Discovered()
    if os.path.isfile(root):
        if os.path.basename(root) != SKILL_FILE:
            raise InputError(root, "is a file, not a skill folder or a folder of skills")
        found.skills.append(read_skill(os.path.dirname(root)))
        return found
    _visit(root, found, top=True)
    if not found.skills and not found.plugins:
        raise InputError(root, "holds no skill (no SKILL.md in it or in any folder below it)")
    return found


def _visit(folder: str, found: Discovered, top: bool = False) -> None:
    """Take in what ``folder`` holds, and what its folders hold."""
    if is_marketplace_root(folder):
        market = read_marketplace(folder)
        found.notes += market.notes
        for plugin in market.plugins:
            found.add_plugin(plugin)
    if is_plugin_root(folder):
        membership = plugin_of(folder)  # a marketplace above may add to its manifest
        found.add_plugin(membership[0] if membership else read_plugin(folder))
    if os.path.isfile(os.path.join(folder, SKILL_FILE)):
        if not any(_within(folder, p.root) for p in found.plugins):
            found.skills.append(read_skill(folder))
        if not top or not _holds_more(folder):
            return  # a skill's own folders are its resources
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        where = str(exc.filename or folder)
        raise InputError(where, f"cannot be listed ({exc.strerror or exc})") from None
    for name in names:
        if searched(folder, name) and not _claimed(os.path.join(folder, name), found):
            _visit(os.path.join(folder, name), found)


def _holds_more(folder: str) -> bool:
    """Whether a skill's folder given itself is also a plugin or a marketplace (a plugin
    whose root is its skill): its other skills are looked for too."""
    return is_plugin_root(folder) or is_marketplace_root(folder)


def _claimed(folder: str, found: Discovered) -> bool:
    """Whether a folder is a plugin's (its skills are the ones its manifest lists)."""
    return any(_within(folder, p.root) and folder != p.root for p in found.plugins) and not (
        is_plugin_root(folder) or is_marketplace_root(folder)
    )


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
