"""What the model is shown when it decides whether to use a skill.

A :class:`TriggerContext` is the skill under test (with the description being tested) and the
skills it competes with. Claude Code never offers a skill alone: its built-in skills and the
project's other skills are listed next to it, so we do the same. Backends turn a context into
their own request; the store keys results by a hash of that request.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from pytest_skilltrigger.model.turn import TurnRule

# How Claude Code lists a skill (observed with the pinned CLI): ``- <name>: <text>``, the text
# being the description plus `` - <when_to_use>`` when the frontmatter has one, each run of
# control or format characters (line breaks, tabs, zero-width characters) shown as one space,
# ``<`` and ``>`` as ``&lt;`` and ``&gt;``, and cut at this many characters (the last one then
# ``…``).
LISTED_LIMIT = 1536
ELLIPSIS = "\u2026"
_CONTROL_RUN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]+"
)


def _uncut(description: str, when_to_use: str | None) -> str:
    text = description if not when_to_use else f"{description} - {when_to_use}"
    text = _CONTROL_RUN.sub(" ", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def listed_text(description: str, when_to_use: str | None = None) -> str:
    """The text Claude Code shows after a skill's name in its listing.

    As the CLI does it: folded and escaped first, then cut (so an escaped ``&lt;`` counts four
    characters towards the limit).
    """
    text = _uncut(description, when_to_use)
    if len(text) > LISTED_LIMIT:
        text = text[: LISTED_LIMIT - 1] + ELLIPSIS
    return text


def cut_point(description: str, when_to_use: str | None = None) -> tuple[int, str] | None:
    """Where the listing cuts the text: (the first character of the escaped text not shown,
    the shown text just before it), or None when it fits."""
    text = _uncut(description, when_to_use)
    if len(text) <= LISTED_LIMIT:
        return None
    cut = LISTED_LIMIT - 1
    return cut, text[max(0, cut - 30) : cut]


# Where Claude Code lists a skill (observed with the pinned CLI): the user's skills, then the
# project's, then the project's and the user's commands together, then every plugin's commands,
# then every plugin's skills, plugin after plugin in the order they were loaded (a skill's
# ``group`` is FIRST_PLUGIN + that position), each plugin's as its manifest orders them; the
# other parts sorted by name, as JavaScript's ``localeCompare`` sorts (see
# :func:`listing_order`); the built-ins last. Of two items of one name, the first listed wins.
USER, PROJECT, FIRST_PLUGIN = 0, 1, 2


@dataclass(frozen=True)
class ListedSkill:
    """One skill of the listing, as its SKILL.md gives it.

    ``name`` is the skill's id, the name the CLI lists and loads it by: its folder's name,
    ``plugin:folder`` for a plugin's skill. ``alias`` is the frontmatter name when it differs
    from the folder (``plugin:name`` for a plugin's skill): the CLI shows it in parentheses
    and loads the skill by it too. ``skill_md`` is the file's text when the skill is a real
    one (a backend that installs skills writes it as it is); built-in competitors have none.
    """

    name: str
    description: str
    when_to_use: str | None = None
    skill_md: str | None = field(default=None, compare=False, repr=False)
    # one of Claude Code's bundled built-ins: past the listing budget they keep their text
    # (``model/listing_budget.py``)
    bundled: bool = field(default=False, compare=False)
    # a built-in command's line lengths in the real CLI (full, bare), which the budget counts
    # in place of our own wording's
    cli_sizes: tuple[int, int] | None = field(default=None, compare=False, repr=False)
    alias: str | None = None
    group: int = PROJECT
    # a command (a ``commands/*.md`` file): listed as a skill is, after the skills of the
    # project and before those of its plugin
    command: bool = False
    # how much the user has used it: the CLI's score, ``usageCount`` decayed by the weeks
    # since the last use; past the listing budget the most used keep their text (0: unused)
    usage: float = 0.0
    # its place among its plugin's skills or commands, as the manifest orders them (0 for the
    # others, which are listed by name)
    order: int = field(default=0, compare=False)

    @property
    def listed(self) -> str:
        """The text the model sees after the skill's name."""
        return listed_text(self.description, self.when_to_use)

    @property
    def label(self) -> str:
        """The name as the listing shows it: the id, and the alias in parentheses."""
        return f"{self.name} ({self.alias})" if self.alias else self.name

    @property
    def line(self) -> str:
        """The listing line the model sees."""
        return f"- {self.label}: {self.listed}"

    @property
    def bare_line(self) -> str:
        """The line past the listing budget: the name (and alias) without the text."""
        return f"- {self.label}"

    @property
    def plugin(self) -> str | None:
        """The plugin the skill comes with (None: a user's or the project's skill)."""
        return self.name.partition(":")[0] if self.group >= FIRST_PLUGIN else None

    @property
    def folder(self) -> str:
        """The name of the skill's folder (the id without its plugin)."""
        return self.name.rpartition(":")[2] if self.plugin else self.name

    @property
    def frontmatter_name(self) -> str:
        """The name SKILL.md gives (the folder's when it gives none or the same)."""
        return self.alias.rpartition(":")[2] if self.alias else self.folder


def _nearer_first(skill: ListedSkill, farther: Sequence[ListedSkill]) -> tuple[object, ...]:
    """The listing order, the skills of the session's own folder before the project root's
    (a session started in a subfolder lists that folder's skills first)."""
    order = listing_order(skill)
    return (*order[:2], any(skill is s for s in farther), *order[2:])


def collation_key(name: str) -> tuple[tuple[int, str], ...]:
    """A name's order as ``localeCompare`` gives it for the names the CLI lists: punctuation
    before digits before letters, letters without regard to case."""
    return tuple((2, c.lower()) if c.isalpha() else (1, c) if c.isdigit() else (0, c) for c in name)


def listing_order(
    skill: ListedSkill,
) -> tuple[int, int, int, int, tuple[tuple[int, str], ...], str]:
    """Where an item stands in Claude Code's listing (see :data:`FIRST_PLUGIN`): a user's or
    the project's command after the project's skills; every plugin's commands (plugin after
    plugin), then every plugin's skills; a plugin's items as its manifest orders them."""
    if skill.group >= FIRST_PLUGIN:
        part = (FIRST_PLUGIN, 1 - int(skill.command), skill.group, skill.order)
    elif skill.command:
        part = (PROJECT, 1, 0, 0)
    else:
        part = (skill.group, 0, 0, 0)
    return (*part, collation_key(skill.name), skill.name)


@dataclass(frozen=True)
class ProjectSetup:
    """What a project gives Claude Code beside its skills (``--trigger-setup=project``): its
    root, its ``CLAUDE.md`` and its other files (``.claude/settings.json``, ``.mcp.json``,
    hook scripts) as ``(path relative to the root, text)``."""

    root: str
    claude_md: str | None = None
    files: tuple[tuple[str, str], ...] = ()

    def file(self, name: str) -> str | None:
        return next((text for path, text in self.files if path == name), None)


@dataclass(frozen=True)
class Subfolder:
    """Where a skill of a monorepo's subfolder (``<folder>/.claude/skills`` below the project
    root) is offered, as the pinned CLI offers it.

    By default the session starts at the project root, where the skill is not listed: it is
    found when the model reads a file under ``folder`` (``read_path``, whose Read result is
    ``read_text``), and then announced with its siblings after that result. ``started_in``:
    the session starts in ``folder`` instead, and its skills are listed at the start, before
    the root's. ``root_skills`` are the project root's own skills.
    """

    folder: str
    read_path: str = ""
    read_text: str = ""
    started_in: bool = False
    root_skills: tuple[ListedSkill, ...] = ()

    def suffix(self, clash: bool) -> str:
        """What the announcement adds after a found skill's text (our words)."""
        if clash:
            return (
                f" (for files under {self.folder}/, in place of the project's skill of that name)"
            )
        return f" (from {self.folder}/.claude/skills, for files under {self.folder}/)"


def resolve_call(listing: Sequence[ListedSkill], called: str) -> str | None:
    """The id of the skill Claude Code loads for a ``Skill`` call naming ``called``, or None
    when it refuses the name: a skill is a trigger only if the CLI would load it.

    As the pinned CLI resolves it: trimmed, a leading ``/`` dropped, case-sensitive; the id
    or the alias of a listed skill; else a bare name, the frontmatter name of exactly one
    plugin skill (a user's or project skill's id or alias has already won). A bare folder
    name of a plugin skill whose frontmatter name differs, or a name several plugins share,
    is refused.
    """
    name = called.strip().removeprefix("/")
    for skill in listing:
        if name == skill.name:
            return skill.name
    for skill in listing:
        if name == skill.alias:
            return skill.name
    if ":" in name:
        return None
    matches = [s.name for s in listing if s.plugin and s.frontmatter_name == name]
    return matches[0] if len(matches) == 1 else None


# Generic skills of the kinds Claude Code lists as built-ins (charts, settings, key bindings,
# code review, simplifying code, permission prompts, loops, API reference, workflows, running
# the app, plugins, project set-up, security review), written for this project: the skill
# under test competes the way it will in real use. The wording is ours. The last two stand for
# the built-in commands, which the listing budget may show as bare names; the rest for the
# bundled skills, which keep their text.
_GENERIC: tuple[ListedSkill, ...] = (
    ListedSkill(
        "charts",
        "Turn data into a chart, plot or small dashboard. Use when the user "
        "asks to visualise numbers or a table.",
    ),
    ListedSkill(
        "settings",
        "Change how this assistant is configured: permissions, hooks, "
        "environment variables, model and settings files.",
    ),
    ListedSkill("key-bindings", "Customise the assistant's keyboard shortcuts and key chords."),
    ListedSkill(
        "review",
        "Review a diff, branch or pull request for bugs and risky changes, "
        "reporting findings by file and line.",
    ),
    ListedSkill(
        "simplify",
        "Simplify recently changed code: remove duplication and needless "
        "complexity without changing behaviour.",
    ),
    ListedSkill(
        "permission-rules",
        "Work out which tool permissions to allow or deny so the assistant asks fewer questions.",
    ),
    ListedSkill(
        "loop",
        "Run a prompt or command again and again on an interval, for polling "
        "or babysitting a long task.",
    ),
    ListedSkill(
        "claude-api",
        "Answer questions about building with the Claude API and SDKs, "
        "with exact parameters and examples.",
    ),
    ListedSkill("workflows", "Write or fix automation workflow files such as CI pipelines."),
    ListedSkill("run-app", "Start the project's app or dev server and check that it works."),
    ListedSkill(
        "plugin-authoring",
        "Create or package a plugin for this assistant: commands, agents, skills and hooks.",
    ),
    ListedSkill(
        "project-init",
        "Set up a memory file describing this project's layout, commands and conventions.",
    ),
    ListedSkill(
        "security-review",
        "Review the pending changes for security problems such as "
        "injection, secrets and unsafe input handling.",
    ),
)
# the built-in commands' lines in the pinned CLI (2.1.328): 67 and 90 characters, bare 6 and 17
_CLI_SIZES = {"project-init": (67, 6), "security-review": (90, 17)}
DEFAULT_COMPETITORS = tuple(
    replace(s, bundled=s.name not in _CLI_SIZES, cli_sizes=_CLI_SIZES.get(s.name)) for s in _GENERIC
)


@dataclass(frozen=True)
class TriggerContext:
    """The skill under test, the description being tested, and what it competes with.

    ``model_invocable`` is false for a skill Claude Code does not list to the model
    (``disable-model-invocation: true``, or a non-empty ``paths``): it can never trigger and
    no run is made; ``unlisted_reason`` says why.
    """

    skill_name: str
    description: str
    siblings: tuple[ListedSkill, ...] = ()
    generic_competitors: tuple[ListedSkill, ...] = DEFAULT_COMPETITORS
    when_to_use: str | None = None
    model_invocable: bool = True
    skill_md: str | None = field(default=None, compare=False, repr=False)
    unlisted_reason: str | None = field(default=None, compare=False)
    # skills installed for the user (``~/.claude/skills``, a team's plugin): listed before the
    # project's and sharing the listing with them, never tested themselves
    installed: tuple[ListedSkill, ...] = ()
    # the model of a matrix this context runs on (None: the session's first); each model's
    # backend puts its own into the key
    model: str | None = None
    # the tested skill's alias and place in the listing (see ListedSkill)
    alias: str | None = None
    group: int = PROJECT
    # the conversation before the query: canonical JSON of its turns, as the Messages API
    # takes them (None: the query opens the session)
    history: str | None = None
    # the skill under test's usage (see ListedSkill.usage): a new skill has none
    usage: float = 0.0
    # the skill under test's place among its plugin's skills (see ListedSkill.order)
    order: int = field(default=0, compare=False)
    # the project's own setup the session runs under (None: a clean workspace)
    project: ProjectSetup | None = None
    # the permission mode the session runs in (None: the default)
    permission_mode: str | None = None
    # the subfolder the skill and its siblings live in (None: the project root, or a plugin)
    subfolder: Subfolder | None = None
    # what counts as a trigger within a run (None: the first call decides; a TurnRule: the
    # run goes on through read-only looking around, see :mod:`.turn`)
    within: TurnRule | None = None

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """The hash of the fields that compare, worked out once: every run looks its
        request up by its context."""
        compared = (f.name for f in fields(self) if f.compare)
        return hash(tuple(getattr(self, name) for name in compared))

    def with_description(self, description: str) -> TriggerContext:
        """The same context testing another description (used by the optimizer)."""
        return replace(self, description=description)

    def on_model(self, model: str | None) -> TriggerContext:
        """The same context on another model of the matrix (itself on its own model: what
        it worked out once, its listing, stays with it)."""
        return self if model == self.model else replace(self, model=model)

    def in_mode(self, mode: str | None) -> TriggerContext:
        """The same context in another permission mode of a matrix (None: its own)."""
        if mode is None:
            return self
        return replace(self, permission_mode=None if mode == "default" else mode)

    def with_history(self, history: str | None) -> TriggerContext:
        """The same context after a conversation (an eval entry's), or at its start."""
        return self if history == self.history else replace(self, history=history)

    @property
    def tested(self) -> ListedSkill:
        """The skill under test as the listing shows it (whether or not it is listed)."""
        return ListedSkill(
            self.skill_name,
            self.description,
            self.when_to_use,
            self.skill_md,
            alias=self.alias,
            group=self.group,
            usage=self.usage,
            order=self.order,
        )

    def listing(self) -> list[ListedSkill]:
        """Every listed skill, in Claude Code's order: the user's, the project's, each
        plugin's (see :data:`FIRST_PLUGIN`), each group sorted by id, then the built-ins. A
        user's skill shadows a project skill of its id (one of the tested skill's own is an
        input error before this), and either shadows a built-in of its name; a skill that may
        not be invoked by the model is not listed."""
        return list(self._listing)

    @cached_property
    def _listing(self) -> tuple[ListedSkill, ...]:
        """The listing, worked out once: every run's outcome resolves its call against it,
        and a crowded install's sorting is not free."""
        own = self.own_listing()
        names = {s.name for s in own}
        return (*own, *(s for s in self.generic_competitors if s.name not in names))

    def own_listing(self) -> list[ListedSkill]:
        """The listed skills and commands that are not Claude Code's built-ins, in the
        listing's order: those that must exist as files for the CLI to list them. Of two of
        one name the first in that order is listed (a user's skill before the project's, a
        project skill before a command, a plugin's command before its skill); of two in the
        same place, the tested skill, then its siblings, then the session's others."""
        candidates = self.folder_skills() if not self.found_by_read else []
        farther = self.subfolder.root_skills if self.subfolder is not None else ()
        candidates += farther
        candidates += [s for s in self.installed if s.command or s.name != self.skill_name]
        listed: dict[str, ListedSkill] = {}
        for skill in sorted(candidates, key=lambda s: _nearer_first(s, farther)):
            listed.setdefault(skill.name, skill)  # stable: ties keep the order above
        return list(listed.values())

    @property
    def found_by_read(self) -> bool:
        """Whether the skill's folder is a subfolder found only after a Read of a file there
        (not listed in the first request)."""
        return self.subfolder is not None and not self.subfolder.started_in

    def folder_skills(self) -> list[ListedSkill]:
        """The tested skill (when listed) and its siblings."""
        found = [s for s in self.siblings if s.name != self.skill_name]
        if self.model_invocable:
            found.insert(0, self.tested)
        return found

    def discovered(self) -> list[ListedSkill]:
        """The skills of a subfolder found after the model read a file there, in the order
        and under the names the CLI announces them: by name, a name the listing has already
        as ``<folder>:<name>``, each with its note of where it applies. Empty for a skill
        listed at the start."""
        return list(self._discovered)

    @cached_property
    def _discovered(self) -> tuple[ListedSkill, ...]:
        """The skills found, worked out once: every run's outcome resolves its call
        against them."""
        if self.subfolder is None or self.subfolder.started_in:
            return ()
        folder = self.subfolder.folder
        taken = {s.name for s in self._listing}
        found = []
        for skill in sorted(self.folder_skills(), key=lambda s: collation_key(s.name)):
            name = skill.name.rpartition(":")[2]
            found.append(replace(skill, name=f"{folder}:{name}" if name in taken else name))
        return tuple(found)

    def discovery_line(self, skill: ListedSkill) -> str:
        """A found skill's line in the announcement: its listing line and where it applies."""
        assert self.subfolder is not None
        clash = skill.name.startswith(self.subfolder.folder + ":")
        return skill.line + self.subfolder.suffix(clash)

    def shadowing_command(self) -> ListedSkill | None:
        """The command listed under the tested skill's id in its place (a plugin's command
        of the same name wins over its skill, as in the pinned CLI), if any."""
        return next((s for s in self._listing if s.command and s.name == self.skill_name), None)

    def resolve(self, called: str) -> str | None:
        """The id of the listed skill a ``Skill`` call naming ``called`` loads (see
        :func:`resolve_call`)."""
        return resolve_call((*self._listing, *self._discovered), called)

    def key(self, **extra: Any) -> str:
        """A stable hash of everything that shapes the request, plus backend specifics.

        Not which skill is under test: the request is the same for every skill of a listing,
        so runs stored by one skill's items serve another's (a sibling's queries checked in
        the improvement rounds); a run's verdict is read from what it chose, for the skill
        asking."""
        payload: dict[str, Any] = {
            "listing": [s.line for s in self.listing()],
            **extra,
        }
        if self.history is not None:  # a context without one keeps the key it had
            payload["history"] = self.history
        used = {s.name: s.usage for s in self.listing() if s.usage}
        if used:  # which skills keep their text past the budget: the request can differ
            payload["usage"] = used
        if self.project is not None:  # its instructions, hooks and servers shape the run
            payload["project"] = [self.project.claude_md, list(self.project.files)]
        if self.permission_mode is not None:
            payload["permission_mode"] = self.permission_mode
        if self.within is not None:  # a run goes on through looking around, so far
            payload["within"] = ["turn", self.within.bound]
        if self.subfolder is not None:  # where the skill is found, and how
            sub = self.subfolder
            found = [self.discovery_line(s) for s in self.discovered()]
            payload["subfolder"] = [sub.folder, sub.started_in, sub.read_path, sub.read_text, found]
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def one_line(text: str) -> str:
    """A description as one listing line: whitespace (including newlines) folded to spaces."""
    return " ".join(text.split())
