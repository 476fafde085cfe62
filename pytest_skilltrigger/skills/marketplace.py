"""Marketplaces (``.claude-plugin/marketplace.json``): a repository of plugins, read as the
pinned CLI reads an installed marketplace, and the plugin a skill folder belongs to.

A user installs a marketplace's plugins and the CLI lists them in the order they were
installed (``enabledPlugins``' order); installing a marketplace whole, plugin after plugin as
it lists them, gives its order, and so does a test of the repository. Observed with the
pinned CLI (see ``docs/explanation/context.md``):

- an entry's ``source`` is a folder of the repository (``./plugins/x``; a bare ``x`` under
  ``metadata.pluginRoot``); a remote source is not in the checkout, and a bare one without
  ``pluginRoot`` is refused by the CLI: both are left out, with a note;
- a plugin that lists no skill is still installed: its commands are listed;
- an entry's own ``skills`` and ``commands`` add to the plugin's (after ``skills/`` and the
  manifest's; ``commands/`` stays read unless the manifest declares its commands); an entry
  on the marketplace's own root (``"./"``) that names skills lists those alone, not
  ``skills/``; with ``"strict": false``, components in the entry beside a manifest keep the
  CLI from loading the plugin at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from pytest_skilltrigger.skills.plugins import (
    MANIFEST,
    Plugin,
    PluginSkill,
    check_name,
    component_paths,
    is_plugin_root,
    plugin_skills,
    read_manifest,
    read_plugin,
)
from pytest_skilltrigger.support.errors import InputError

MARKETPLACE = os.path.join(".claude-plugin", "marketplace.json")


@dataclass(frozen=True)
class Marketplace:
    """A marketplace in a checkout: its root, its local plugins in its order, and what was
    left out with why (one line each)."""

    root: str
    plugins: tuple[Plugin, ...]
    notes: tuple[str, ...] = ()


def is_marketplace_root(folder: str) -> bool:
    """Whether ``folder`` holds a marketplace file."""
    return os.path.isfile(os.path.join(folder, MARKETPLACE))


def read_marketplace(root: str) -> Marketplace:
    """The marketplace at ``root``; InputError naming its file when it cannot be read."""
    root = os.path.abspath(root)
    path = os.path.join(root, MARKETPLACE)
    data = read_manifest(path)
    entries = data.get("plugins")
    if not isinstance(entries, list):
        raise InputError(path, "'plugins' must be a list of plugin entries")
    metadata = data.get("metadata")
    plugin_root = metadata.get("pluginRoot") if isinstance(metadata, dict) else None
    plugins: list[Plugin] = []
    notes: list[str] = []
    remote = 0
    for position, entry in enumerate(entries):
        got = _entry_plugin(root, entry, plugin_root, f"{path}: plugins[{position}]")
        if got is None:
            remote += 1
        elif isinstance(got, str):
            notes.append(got)
        else:
            plugins.append(got)
    if remote:
        notes.insert(
            0,
            f"{path}: {remote} plugin(s) come from elsewhere (a repository, a URL) or from a "
            "source the CLI refuses, not from a folder of this checkout; left out",
        )
    return Marketplace(root, tuple(plugins), tuple(notes))


def _entry_plugin(root: str, entry: Any, plugin_root: Any, where: str) -> Plugin | str | None:
    """One entry's plugin, or why the CLI would not install it from this checkout (None:
    its source is not a folder of the checkout)."""
    if not isinstance(entry, dict):
        return f"{where} is not an object; left out"
    name = entry.get("name")
    shown = f"{where} ({name})" if isinstance(name, str) else where
    folder = _source_folder(root, entry.get("source"), plugin_root)
    if folder is None:
        return None
    if not os.path.isdir(folder):
        return f"{shown}: its source {folder} does not exist; left out"
    skills = component_paths(entry.get("skills"), where, "skills") or ()
    commands = component_paths(entry.get("commands"), where, "commands") or ()
    has_manifest = is_plugin_root(folder)
    if entry.get("strict") is False and has_manifest and (skills or commands):
        return (
            f"{shown}: strict is false, and the entry declares components beside "
            f"{os.path.join(folder, MANIFEST)}: Claude Code does not load it; left out"
        )
    plugin = read_plugin(folder) if has_manifest else Plugin(check_name(name, where), folder)
    return _with_entry(plugin, skills, commands, on_root=folder == root)


def _source_folder(root: str, source: Any, plugin_root: Any) -> str | None:
    """The folder an entry's source names in this checkout (None: not a local folder)."""
    if not isinstance(source, str):
        return None  # github, url, git-subdir: not in this checkout
    if source.startswith("./") or source == ".":
        base = root
    elif isinstance(plugin_root, str):
        base = os.path.join(root, plugin_root)
    else:
        return None  # the CLI refuses a bare source without metadata.pluginRoot
    folder = os.path.normpath(os.path.join(base, source))
    inside = folder == root or folder.startswith(root.rstrip(os.sep) + os.sep)
    return folder if inside else None


def _with_entry(
    plugin: Plugin, skills: tuple[str, ...], commands: tuple[str, ...], on_root: bool
) -> Plugin:
    """A plugin with its marketplace entry's components added to its manifest's."""
    if commands:
        own = plugin.commands if plugin.commands is not None else ("./commands",)
        plugin = replace(plugin, commands=(*own, *commands))
    if skills:
        plugin = replace(
            plugin,
            skills=(*plugin.skills, *skills),
            skills_folder=plugin.skills_folder and not on_root,
            declares_skills=True,
        )
    return plugin


# -- the plugin a skill belongs to --------------------------------------------------------------


def plugin_of(skill_folder: str) -> tuple[Plugin, PluginSkill] | None:
    """The plugin a skill folder belongs to, found from below (a skill's folder given
    alone), with the skill's place in it: a marketplace's plugin that lists it, else the
    nearest plugin at or above it that lists it (a root ``SKILL.md`` included)."""
    folder = os.path.abspath(skill_folder)
    nearest: str | None = None
    at = folder
    while True:
        if nearest is None and is_plugin_root(at):
            nearest = at
        if is_marketplace_root(at):
            for plugin in read_marketplace(at).plugins:
                if _holds(plugin.root, nearest or folder):
                    found = member(plugin, folder)
                    if found is not None:
                        return found
        if at == os.path.dirname(at):
            break
        at = os.path.dirname(at)
    return member(read_plugin(nearest), folder) if nearest is not None else None


def _holds(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def member(plugin: Plugin, folder: str) -> tuple[Plugin, PluginSkill] | None:
    """The plugin with ``folder``'s place among its skills; None when it does not list it."""
    real = os.path.realpath(os.path.join(folder, "SKILL.md"))
    for skill in plugin_skills(plugin):
        if os.path.realpath(os.path.join(skill.folder, "SKILL.md")) == real:
            return plugin, skill
    return None
