"""Reading and validating Agent Skills (a folder holding ``SKILL.md``).

The frontmatter is read as YAML reads it (``yaml.safe_load``), because the old line-based
reader kept backslash escapes, left stray quotes and joined block scalars with spaces: the
description we test must be the one Claude sees. Files in the wild that are not valid YAML
(typically a plain description containing ``": "``) are still loaded by Claude Code, so they are
read leniently with a warning instead of being rejected.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.skills.frontmatter import BOM, decode_skill_md, parse_frontmatter
from pytest_skilltrigger.skills.plugins import Plugin, plugin_of
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import SKILL_FILE
MAX_DESCRIPTION = 1024
MAX_NAME = 64
ALLOWED_KEYS = (
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
    "compatibility",
    # read by Claude Code: appended to the listed description / keep the skill unlisted /
    # whether a user may run it by name
    "when_to_use",
    "disable-model-invocation",
    "paths",
    "user-invocable",
)
_NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


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

    @property
    def folder(self) -> str:
        """The name of the skill's folder."""
        return os.path.basename(self.path)

    @property
    def id(self) -> str:
        """The name Claude Code lists the skill by: ``folder`` or ``plugin:folder``."""
        return f"{self.plugin.name}:{self.folder}" if self.plugin else self.folder

    @property
    def alias(self) -> str | None:
        """The frontmatter name as the listing shows it beside the id, when it differs from
        the folder's (``plugin:name`` for a plugin's skill); the CLI loads the skill by it
        too."""
        if self.name == self.folder:
            return None
        return f"{self.plugin.name}:{self.name}" if self.plugin else self.name

    @property
    def when_to_use(self) -> str | None:
        """The ``when_to_use`` text Claude Code appends to the listed description."""
        value = self.frontmatter.get("when_to_use")
        return value if isinstance(value, str) and value.strip() else None

    @property
    def unlisted_reason(self) -> str | None:
        """Why Claude Code does not list the skill to the model, if it does not: it then never
        triggers (a user can still run it by name). ``disable-model-invocation: true``; or a
        non-empty ``paths`` (a glob or a list): such a skill is listed only once the session
        works on matching files, never for a one-shot request, even with a matching file in
        the project (observed with the pinned CLI; ``paths: []`` is listed)."""
        if self.frontmatter.get("disable-model-invocation") is True:
            return (
                "disable-model-invocation: true in SKILL.md: Claude Code does not list this "
                "skill to the model, so it can never trigger"
            )
        paths = self.frontmatter.get("paths")
        if paths not in (None, "", [], {}):
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
    """The skill's name; the folder name (with a warning) when the frontmatter has none."""
    value = frontmatter.get("name")
    if value is None or value == "":
        return folder_name, [f"{where}: no 'name' in frontmatter; using the folder name"]
    if not isinstance(value, str):  # typed scalars already read as text (TextKeysLoader)
        raise InputError(where, f"'name' must be a string, not {type(value).__name__}")
    return value, []


def read_skill(folder: str | os.PathLike[str]) -> Skill:
    """Read the skill in ``folder`` (which must hold SKILL.md) and validate it.

    Rule violations are warnings (the skill is tested as it is); only what makes the skill
    unusable (no file, no frontmatter, no description) is an InputError.
    """
    path = os.path.abspath(os.fspath(folder))
    skill_md = os.path.join(path, SKILL_FILE)
    if not os.path.isdir(path):
        raise InputError(path, "skill folder does not exist")
    if not os.path.isfile(skill_md):
        raise InputError(skill_md, "not found (a skill folder must hold SKILL.md)")
    try:
        with open(skill_md, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise InputError(skill_md, f"cannot be read ({exc.strerror or exc})") from None
    text = decode_skill_md(raw, skill_md)
    frontmatter, body, warnings = parse_frontmatter(text, skill_md)
    description = frontmatter.get("description")
    if description is None:
        raise InputError(skill_md, "frontmatter has no 'description'")
    if not isinstance(description, str):
        raise InputError(
            skill_md, f"'description' must be a string, not {type(description).__name__}"
        )
    if not description.strip():
        raise InputError(skill_md, "'description' is empty")
    name, name_warnings = _name_from(frontmatter, os.path.basename(path), skill_md)
    skill = Skill(
        name=name,
        description=description,
        path=path,
        skill_md=skill_md,
        frontmatter=frontmatter,
        body=body,
        warnings=(),
        raw=raw,
        plugin=plugin_of(path),
    )
    all_warnings = [*warnings, *name_warnings, *validation_warnings(skill)]
    return dataclasses.replace(skill, warnings=tuple(all_warnings))


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
