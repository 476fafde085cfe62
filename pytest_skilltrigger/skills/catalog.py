"""Finding what to test: skills, their eval sets and their competitors.

A *target* is one skill with its eval set, the description to start from and the sibling
skills it competes with. Everything is read and checked here, before any run, so bad input
fails fast with one line and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from pytest_skilltrigger.model.context import (
    FIRST_PLUGIN,
    LISTED_LIMIT,
    PROJECT,
    USER,
    ListedSkill,
    TriggerContext,
    cut_point,
    resolve_call,
)
from pytest_skilltrigger.skills.commands import (
    COMMANDS_FOLDER,
    PROJECT_COMMANDS,
    project_of,
    read_commands,
)
from pytest_skilltrigger.skills.discovery import discover_skills
from pytest_skilltrigger.skills.drafted_set import EXTRA_NAME
from pytest_skilltrigger.skills.evalset import (
    EvalEntry,
    EvalSet,
    find_eval_set,
    is_valid_unicode,
    load_eval_set,
)
from pytest_skilltrigger.skills.plugin_eval.read import (
    NotCollected,
    TriggerCase,
    eval_set_of,
    pinned_models,
    read_plugin_eval,
)
from pytest_skilltrigger.skills.plugins import MANIFEST, SKILLS_FOLDER, Plugin, read_plugin
from pytest_skilltrigger.skills.routing_set import RoutingSet, find_routing_set, load_routing_set
from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import within

# The group of the plugins given with --trigger-extra-skills: after the tested ones (the CLI
# lists the plugins it is given first, the installed ones after).
EXTRA_PLUGINS_FROM = FIRST_PLUGIN + 1000


@dataclass(frozen=True)
class Target:
    """One skill to test, as everything downstream needs it.

    ``siblings`` are the skills of its folder (or plugin): the optimizer measures what a new
    description does to them. ``installed`` are the other skills every listing of the
    session shows: the user's (``--trigger-extra-skills``), the plugins', and for a plugin's
    skill the project's.
    """

    skill: Skill
    eval_set: EvalSet
    description: str
    siblings: tuple[ListedSkill, ...]
    warnings: tuple[str, ...]
    installed: tuple[ListedSkill, ...] = ()
    group: int = PROJECT

    @property
    def name(self) -> str:
        """The skill's id (``folder`` or ``plugin:folder``), as the CLI lists it."""
        return self.skill.id

    @cached_property
    def start_context(self) -> TriggerContext:
        """The context of the starting description, built once: every item of the skill uses
        it, and the sampler keys its store lookups by it."""
        listing = Listing(self.siblings, self.installed, self.group)
        return context_of(self.skill, self.description, listing)

    def context(self, description: str | None = None) -> TriggerContext:
        """The trigger context for the starting description, or another one."""
        if description is None or description == self.description:
            return self.start_context
        return self.start_context.with_description(description)


@dataclass(frozen=True)
class Listing:
    """What a skill is listed with (its siblings, the session's other skills) and where it
    is listed itself (its group, see :data:`~pytest_skilltrigger.model.context.PROJECT`)."""

    siblings: tuple[ListedSkill, ...] = ()
    installed: tuple[ListedSkill, ...] = ()
    group: int = PROJECT


def context_of(skill: Skill, description: str, listing: Listing = Listing()) -> TriggerContext:
    """The trigger context of a skill (its listing keys, its file) with a description."""
    return TriggerContext(
        skill.id,
        description,
        listing.siblings,
        when_to_use=skill.when_to_use,
        model_invocable=skill.model_invocable,
        unlisted_reason=skill.unlisted_reason,
        skill_md=skill.text,
        installed=listing.installed,
        alias=skill.alias,
        group=listing.group,
    )


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
        skill.id, skill.description, skill.when_to_use, skill.text, alias=skill.alias, group=group
    )


