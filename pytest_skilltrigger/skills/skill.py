"""Reading and validating Agent Skills (a folder holding ``SKILL.md``).

The file is read as the pinned Claude Code CLI reads it (:mod:`.cli_frontmatter`): the
description we test must be the one Claude sees. A file that is not valid YAML, has no
description or no frontmatter at all is still listed by Claude Code, so it is tested as the CLI
lists it, with a warning that says what it lists and how to fix the file.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.skills.cli_frontmatter import (
    JS_SPACE,
    CliFrontmatter,
    disables_model,
    js_string,
    read_as_cli,
)
from pytest_skilltrigger.skills.frontmatter import BOM, decode_skill_md
from pytest_skilltrigger.skills.marketplace import plugin_of
from pytest_skilltrigger.skills.plugins import Plugin, PluginSkill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE

MAX_DESCRIPTION = 1024
MAX_NAME = 64
ALLOWED_KEYS = (
    # the Agent Skills specification's
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
    # those Claude Code documents for skills (and ``version``, which plugins' skills carry)
    "when_to_use",
    "argument-hint",
    "disable-model-invocation",
    "user-invocable",
    "model",
    "effort",
    "context",
    "agent",
    "hooks",
    "paths",
    "shell",
    "version",
    "hide-from-slash-command-tool",
)
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
# a frontmatter name the CLI shows beside the folder's: one without spaces or colons
SHOWN_NAME_RE = re.compile(r"^[^\s:]+$")
# ``paths`` patterns the CLI treats as "every file": such a skill is listed
_EVERY_PATH = ("", "**")


@dataclass(frozen=True)
class Skill:
    """One skill as found on disk.

    ``name`` is what the frontmatter says (the folder's name when it says nothing); the
    skill's :attr:`id`, which Claude Code lists and loads it by, is its folder's name, with
    its plugin's in front for a plugin's skill. ``raw`` keeps the exact bytes read so that a
    later rewrite can refuse to overwrite a file the user edited in the meantime.
    """

    name: str
    description: str
    path: str
    skill_md: str
    frontmatter: dict[str, Any]
    body: str
    warnings: tuple[str, ...]
    raw: bytes
    plugin: Plugin | None = None
    # its place among its plugin's skills (None: not a plugin's): the order the CLI lists
    # them in, and whether the manifest declares the folder itself (then it is named by its
    # frontmatter name, with no alias)
    place: PluginSkill | None = dataclasses.field(default=None, compare=False, repr=False)
    # how the CLI read the file (see :class:`~.cli_frontmatter.CliFrontmatter`), and whether
    # the description is the frontmatter's (False: the body's first line stands in for it)
    reading: CliFrontmatter | None = dataclasses.field(default=None, compare=False, repr=False)
    described: bool = True

    @property
    def folder(self) -> str:
        """The name of the skill's folder."""
        return os.path.basename(self.path)

    @property
    def entry(self) -> bool:
        """Whether its plugin's manifest declares this folder itself as a skill (``"./"``
        for a root ``SKILL.md``): the CLI then names it by its frontmatter name."""
        return self.place is not None and self.place.entry

    @property
    def id(self) -> str:
        """The name Claude Code lists the skill by: ``folder`` or ``plugin:folder``
        (``plugin:name`` for a folder the manifest declares)."""
        if self.plugin is None:
            return self.folder
        return f"{self.plugin.name}:{self.name if self.entry else self.folder}"

    @property
    def order(self) -> int:
        """Its place among its plugin's skills (0 for a skill of no plugin)."""
        return self.place.order if self.place is not None else 0

    @property
    def alias(self) -> str | None:
        """The frontmatter name as the listing shows it beside the id, when it differs from
        the folder's (``plugin:name`` for a plugin's skill); the CLI loads the skill by it
        too. A folder the manifest declares has none: it is named by it."""
        if self.name == self.folder or self.entry:
            return None
        return f"{self.plugin.name}:{self.name}" if self.plugin else self.name

    @property
    def when_to_use(self) -> str | None:
        """The ``when_to_use`` text Claude Code appends to the listed description."""
        value = self.frontmatter.get("when_to_use")
        return (js_string(value) or None) if value is not None else None

    @property
    def unlisted_reason(self) -> str | None:
        """Why Claude Code does not list the skill to the model, if it does not: it then never
        triggers (a user can still run it by name). ``disable-model-invocation: true``; or a
        non-empty ``paths`` (a glob or a list): such a skill is listed only once the session
        works on matching files, never for a one-shot request, even with a matching file in
        the project (observed with the pinned CLI; ``paths: []`` is listed)."""
        if disables_model(self.frontmatter):
            return (
                "disable-model-invocation: true in SKILL.md: Claude Code does not list this "
                "skill to the model, so it can never trigger"
            )
        if self.plugin is not None and not self.described and self.when_to_use is None:
            return (
                "no description and no when_to_use in SKILL.md: Claude Code does not list a "
                "plugin's skill without them, so it can never trigger"
            )
        paths = self.frontmatter.get("paths")
        if self.plugin is None and paths not in (None, [], {}) and paths not in _EVERY_PATH:
            return (
                f"paths: {paths!r} in SKILL.md: Claude Code lists this skill only once the "
                "session works on matching files, never for a one-shot request, so it never "
                "triggers here"
            )
        return None

    @property
    def model_invocable(self) -> bool:
        """Whether Claude Code lists the skill to the model (see :attr:`unlisted_reason`)."""
        return self.unlisted_reason is None

    @property
    def text(self) -> str:
        """The file as read, decoded (what a backend that installs skills writes)."""
        return self.raw.decode("utf-8", errors="replace").removeprefix(BOM)


def _name_from(frontmatter: dict[str, Any], folder_name: str, where: str) -> tuple[str, list[str]]:
    """The skill's name: the frontmatter's when the CLI shows it (text without spaces or
    colons), else the folder's (a name the CLI does not show gets a warning)."""
    value = frontmatter.get("name")
    if value is None or value == "":
        return folder_name, []
    text = js_string(value)  # a number is shown as JavaScript writes it
    if isinstance(value, (dict, list)) or not SHOWN_NAME_RE.match(text):
        return folder_name, [
            f"{where}: Claude Code does not show the frontmatter name {text!r} (a name has no "
            f"spaces or colons); the skill is listed as {folder_name!r}"
        ]
    return text, []


def read_cli_file(path: str) -> tuple[bytes, CliFrontmatter]:
    """A SKILL.md or command file's bytes and what the CLI reads of it; a file that cannot
    be read or decoded is an InputError naming it."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise InputError(path, f"cannot be read ({exc.strerror or exc})") from None
    return raw, read_as_cli(decode_skill_md(raw, path))


def read_skill(
    folder: str | os.PathLike[str], membership: tuple[Plugin, PluginSkill] | None = None
) -> Skill:
    """Read the skill in ``folder`` (which must hold SKILL.md) as the CLI reads it, as a
    skill of the plugin ``membership`` names (None: of the plugin found from below, if any).

    Rule violations and what the CLI reads differently from the file's intent are warnings
    (the skill is tested as the CLI lists it); only a file that cannot be read at all is an
    InputError.
    """
    path = os.path.abspath(os.fspath(folder))
    skill_md = os.path.join(path, SKILL_FILE)
    if not os.path.isdir(path):
        raise InputError(path, "skill folder does not exist")
    if not os.path.isfile(skill_md):
        raise InputError(skill_md, "not found (a skill folder must hold SKILL.md)")
    raw, reading = read_cli_file(skill_md)
    if reading.how == "none" and _opens_fence(reading.body):
        raise InputError(
            skill_md,
            "frontmatter is not closed: no second '---' line after the first (Claude Code "
            "would list the skill with '---' as its description); close it with a '---' line",
        )
    description = reading.description
    described = description is not None
    if description is None:
        description = reading.body_line or "Skill"
    name, name_warnings = _name_from(reading.mapping, os.path.basename(path), skill_md)
    if membership is None:
        membership = plugin_of(path)
    plugin, place = membership if membership is not None else (None, None)
    skill = Skill(
        name=name,
        description=description,
        path=path,
        skill_md=skill_md,
        frontmatter=reading.mapping,
        body=reading.body,
        warnings=(),
        raw=raw,
        plugin=plugin,
        place=place,
        reading=reading,
        described=described,
    )
    all_warnings = [*reading_warnings(skill), *name_warnings, *validation_warnings(skill)]
    return dataclasses.replace(skill, warnings=tuple(all_warnings))


def _opens_fence(text: str) -> bool:
    """Whether a file the CLI found no frontmatter in starts with a ``---`` line: its
    frontmatter was begun and never closed."""
    first = text.removeprefix(BOM).split("\n", 1)[0]
    return first.strip(JS_SPACE) == "---"


def reading_warnings(skill: Skill) -> list[str]:
    """The warning of :func:`reading_note`, naming the file."""
    note = reading_note(skill)
    return [f"{skill.skill_md}: {note}"] if note else []


def reading_note(skill: Skill) -> str | None:
    """What the CLI reads differently from what the file means, said before any call: the
    text it lists, and the change to the file that makes the two agree (None: nothing)."""
    reading = skill.reading
    if reading is None:
        return None
    tested = f"the description tested is {skill.description[:80]!r}"
    if reading.how == "none":
        return f"no frontmatter: Claude Code lists the skill with its first line; {tested}"
    if reading.how == "rescued":
        fix = "; ".join(reading.quoted_lines())
        return (
            f"frontmatter is not valid YAML ({reading.problem}); Claude Code reads it after "
            f"quoting its values, so {tested}"
            + (f"; quote them to make it valid: {fix}" if fix else "")
        )
    if reading.how == "ignored":
        return (
            f"frontmatter is not readable YAML ({reading.problem}), not even as Claude Code "
            f"retries it: it reads no key of it, so {tested} (the first line of the body)"
        )
    if not skill.described:
        return f"no description: Claude Code lists the first line of the body instead, so {tested}"
    return None


def description_problems(description: str) -> list[str]:
    """Reasons why ``description`` may not be written into a SKILL.md (empty list: fine).

    These are the Agent Skills limits; a skill that already breaks them is still evaluated
    (with a warning), but the tool must never produce one.
    """
    problems: list[str] = []
    if not description.strip():
        problems.append("description is empty")
    if len(description) > MAX_DESCRIPTION:
        problems.append(
            f"description is {len(description)} characters long (at most {MAX_DESCRIPTION})"
        )
    if "<" in description or ">" in description:
        problems.append("description contains '<' or '>' (not allowed in Agent Skills)")
    if "---" in description:
        problems.append("description contains '---', where Claude Code ends the frontmatter")
    if description.strip(JS_SPACE) != description:
        problems.append("description starts or ends with blanks, which Claude Code drops")
    return problems


def validation_warnings(skill: Skill) -> list[str]:
    """Agent Skills rules the skill breaks, one line each naming SKILL.md.

    Warnings, not errors: real skills break these rules and Claude Code still loads them, so
    we test them as they are.
    """
    where = skill.skill_md
    warnings = [
        f"{where}: unexpected frontmatter key {key!r} (Agent Skills allows "
        f"{', '.join(ALLOWED_KEYS)})"
        for key in skill.frontmatter
        if key not in ALLOWED_KEYS
    ]
    if not _NAME_RE.match(skill.name):
        warnings.append(
            f"{where}: name {skill.name!r} is not kebab-case (lowercase letters, digits, "
            "single hyphens)"
        )
    if len(skill.name) > MAX_NAME:
        warnings.append(f"{where}: name is {len(skill.name)} characters long (at most {MAX_NAME})")
    if skill.alias is not None:
        warnings.append(
            f"{where}: name {skill.name!r} differs from the folder name {skill.folder!r}: "
            f"Claude Code lists the skill as '{skill.id} ({skill.alias})' and its id is "
            f"{skill.id!r} (rename one to match the other to list it plainly)"
        )
    if len(skill.description) > MAX_DESCRIPTION:
        warnings.append(
            f"{where}: description is {len(skill.description)} characters long "
            f"(at most {MAX_DESCRIPTION})"
        )
    if "<" in skill.description or ">" in skill.description:
        warnings.append(f"{where}: description contains '<' or '>' (not allowed in Agent Skills)")
    return warnings
