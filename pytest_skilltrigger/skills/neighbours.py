"""What every listing shows beside a tested skill: its siblings (the other skills of its
folder, when that folder is a folder of skills), the session's plugins with their skills and
commands, the project's skills and commands, and the user's extra skills.

Read once per session, before any run; the catalog builds each target's context from them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pytest_skilltrigger.model.context import FIRST_PLUGIN, PROJECT, USER, ListedSkill
from pytest_skilltrigger.skills.commands import (
    PROJECT_COMMANDS,
    project_of,
    read_commands,
    read_plugin_commands,
)
from pytest_skilltrigger.skills.discovery import discover
from pytest_skilltrigger.skills.plugins import MANIFEST, SKILLS_FOLDER, Plugin, plugin_skills
from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import within

# The group of the plugins given with --trigger-extra-skills: after the tested ones (the CLI
# lists the plugins it is given first, the installed ones after).
EXTRA_PLUGINS_FROM = FIRST_PLUGIN + 1000


def group_of(skill: Skill, plugins: Sequence[str] = ()) -> int:
    """Where the skill is listed: the project's, or a plugin's by its root's place in
    ``plugins`` (the session's plugins in order; one not there is the first)."""
    if skill.plugin is None:
        return PROJECT
    root = skill.plugin.root
    return FIRST_PLUGIN + (list(plugins).index(root) if root in plugins else 0)


def listed_skill(skill: Skill, group: int = PROJECT) -> ListedSkill:
    """A skill as another skill's listing shows it."""
    return ListedSkill(
        skill.id,
        skill.description,
        skill.when_to_use,
        skill.text,
        alias=skill.alias,
        group=group,
        order=skill.order,
    )


def load_installed(paths: Sequence[str]) -> tuple[ListedSkill, ...]:
    """The skills under ``paths`` (``--trigger-extra-skills``) as they compete in every
    listing: a plugin's (a folder with a plugin manifest, a marketplace's, or a skill of one)
    as its ``plugin:folder`` skills with its commands, after the tested plugins, in the order
    given; a plain folder's as the user's skills, first. Those the model is not shown are
    left out. InputError for a path without skills or a bad one."""
    found: dict[str, ListedSkill] = {}
    plugins: list[Plugin] = []
    for path in paths:
        discovered = discover(path)
        if not discovered.skills and not discovered.plugins:
            raise InputError(path, "--trigger-extra-skills: no SKILL.md found here")
        for plugin in [*discovered.plugins, *(s.plugin for s in discovered.skills if s.plugin)]:
            if all(p.root != plugin.root for p in plugins):
                plugins.append(plugin)
        for skill in discovered.skills:
            group = USER
            if skill.plugin is not None:
                roots = [p.root for p in plugins]
                group = EXTRA_PLUGINS_FROM + roots.index(skill.plugin.root)
            if skill.model_invocable:
                found.setdefault(skill.id, listed_skill(skill, group))
    commands = [
        command
        for index, plugin in enumerate(plugins)
        for command in read_plugin_commands(plugin, EXTRA_PLUGINS_FROM + index)
    ]
    return tuple(found.values()) + tuple(commands)


def lists_neighbours(folder: str, paths: Sequence[str] = ()) -> bool:
    """Whether the skills in ``folder`` are listed beside each other: Claude Code lists a
    folder of skills (``.claude/skills``, a plugin's ``skills/``), and a folder the user
    named (or one below it) is taken as one; the folder a checkout of one skill sits in
    (``~/src``) is not, or the listing would hold whatever else is checked out there."""
    if os.path.basename(folder) == SKILLS_FOLDER:
        return True
    return any(within(folder, os.path.abspath(path)) for path in paths)


def folder_siblings(
    skill: Skill,
    read: Callable[[str], Skill] = read_skill,
    group: int = PROJECT,
    paths: Sequence[str] | None = None,
) -> tuple[tuple[ListedSkill, ...], list[str]]:
    """The other skills in the folder that holds this skill (a plugin's: the other skills
    its manifest lists), listed in ``group``; unreadable ones are skipped. ``read`` reads a
    skill folder (a session's targets share one cache); ``paths``, the paths given, decide
    whether that folder is a folder of skills (:func:`lists_neighbours`; None: it is)."""
    if skill.plugin is not None:
        folders = [place.folder for place in plugin_skills(skill.plugin)]
    else:
        parent = os.path.dirname(skill.path)
        if paths is not None and not lists_neighbours(parent, paths):
            return (), []
        entries = sorted(os.listdir(parent))
        folders = [os.path.join(parent, entry) for entry in entries]
    listed: list[ListedSkill] = []
    warnings: list[str] = []
    for folder in folders:
        if folder == skill.path or not os.path.isfile(os.path.join(folder, "SKILL.md")):
            continue
        try:
            other = read(folder)
        except InputError as exc:
            warnings.append(f"{exc} (sibling skipped)")
            continue
        if other.model_invocable and other.id != skill.id:  # an unlisted one competes with nothing
            listed.append(listed_skill(other, group))
    return tuple(listed), warnings


@dataclass(frozen=True)
class SessionSkills:
    """The session's skills and commands as every listing shows them: its plugins in order,
    each with its skills and commands; the project's skills (those of the folders that hold a
    collected project skill) and the commands of the projects those folders are in
    (``<project>/.claude/skills`` beside ``<project>/.claude/commands``)."""

    plugins: tuple[str, ...]
    plugin_skills: tuple[ListedSkill, ...]
    project_skills: tuple[ListedSkill, ...]
    commands: tuple[ListedSkill, ...] = ()
    paths: tuple[str, ...] = ()  # the paths given: which folders are folders of skills

    def skills_of(self, plugin_root: str) -> list[ListedSkill]:
        """A plugin's listed skills."""
        group = FIRST_PLUGIN + self.plugins.index(plugin_root)
        return [s for s in self.plugin_skills if s.group == group]

    @classmethod
    def of(
        cls,
        skills: Sequence[Skill],
        read: Callable[[str], Skill],
        paths: Sequence[str] = (),
        plugins: Sequence[Plugin] = (),
    ) -> SessionSkills:
        """The session's: ``plugins`` are those found in play (a marketplace's, in its
        order, those that list no skill too); the plugins of ``skills`` follow them."""
        in_play = list(dict.fromkeys([*plugins, *(s.plugin for s in skills if s.plugin)]))
        by_root: dict[str, Plugin] = {}
        for plugin in in_play:
            by_root.setdefault(plugin.root, plugin)
        ordered = list(by_root.values())
        _check_plugin_names(ordered)
        roots = tuple(by_root)
        folders = dict.fromkeys(
            os.path.dirname(s.path)
            for s in skills
            if s.plugin is None and lists_neighbours(os.path.dirname(s.path), paths)
        )
        return cls(
            roots,
            tuple(s for plugin in ordered for s in _plugin_listed(plugin, read, roots)),
            tuple(s for folder in folders for s in folder_skills(folder, read, roots)),
            _commands(ordered, folders),
            tuple(paths),
        )

    def neighbours(self, skill: Skill) -> tuple[ListedSkill, ...]:
        """What ``skill``'s listing shows beside its siblings: the other plugins' skills,
        and for a plugin's skill the project's."""
        if skill.plugin is None:
            return self.plugin_skills + self.commands
        own = group_of(skill, self.plugins)
        others = tuple(s for s in self.plugin_skills if s.group != own)
        return self.project_skills + others + self.commands


def _plugin_listed(
    plugin: Plugin, read: Callable[[str], Skill], roots: Sequence[str]
) -> list[ListedSkill]:
    """The listed skills of one plugin, as its manifest lists them (unreadable or unlisted
    ones left out)."""
    listed = []
    for place in plugin_skills(plugin):
        try:
            skill = read(place.folder)
        except InputError:
            continue  # said where it is a sibling
        if skill.plugin is None or skill.plugin.root != plugin.root:
            continue  # (listed by an earlier plugin of the session)
        if skill.model_invocable:
            listed.append(listed_skill(skill, group_of(skill, roots)))
    return listed


def _commands(plugins: Sequence[Plugin], folders: Iterable[str]) -> tuple[ListedSkill, ...]:
    """The commands of the session's plugins and of the projects its skill folders are in
    (a folder ``<project>/.claude/skills``)."""
    found = [
        command
        for index, plugin in enumerate(plugins)
        for command in read_plugin_commands(plugin, FIRST_PLUGIN + index)
    ]
    projects = dict.fromkeys(project_of(folder) for folder in folders)
    for project in filter(None, projects):
        found += read_commands(os.path.join(project, PROJECT_COMMANDS))
    return tuple(found)


def _check_plugin_names(plugins: Sequence[Plugin]) -> None:
    """Two plugins of one name would give their skills the same ids: Claude Code would load
    one of them, and the results of both would be reported as one."""
    roots: dict[str, str] = {}
    for plugin in plugins:
        first = roots.setdefault(plugin.name, plugin.root)
        if first != plugin.root:
            raise InputError(
                os.path.join(plugin.root, MANIFEST),
                f"names the plugin {plugin.name!r}, as {os.path.join(first, MANIFEST)} does: "
                "their skills would have the same ids",
            )


def folder_skills(
    folder: str, read: Callable[[str], Skill], plugins: Sequence[str]
) -> list[ListedSkill]:
    """The listed skills of one folder of skills (unreadable or unlisted ones left out)."""
    listed = []
    for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        path = os.path.join(folder, entry)
        if not os.path.isfile(os.path.join(path, "SKILL.md")):
            continue
        try:
            skill = read(path)
        except InputError:
            continue  # said where it is a sibling
        if skill.model_invocable:
            listed.append(listed_skill(skill, group_of(skill, plugins)))
    return listed