def load_installed(paths: Sequence[str]) -> tuple[ListedSkill, ...]:
    """The skills under ``paths`` (``--trigger-extra-skills``) as they compete in every
    listing: a plugin's (a folder with a plugin manifest, or a skill of one) as its
    ``plugin:folder`` skills, after the tested plugins, in the order given; a plain folder's
    as the user's skills, first. Those the model is not shown are left out. InputError for
    a path without skills or a bad one."""
    found: dict[str, ListedSkill] = {}
    plugins: list[str] = []
    for path in paths:
        skills = discover_skills(path)
        if not skills:
            raise InputError(path, "--trigger-extra-skills: no SKILL.md found here")
        for skill in skills:
            group = USER
            if skill.plugin is not None:
                if skill.plugin.root not in plugins:
                    plugins.append(skill.plugin.root)
                group = EXTRA_PLUGINS_FROM + plugins.index(skill.plugin.root)
            if skill.model_invocable:
                found.setdefault(skill.id, listed_skill(skill, group))
    commands = [
        command
        for index, root in enumerate(plugins)
        for command in read_commands(
            os.path.join(root, COMMANDS_FOLDER), EXTRA_PLUGINS_FROM + index, read_plugin(root).name
        )
    ]
    return tuple(found.values()) + tuple(commands)


def listing_warnings(skill: Skill, description: str) -> list[str]:
    """What keeps the model from seeing the description as written, one line each."""
    where = skill.skill_md
    if skill.unlisted_reason:
        return [f"{where}: {skill.unlisted_reason}; its should-trigger queries fail without a call"]
    found = cut_point(description, skill.when_to_use)
    if found is None:
        return []
    cut, before = found
    return [
        f"{where}: the listed text (description plus when_to_use, '<' and '>' counted as "
        f"'&lt;' and '&gt;') is longer than {LISTED_LIMIT} characters; Claude Code cuts it, "
        f"so the model never sees what follows {before!r} (from character {cut + 1} on)"
    ]


def lists_neighbours(folder: str, paths: Sequence[str] = ()) -> bool:
    """Whether the skills in ``folder`` are listed beside each other: Claude Code lists a
    folder of skills (``.claude/skills``, a plugin's ``skills/``), and a folder the user
    named (or one below it) is taken as one; the folder a checkout of one skill sits in
    (``~/src``) is not, or the listing would hold whatever else is checked out there."""
    if os.path.basename(folder) == SKILLS_FOLDER:
        return True
    return any(within(folder, os.path.abspath(path)) for path in paths)


def _siblings(
    skill: Skill,
    read: Callable[[str], Skill] = read_skill,
    group: int = PROJECT,
    paths: Sequence[str] | None = None,
) -> tuple[tuple[ListedSkill, ...], list[str]]:
    """The other skills in the folder that holds this skill (a plugin's: its other skills),
    listed in ``group``; unreadable ones are skipped. ``read`` reads a skill folder (a
    session's targets share one cache); ``paths``, the paths given, decide whether that
    folder is a folder of skills (:func:`lists_neighbours`; None: it is)."""
    parent = os.path.dirname(skill.path)
    if paths is not None and not lists_neighbours(parent, paths):
        return (), []
    listed: list[ListedSkill] = []
    warnings: list[str] = []
    for entry in sorted(os.listdir(parent)):
        folder = os.path.join(parent, entry)
        if folder == skill.path or not os.path.isfile(os.path.join(folder, "SKILL.md")):
            continue
        try:
            other = read(folder)
        except InputError as exc:
            warnings.append(f"{exc} (sibling skipped)")
            continue
        if other.model_invocable:  # an unlisted sibling competes with nothing
            listed.append(listed_skill(other, group))
    return tuple(listed), warnings


def _reader(known: dict[str, Skill]) -> Callable[[str], Skill]:
    """``read_skill`` that reads each folder once: in a folder of N skills every one lists
    the other N - 1, and their SKILL.md files are parsed once, not N times."""
    failed: dict[str, InputError] = {}

    def read(folder: str) -> Skill:
        if folder in failed:
            raise failed[folder]
        if folder not in known:
            try:
                known[folder] = read_skill(folder)
            except InputError as exc:
                failed[folder] = exc
                raise
        return known[folder]

    return read


@dataclass(frozen=True)
class TargetOptions:
    """How the skills in play are read: an eval file named for the only skill, a starting
    description in place of the file's, the ``--trigger-extra-skills`` skills, and whether a
    skill without an eval set is to be drafted (else it is left out with a note, or is an
    error when its own path was given)."""

    eval_set: str | None = None
    description: str | None = None
    installed: tuple[ListedSkill, ...] = ()
    draft_missing: bool = False


