"""Claude Code plugins: a folder with ``.claude-plugin/plugin.json`` and its skills below
``skills/``.

Why it matters to a trigger test: the CLI lists a plugin's skills as ``plugin:folder``,
after the project's, and the model calls them by that name. The plugin's name is the
manifest's ``name`` (not its folder's). Claude Code skips a plugin with a broken manifest
without a word, so a test would measure a listing without it: here a broken manifest is a
one-line error before any call.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from pytest_skilltrigger.skills.evalset import read_text
from pytest_skilltrigger.support.errors import InputError

MANIFEST = os.path.join(".claude-plugin", "plugin.json")
SKILLS_FOLDER = "skills"
# what a plugin's name may be to stand in an id (``plugin:folder``) and a folder name:
# nothing that could leave its folder
SAFE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Plugin:
    """A plugin: the name its manifest gives and its root folder (absolute)."""

    name: str
    root: str


def is_plugin_root(folder: str) -> bool:
    """Whether ``folder`` holds a plugin manifest."""
    return os.path.isfile(os.path.join(folder, MANIFEST))


def read_plugin(root: str) -> Plugin:
    """The plugin at ``root``; InputError naming the manifest when it cannot be loaded."""
    path = os.path.join(os.path.abspath(root), MANIFEST)
    text = read_text(path)  # a BOM or UTF-16 as editors save them; one-line errors
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(path, "is not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise InputError(path, "must be a JSON object")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InputError(path, "has no 'name' (Claude Code does not load a plugin without one)")
    if not SAFE_NAME_RE.fullmatch(name):
        raise InputError(
            path, f"'name' {name!r} is not a plugin name (letters, digits, '.', '_', '-')"
        )
    return Plugin(name, os.path.dirname(os.path.dirname(path)))


def plugin_of(skill_folder: str) -> Plugin | None:
    """The plugin a skill folder belongs to (``<root>/skills/<folder>``), if any."""
    parent = os.path.dirname(os.path.abspath(skill_folder))
    if os.path.basename(parent) != SKILLS_FOLDER:
        return None
    root = os.path.dirname(parent)
    return read_plugin(root) if is_plugin_root(root) else None
