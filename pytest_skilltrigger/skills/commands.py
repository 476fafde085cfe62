"""Commands: the ``*.md`` files of a plugin's ``commands/`` and a project's
``.claude/commands/``, which Claude Code lists to the model beside the skills.

A command competes with a skill for every request, and shares the listing's budget with it,
so a listing without them is not the one users have. Read as the pinned CLI reads them
(observed, see ``docs/explanation/context.md``):

- the name is the file's path below the folder, ``/`` as ``:`` (``sub/deploy.md`` is
  ``sub:deploy``; a ``SKILL.md`` names its folder), after ``plugin:`` for a plugin's; a
  plugin's are the files its manifest declares, in its order (:func:`.plugins.plugin_commands`);
- the text is a skill's: the description and `` - when_to_use``, by the same reading of the
  frontmatter; without a description, a project's command shows its first line (``Custom
  command`` for an empty file) and a plugin's is not listed unless it has a ``when_to_use``;
- ``disable-model-invocation: true`` keeps it out; ``paths`` does not;
- a frontmatter ``name`` is shown for a plugin's command (``plugin:name``), not a project's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from pytest_skilltrigger.model.context import PROJECT, ListedSkill
from pytest_skilltrigger.skills.cli_frontmatter import disables_model
from pytest_skilltrigger.skills.frontmatter import BOM, decode_skill_md
from pytest_skilltrigger.skills.plugins import Plugin, plugin_commands
from pytest_skilltrigger.skills.skill import SHOWN_NAME_RE, read_cli_file
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE

COMMANDS_FOLDER = "commands"
PROJECT_COMMANDS = os.path.join(".claude", COMMANDS_FOLDER)
NO_TEXT = "Custom command"  # what a project's command without any text is listed with


def project_of(skills_folder: str) -> str | None:
    """The project a folder of skills is in, when it is ``<project>/.claude/skills``."""
    parent = os.path.dirname(os.path.abspath(skills_folder))
    if os.path.basename(skills_folder.rstrip(os.sep)) != "skills":
        return None
    return os.path.dirname(parent) if os.path.basename(parent) == ".claude" else None


def command_files(folder: str) -> list[tuple[str, str]]:
    """Each ``*.md`` below ``folder`` with its command name (without a plugin's), sorted."""
    found = []
    for parent, dirs, files in os.walk(folder):
        dirs.sort()
        for file in sorted(files):
            if not file.endswith(".md"):
                continue
            rel = os.path.relpath(os.path.join(parent, file), folder)
            parts = rel.split(os.sep)
            if parts[-1] == SKILL_FILE and len(parts) > 1:
                parts = parts[:-1]  # a SKILL.md among the commands: named by its folder
            else:
                parts[-1] = parts[-1][: -len(".md")]
            found.append((os.path.join(parent, file), ":".join(parts)))
    return found


def read_command(
    path: str, name: str, group: int, plugin: str | None, order: int = 0
) -> ListedSkill | None:
    """One command as the listing shows it; None when the CLI does not list it. A file
    that cannot be read is an InputError naming it."""
    raw, reading = read_cli_file(path)
    text = decode_skill_md(raw, path).removeprefix(BOM)
    if disables_model(reading.mapping):
        return None
    description, when_to_use = reading.description, reading.when_to_use
    if plugin is not None and description is None and when_to_use is None:
        return None  # a plugin's command without either is not listed
    if description is None:
        description = reading.body_line or NO_TEXT
    alias = None
    if plugin is not None:
        shown = reading.mapping.get("name")
        if (
            isinstance(shown, str)
            and SHOWN_NAME_RE.match(shown)
            and shown != name.rpartition(":")[2]
        ):
            alias = f"{plugin}:{shown}"
    full = f"{plugin}:{name}" if plugin is not None else name
    return ListedSkill(
        full, description, when_to_use, text, alias=alias, group=group, command=True, order=order
    )


def read_commands(
    folder: str, group: int = PROJECT, skipped: list[str] | None = None
) -> list[ListedSkill]:
    """The listed commands of a project's (or the user's) ``.claude/commands/``; none when
    the folder does not exist. A file that cannot be read is an InputError, or, given
    ``skipped``, left out with its one line added there (the others are still read)."""
    if not os.path.isdir(folder):
        return []
    files = [(path, name, group, None, 0) for path, name in command_files(folder)]
    return _read_each(files, skipped)


def read_plugin_commands(
    plugin: Plugin, group: int, skipped: list[str] | None = None
) -> list[ListedSkill]:
    """The listed commands of a plugin, in the order its manifest gives them (``skipped``
    as for :func:`read_commands`)."""
    files = [
        (path, name, group, plugin.name, order)
        for order, (path, name) in enumerate(plugin_commands(plugin))
    ]
    return _read_each(files, skipped)


def _read_each(
    files: Sequence[tuple[str, str, int, str | None, int]], skipped: list[str] | None
) -> list[ListedSkill]:
    listed = []
    for path, name, group, plugin, order in files:
        try:
            command = read_command(path, name, group, plugin, order)
        except InputError as exc:
            if skipped is None:
                raise
            skipped.append(str(exc))
            continue
        if command is not None:
            listed.append(command)
    return listed