@dataclass(frozen=True)
class Found:
    """The skills in play: the targets, the skills without an eval set (to draft, or listed
    but not tested: they still compete in the listings), and the ``claude plugin eval``
    cases found that are not trigger checks (with why)."""

    targets: list[Target]
    missing: list[Skill]
    not_collected: list[NotCollected] = field(default_factory=list)


def load_targets(paths: Sequence[str], eval_set: str | None = None) -> list[Target]:
    """Every skill under ``paths`` that has an eval set (see :func:`find_targets`)."""
    return find_targets(paths, TargetOptions(eval_set=eval_set)).targets


def find_targets(paths: Sequence[str], options: TargetOptions = TargetOptions()) -> Found:
    """Every skill under ``paths`` with its eval set; raises InputError on any bad input.

    A skill without an eval set is left out into :attr:`Found.missing`; it is an error when
    the skill's own folder was given (and no draft was asked for), or when no skill has one.
    A drafted extra set beside the eval set (``evals/trigger-eval.drafted.json``) is read
    with it. Every context lists the session's plugins after the project's skills, in the
    order they were found, and a plugin's skill also lists the project's skills collected.
    """
    skills = _unique_skills(paths)
    _check_options(options, skills)
    read = _reader({skill.path: skill for skill in skills})
    session = _SessionSkills.of(skills, read, paths)
    cases = _PluginCases(session)
    targets, missing = [], []
    for skill in skills:
        found = cases.of(skill)
        evals = _eval_set(skill, options.eval_set, found)
        if evals is None:
            if not options.draft_missing and _given(skill, paths):
                seen = _cases_seen(cases.not_collected)
                raise InputError(skill.path, NO_EVAL_SET + "; name one with --eval-set" + seen)
            missing.append(skill)
            continue
        target = _target(skill, evals, options, session, read)
        targets.append(replace(target, warnings=target.warnings + tuple(pinned_models(found))))
    if missing and not targets and not options.draft_missing:
        raise _none_has_an_eval_set(missing, cases.not_collected)
    _check_clash(options.installed, targets)
    return Found(targets, missing, cases.not_collected)


def _none_has_an_eval_set(missing: Sequence[Skill], cases: Sequence[NotCollected]) -> InputError:
    """The error for a session whose skills all lack an eval set: which, and what to do."""
    if len(missing) == 1:
        return InputError(missing[0].path, NO_EVAL_SET + _cases_seen(cases))
    where = os.path.commonpath([skill.path for skill in missing])
    shown = ", ".join(skill.id for skill in missing[:5])
    more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
    return InputError(
        where,
        f"none of the {len(missing)} skills here has an eval set ({shown}{more}; looked for "
        "evals/trigger-eval.json and the other usual names); draft them with "
        "--draft-eval-set, or name one with --eval-set" + _cases_seen(cases),
    )


def _cases_seen(not_collected: Sequence[NotCollected], shown: int = 3) -> str:
    """The ``claude plugin eval`` cases that were found and why none is a trigger check, for
    the error that says no skill has an eval set."""
    if not not_collected:
        return ""
    each = [f"{os.path.basename(n.folder)} ({n.reason})" for n in not_collected[:shown]]
    more = len(not_collected) - shown
    tail = f"; and {more} more" if more > 0 else ""
    count = len(not_collected)
    return (
        f"; {count} claude plugin eval case(s) seen, none a trigger check: "
        + "; ".join(each)
        + tail
    )


def _eval_set(skill: Skill, named: str | None, cases: Sequence[TriggerCase]) -> EvalSet | None:
    """The skill's eval set (the one named, else the one found in its folder) with its
    ``claude plugin eval`` cases after its own entries; the cases alone when it has none."""
    found = named if named is not None else find_eval_set(skill.path)
    if found is None:
        return eval_set_of(cases, os.path.dirname(cases[0].folder)) if cases else None
    evals = load_eval_set(found)
    return with_entries(evals, eval_set_of(cases, evals.path).entries, {}) if cases else evals


