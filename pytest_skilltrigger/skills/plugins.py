"""Claude Code plugins: a folder with ``.claude-plugin/plugin.json`` (or an entry of a
marketplace), and what the pinned CLI lists of it, read as the CLI reads the manifest.

Why it matters to a trigger test: the CLI lists a plugin's skills as ``plugin:folder`` and
its commands as ``plugin:name``, after the project's, in an order the manifest decides, and
the model calls them by those names. Observed with the pinned CLI (the table is in
``docs/explanation/context.md``):

- the plugin's name is the manifest's ``name`` (not its folder's; a marketplace entry's for a
  plugin without a manifest);
- skills: the folder ``skills/`` always, its skills sorted, named by folder (with the
  frontmatter name as an alias where it differs); then each ``skills`` entry of the manifest
  (a string or a list), in its order: a skill's own folder (``"./"``: the plugin's root) is
  named by its frontmatter name, a folder of skills lists its skills as ``skills/`` does; a
  root ``SKILL.md`` nobody declares is listed only when there is neither a ``skills`` key
  nor a ``skills/`` folder; a file reached twice (a symlink) is listed once, where first met;
- commands: without a ``commands`` key, ``commands/`` walked (each folder's files, then its
  folders, sorted), named by path (``review:code-review``); any ``commands`` key (a string
  or a list) replaces it: a declared file is named by its file name alone, in the manifest's
  order, a declared folder walked as ``commands/`` is, names relative to it; a path that does
  not exist is skipped, and of two of one name the first is kept.

Claude Code skips a plugin with a broken manifest without a word, so a test would measure a
listing without it: here a broken manifest is a one-line error before any call.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.model.context import collation_key
from pytest_skilltrigger.skills.set_formats import read_text
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE

MANIFEST = os.path.join(".claude-plugin", "plugin.json")
SKILLS_FOLDER = "skills"
COMMANDS_FOLDER = "commands"
# what a plugin's name may be to stand in an id (``plugin:folder``) and a folder name:
# nothing that could leave its folder
SAFE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Plugin:
    """A plugin: the name its manifest gives, its root folder (absolute), and the component
    paths that say what it lists (relative to the root, as written): ``commands`` None for
    the default ``commands/`` folder, ``skills`` the entries beside ``skills/`` (which
    ``skills_folder`` False leaves out: a marketplace entry on the marketplace's own root
    that names its skills)."""

    name: str
    root: str
    commands: tuple[str, ...] | None = None
    skills: tuple[str, ...] = ()
    skills_folder: bool = True
    declares_skills: bool = False  # the manifest has a ``skills`` key (even an empty one)


@dataclass(frozen=True)
class PluginSkill:
    """A skill a plugin lists: its folder (absolute), its place among the plugin's skills,
    and whether it is a declared skill folder (``entry``: named by its frontmatter name,
    with no alias) rather than one of a folder of skills (named by its folder)."""

    folder: str
    order: int
    entry: bool = False


def is_plugin_root(folder: str) -> bool:
    """Whether ``folder`` holds a plugin manifest."""
    return os.path.isfile(os.path.join(folder, MANIFEST))


def read_manifest(path: str) -> dict[str, Any]:
    """A manifest's JSON object; InputError naming the file when it cannot be loaded."""
    text = read_text(path)  # a BOM or UTF-16 as editors save them; one-line errors
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(path, "is not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise InputError(path, "must be a JSON object")
    return data


def check_name(name: Any, path: str, what: str = "'name'") -> str:
    """A plugin's name as an id may hold it; InputError naming ``path`` otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, f"has no {what} (Claude Code does not load a plugin without one)")
    if not SAFE_NAME_RE.fullmatch(name):
        raise InputError(
            path, f"{what} {name!r} is not a plugin name (letters, digits, '.', '_', '-')"
        )
    return name


def component_paths(value: Any, path: str, key: str) -> tuple[str, ...] | None:
    """A manifest's ``commands`` or ``skills``: a path or a list of paths (None: absent)."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise InputError(path, f"'{key}' must be a path or a list of paths")


def read_plugin(root: str) -> Plugin:
    """The plugin at ``root``, as its manifest declares it; InputError naming the manifest
    when it cannot be loaded."""
    path = os.path.join(os.path.abspath(root), MANIFEST)
    data = read_manifest(path)
    skills = component_paths(data.get("skills"), path, "skills")
    return Plugin(
        check_name(data.get("name"), path),
        os.path.dirname(os.path.dirname(path)),
        commands=component_paths(data.get("commands"), path, "commands"),
        skills=skills or (),
        declares_skills=skills is not None,
    )


# -- what a plugin lists ------------------------------------------------------------------------


def plugin_skills(plugin: Plugin) -> list[PluginSkill]:
    """The skill folders the plugin lists, in the CLI's order (see the module docstring)."""
    found: list[PluginSkill] = []
    seen: set[str] = set()

    def add(folder: str, entry: bool) -> None:
        real = os.path.realpath(os.path.join(folder, SKILL_FILE))
        if real not in seen:
            seen.add(real)
            found.append(PluginSkill(folder, len(found), entry))

    default = os.path.join(plugin.root, SKILLS_FOLDER)
    if plugin.skills_folder:
        for folder in _skills_in(default):
            add(folder, False)
    for declared in plugin.skills:
        target = _inside(plugin.root, declared)
        if target is None or not os.path.isdir(target):
            continue  # the CLI skips a path that is not there
        if os.path.isfile(os.path.join(target, SKILL_FILE)):
            add(target, True)
        else:
            for folder in _skills_in(target):
                add(folder, False)
    root_skill = os.path.isfile(os.path.join(plugin.root, SKILL_FILE))
    if root_skill and not plugin.declares_skills and not os.path.isdir(default):
        add(plugin.root, True)
    return found


def _skills_in(folder: str) -> list[str]:
    """The skill folders directly inside a folder of skills, in the CLI's order."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    names.sort(key=collation_key)
    return [
        os.path.join(folder, name)
        for name in names
        if os.path.isfile(os.path.join(folder, name, SKILL_FILE))
    ]


def _inside(root: str, declared: str) -> str | None:
    """A declared path, absolute; None when it would leave the plugin's folder."""
    target = os.path.normpath(os.path.join(root, declared))
    if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
        return None
    return target


def plugin_commands(plugin: Plugin) -> list[tuple[str, str]]:
    """The plugin's command files with their names (without the plugin's), in the CLI's
    order, one of a name (see the module docstring)."""
    if plugin.commands is None:
        found = list(walk_commands(os.path.join(plugin.root, COMMANDS_FOLDER)))
    else:
        found = []
        for declared in plugin.commands:
            target = _inside(plugin.root, declared)
            if target is None:
                continue
            if os.path.isfile(target) and target.endswith(".md"):
                found.append((target, os.path.basename(target)[: -len(".md")]))
            elif os.path.isdir(target):
                found += walk_commands(target)
    names: dict[str, str] = {}
    for path, name in found:
        names.setdefault(name, path)
    return [(path, name) for name, path in names.items()]


def walk_commands(folder: str, prefix: Sequence[str] = ()) -> Iterator[tuple[str, str]]:
    """Each ``*.md`` below ``folder`` with its command name (``sub:deploy``), as the CLI
    walks a folder of commands: its files first, then its folders, each sorted; a
    ``SKILL.md`` among them is named by its folder."""
    try:
        entries = sorted(os.listdir(folder), key=collation_key)
    except OSError:
        return
    files = [e for e in entries if e.endswith(".md") and os.path.isfile(os.path.join(folder, e))]
    for file in files:
        if file == SKILL_FILE and prefix:
            yield os.path.join(folder, file), ":".join(prefix)
        else:
            yield os.path.join(folder, file), ":".join([*prefix, file[: -len(".md")]])
    for entry in entries:
        if os.path.isdir(os.path.join(folder, entry)):
            yield from walk_commands(os.path.join(folder, entry), [*prefix, entry])
