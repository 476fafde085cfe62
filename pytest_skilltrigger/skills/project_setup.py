"""The project's own setup (``--trigger-setup=project``): what the project gives Claude Code
beside its skills, read before any call.

A skill triggers under the project's ``CLAUDE.md`` (instructions that take precedence), its
``.claude/settings.json`` (``UserPromptSubmit`` hooks, a permission mode) and its ``.mcp.json``
servers (their tools and instructions join the request). The claude-code backend copies these
into its run's isolated workspace and lets the CLI run them; the builtin context adds
``CLAUDE.md`` where the CLI puts it.
"""

from __future__ import annotations

import json
import os

from pytest_skilltrigger.model.context import ProjectSetup
from pytest_skilltrigger.skills.set_formats import read_text
from pytest_skilltrigger.support.errors import InputError

CLAUDE_MD = "CLAUDE.md"
SETTINGS = os.path.join(".claude", "settings.json")
MCP = ".mcp.json"
HOOKS = os.path.join(".claude", "hooks")  # where a project keeps the scripts its hooks run


def read_project_setup(root: str) -> ProjectSetup:
    """The setup of the project at ``root``; InputError when it has nothing to set up, or
    a settings or MCP file that is not a JSON object."""
    claude_md = _text(os.path.join(root, CLAUDE_MD))
    files = []
    for name in (SETTINGS, MCP):
        text = _text(os.path.join(root, name))
        if text is not None:
            _check_object(os.path.join(root, name), text)
            files.append((name.replace(os.sep, "/"), text))
    files += _hook_scripts(root)
    if claude_md is None and not files:
        raise InputError(
            "--trigger-setup=project",
            f"{root} has no CLAUDE.md, .claude/settings.json or .mcp.json to set up",
        )
    return ProjectSetup(os.path.abspath(root), claude_md, tuple(files))


def _text(path: str) -> str | None:
    return read_text(path) if os.path.isfile(path) else None


def _check_object(path: str, text: str) -> None:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(path, "must be a JSON object")


def _hook_scripts(root: str) -> list[tuple[str, str]]:
    """The files under ``.claude/hooks``, which the settings' hooks may run."""
    found = []
    base = os.path.join(root, HOOKS)
    for folder, dirs, files in os.walk(base):
        dirs.sort()  # the same order on every machine: the context's key holds the scripts
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                text = read_text(path)
            except InputError:
                continue  # not text: a hook runs what it can
            found.append((os.path.relpath(path, root).replace(os.sep, "/"), text))
    return found