class _PluginCases:
    """The ``claude plugin eval`` cases of the session's plugins (``<root>/evals``) and skill
    folders (``<skill>/evals``), read once per folder, by the skill they check."""

    def __init__(self, session: _SessionSkills) -> None:
        self.session = session
        self.not_collected: list[NotCollected] = []
        self._by_skill: dict[str, list[TriggerCase]] = {}
        self._read: set[str] = set()

    def of(self, skill: Skill) -> list[TriggerCase]:
        """The trigger cases that check ``skill``."""
        self._read_root(skill.path, [listed_skill(skill, group_of(skill, self.session.plugins))])
        if skill.plugin is not None:
            self._read_root(skill.plugin.root, self.session.skills_of(skill.plugin.root))
        seen: set[str] = set()
        unique = []
        for case in self._by_skill.get(skill.id, []):  # a prompt in two eval dirs: the first
            same = f"{_same_query(case.prompt)}\0{case.history}"
            if same not in seen:
                seen.add(same)
                unique.append(case)
        return unique

    def _read_root(self, root: str, listed: Sequence[ListedSkill]) -> None:
        """Read ``<root>/evals`` once; a case's skill is the one the CLI loads for the name
        its grader matches (an id, an alias, a bare name: see ``resolve_call``)."""
        if root in self._read:
            return
        self._read.add(root)
        spellings = dict.fromkeys(
            n for s in listed for n in (s.name, s.alias, s.frontmatter_name) if n
        )
        names = {n: resolve_call(listed, n) or n for n in spellings}
        found = read_plugin_eval(root, names=names)
        for case in found.cases:
            skill = resolve_call(listed, case.skill) or case.skill
            located = replace(case, skill=skill, folder=os.path.join(root, case.folder))
            self._by_skill.setdefault(skill, []).append(located)
        self.not_collected += [
            replace(n, folder=os.path.join(root, n.folder)) for n in found.not_collected
        ]


NO_EVAL_SET = (
    "no eval set found (looked for evals/trigger-eval.json and the other usual names); "
    "draft one with --draft-eval-set"
)


def _check_options(options: TargetOptions, skills: Sequence[Skill]) -> None:
    if options.eval_set is not None and len(skills) != 1:
        raise InputError("--eval-set", f"names one eval file but {len(skills)} skills were given")
    description = options.description
    if description is not None and not description.strip():
        raise InputError("--skill-description", "must not be empty")
    if description is not None and not is_valid_unicode(description):
        raise InputError("--skill-description", "is not valid UTF-8 text")


def _given(skill: Skill, paths: Sequence[str]) -> bool:
    """Whether the skill's own folder (or its SKILL.md) is one of the paths given."""
    return any(os.path.abspath(p) in (skill.path, skill.skill_md) for p in paths)


def _check_clash(installed: Sequence[ListedSkill], targets: Sequence[Target]) -> None:
    clash = sorted({s.name for s in installed} & {t.name for t in targets})
    if clash:
        raise InputError(
            "--trigger-extra-skills",
            f"installs a skill named {clash[0]!r}, "
            "like a tested one: an installed skill shadows it in Claude Code, "
            "so the one under test would never be seen",
        )


@dataclass(frozen=True)
class _SessionSkills:
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
        cls, skills: Sequence[Skill], read: Callable[[str], Skill], paths: Sequence[str] = ()
    ) -> _SessionSkills:
        plugins = tuple(dict.fromkeys(s.plugin.root for s in skills if s.plugin))
        _check_plugin_names([s.plugin for s in skills if s.plugin])
        folders = dict.fromkeys(
            os.path.dirname(s.path)
            for s in skills
            if s.plugin is None and lists_neighbours(os.path.dirname(s.path), paths)
        )
        plugin_folders = [os.path.join(root, SKILLS_FOLDER) for root in plugins]
        return cls(
            plugins,
            tuple(s for folder in plugin_folders for s in _folder_skills(folder, read, plugins)),
            tuple(s for folder in folders for s in _folder_skills(folder, read, plugins)),
            _commands(plugins, folders, [s.plugin for s in skills if s.plugin]),
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


def _commands(
    plugins: Sequence[str], folders: Iterable[str], known: Sequence[Plugin]
) -> tuple[ListedSkill, ...]:
    """The commands of the session's plugins and of the projects its skill folders are in
    (a folder ``<project>/.claude/skills``)."""
    names = {plugin.root: plugin.name for plugin in known}
    found = [
        command
        for index, root in enumerate(plugins)
        for command in read_commands(
            os.path.join(root, COMMANDS_FOLDER), FIRST_PLUGIN + index, names[root]
        )
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


def _folder_skills(
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


def _target(
    skill: Skill,
    evals: EvalSet,
    options: TargetOptions,
    session: _SessionSkills,
    read: Callable[[str], Skill],
) -> Target:
    group = group_of(skill, session.plugins)
    siblings, warnings = _siblings(skill, read, group, session.paths)
    start = options.description if options.description is not None else skill.description
    warnings += listing_warnings(skill, start)
    return Target(
        skill=skill,
        eval_set=with_drafted_extra(evals, skill.path),
        description=start,
        siblings=siblings,
        warnings=tuple(skill.warnings) + tuple(warnings),
        installed=tuple(options.installed) + session.neighbours(skill),
        group=group,
    )


def _unique_skills(paths: Sequence[str]) -> list[Skill]:
    """Every skill under ``paths``, once each even when reached through a symlink."""
    skills: list[Skill] = []
    seen: set[str] = set()
    for path in paths:
        for skill in discover_skills(path):
            real = os.path.realpath(skill.skill_md)
            if real not in seen:
                seen.add(real)
                skills.append(skill)
    return skills


def with_drafted_extra(evals: EvalSet, skill_path: str) -> EvalSet:
    """``evals`` with the entries of a drafted extra set in the skill's ``evals/`` after its
    own (numbered on from them; a query the set has already is not added twice)."""
    extra = os.path.join(skill_path, "evals", EXTRA_NAME)
    if not os.path.isfile(extra) or os.path.abspath(extra) == evals.path:
        return evals
    return with_entries(evals, load_eval_set(extra).entries, {"drafted": True})


def with_entries(evals: EvalSet, more: Sequence[EvalEntry], mark: dict[str, object]) -> EvalSet:
    """``evals`` with ``more`` entries after its own, numbered on from them and marked with
    ``mark``; a query the set has already (spaces and case aside) is not added twice."""
    known = {_same_query(e.query) for e in evals.entries}
    entries = list(evals.entries)
    index = max((e.index for e in entries), default=-1) + 1
    for entry in more:
        if _same_query(entry.query) in known:
            continue
        known.add(_same_query(entry.query))
        entries.append(replace(entry, index=index, extra={**entry.extra, **mark}))
        index += 1
    return replace(evals, entries=tuple(entries))


def _same_query(query: str) -> str:
    return " ".join(query.lower().split())


def load_context(path: str, installed: tuple[ListedSkill, ...] = ()) -> TriggerContext:
    """The trigger context of the skill at ``path`` (no eval set needed: ad-hoc checks and
    drafts), with the ``installed`` skills listed as in every other."""
    skills = discover_skills(path)
    if len(skills) != 1:
        raise InputError(path, f"names {len(skills)} skills; give one skill folder")
    skill = skills[0]
    group = group_of(skill)
    siblings, _warnings = _siblings(skill, group=group)
    return context_of(skill, skill.description, Listing(siblings, installed, group))


def load_routing_sets(
    targets: Sequence[Target], paths: Sequence[str], untested: Sequence[Skill] = ()
) -> list[RoutingSet]:
    """The routing eval sets of the folders holding these targets, for those folders the
    run collects (a routing file below one of ``paths``); checked against the folder's
    skills, tested or not (``untested``: those without an eval set)."""
    folders: dict[str, list[str]] = {}
    for target in targets:
        folders.setdefault(os.path.dirname(target.skill.path), []).append(target.name)
    for skill in untested:
        if os.path.dirname(skill.path) in folders:
            folders[os.path.dirname(skill.path)].append(skill.id)
    found = []
    for folder, names in folders.items():
        path = find_routing_set(folder)
        if path is None or not any(within(path, os.path.abspath(p)) for p in paths):
            continue
        found.append(load_routing_set(path, tuple(sorted(names))))
    return found
