"""Finding what to test: skills, their eval sets and their competitors.

A *target* is one skill with its eval set, the description to start from and the sibling
skills it competes with. Everything is read and checked here, before any run, so bad input
fails fast with one line and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from pytest_skilltrigger.model.context import (
    LISTED_LIMIT,
    PROJECT,
    ListedSkill,
    ProjectSetup,
    Subfolder,
    TriggerContext,
    cut_point,
    resolve_call,
)
from pytest_skilltrigger.model.turn import TurnRule
from pytest_skilltrigger.skills.discovery import Discovered, discover
from pytest_skilltrigger.skills.drafted_set import EXTRA_NAME
from pytest_skilltrigger.skills.evalset import (
    EvalEntry,
    EvalSet,
    is_valid_unicode,
    load_eval_set,
)
from pytest_skilltrigger.skills.installed import Install
from pytest_skilltrigger.skills.neighbours import (
    SessionSkills,
    folder_siblings,
    group_of,
    listed_skill,
)
from pytest_skilltrigger.skills.plugin_eval.read import (
    NotCollected,
    TriggerCase,
    eval_set_of,
    pinned_models,
    read_plugin_eval,
)
from pytest_skilltrigger.skills.rivals import crowd_context
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.skills.set_places import Placed, no_set_message, place_sets
from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.skills.subfolders import check_cwd, rootdir_notes, subfolder_of
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import within


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
    project: ProjectSetup | None = None  # the project's setup every run is under
    permission_mode: str | None = None
    subfolder: Subfolder | None = None  # a subfolder's skill: how the session reaches it
    within: TurnRule | None = None  # what a run is judged on (None: the first call)
    usage: float = 0.0  # its own usage score (the user's, in --trigger-crowd=installed)
    # each crowd's context, made once (every item of a crowd size uses it)
    _crowds: dict[tuple[int, float], TriggerContext] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @property
    def name(self) -> str:
        """The skill's id (``folder`` or ``plugin:folder``), as the CLI lists it."""
        return self.skill.id

    @cached_property
    def start_context(self) -> TriggerContext:
        """The context of the starting description, built once: every item of the skill uses
        it, and the sampler keys its store lookups by it."""
        listing = Listing(self.siblings, self.installed, self.group)
        context = context_of(self.skill, self.description, listing)
        context = replace(
            context,
            project=self.project,
            permission_mode=self.permission_mode,
            subfolder=self.subfolder,
            within=self.within,
            usage=self.usage,
        )
        context = _as_announced(context)
        command = context.shadowing_command() if context.model_invocable else None
        if command is None:
            return context
        return replace(context, model_invocable=False, unlisted_reason=shadowed(command.name))

    @property
    def choice_id(self) -> str:
        """The id its runs' choices name it by: its own, or a subfolder skill's scoped name
        (``apps/web:deploy``) where a listed skill has its name."""
        return self.start_context.skill_name

    def context(self, description: str | None = None) -> TriggerContext:
        """The trigger context for the starting description, or another one."""
        if description is None or description == self.description:
            return self.start_context
        return self.start_context.with_description(description)

    def crowded(self, size: int | None, usage: float = 0.0) -> TriggerContext:
        """The starting context among ``size`` other installed skills (see
        :func:`~.rivals.crowd_context`); None: the starting context itself."""
        if size is None:
            return self.start_context
        key = (size, usage)
        if key not in self._crowds:
            self._crowds[key] = crowd_context(self.start_context, size, usage)
        return self._crowds[key]


@dataclass(frozen=True)
class Listing:
    """What a skill is listed with (its siblings, the session's other skills) and where it
    is listed itself (its group, see :data:`~pytest_skilltrigger.model.context.PROJECT`)."""

    siblings: tuple[ListedSkill, ...] = ()
    installed: tuple[ListedSkill, ...] = ()
    group: int = PROJECT


def _as_announced(context: TriggerContext) -> TriggerContext:
    """A subfolder's skill under the name the CLI announces it by (``<folder>:<name>`` when
    a listed skill has its name): the name a Skill call must give to load it."""
    for found in context.discovered():
        if found.name.rpartition(":")[2] == context.skill_name and found.name != context.skill_name:
            return replace(context, skill_name=found.name)
    return context


def shadowed(command: str) -> str:
    """Why a skill that a command of its name shadows is never listed."""
    return (
        f"the command {command} has this skill's name: Claude Code lists the command in the "
        "skill's place, so the skill can never trigger (rename the command or the skill)"
    )


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
        order=skill.order,
    )


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
    # the session around every listing: the project's setup, the permission mode
    project: ProjectSetup | None = None
    permission_mode: str | None = None
    # --trigger-cwd: the subfolder whose skills are tested in a session started there
    cwd: str | None = None
    # pytest's rootdir: a subfolder's project root where no folder above it holds .git
    rootdir: str | None = None
    # what a run is judged on (None: the first call; a TurnRule: the turn)
    within: TurnRule | None = None
    # --trigger-crowd=installed: the user's own install every listing shows
    install: Install | None = None


@dataclass(frozen=True)
class Found:
    """The skills in play: the targets, the skills without an eval set (to draft, or listed
    but not tested: they still compete in the listings), and the ``claude plugin eval``
    cases found that are not trigger checks (with why)."""

    targets: list[Target]
    missing: list[Skill]
    not_collected: list[NotCollected] = field(default_factory=list)
    # what the header says once about the session's skills (a project root taken from
    # pytest's rootdir)
    notes: tuple[str, ...] = ()
    # the routing sets of the folders of skills collected (their entries name the skill that
    # should be chosen first)
    routing: tuple[RoutingSet, ...] = ()


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
    discovered = _discover_all(paths)
    skills = discovered.skills
    _check_options(options, skills)
    if options.cwd is not None:
        options = replace(options, cwd=check_cwd(options.cwd, skills, options.rootdir))
    read = _reader({skill.path: skill for skill in skills})
    session = SessionSkills.of(skills, read, paths, discovered.plugins)
    cases = _PluginCases(session)
    placed = place_sets(skills, paths, options.eval_set)
    targets, missing = [], []
    for skill in skills:
        found = cases.of(skill)
        evals = _eval_set(placed.sets.get(skill.path), found)
        if evals is None:
            if not options.draft_missing and len(skills) == 1 and _given(skill, paths):
                raise _no_set_error([skill], placed, cases.not_collected)
            missing.append(skill)
            continue
        target = _target(skill, evals, options, session, read)
        targets.append(replace(target, warnings=target.warnings + tuple(pinned_models(found))))
    if missing and not targets and not options.draft_missing:
        raise _no_set_error(missing, placed, cases.not_collected)
    _check_clash(options.installed, targets)
    notes = (*discovered.notes, *placed.warnings, *rootdir_notes(skills, options.rootdir))
    return Found(targets, missing, cases.not_collected, notes, tuple(placed.routing))


def _no_set_error(
    missing: Sequence[Skill], placed: Placed, cases: Sequence[NotCollected]
) -> InputError:
    """The error for skills without an eval set: where it looked, what it found and passed
    over, and what to do (the same message for every layout)."""
    where, message = no_set_message(missing, placed)
    return InputError(where, message + _cases_seen(cases))


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


def _eval_set(evals: EvalSet | None, cases: Sequence[TriggerCase]) -> EvalSet | None:
    """The skill's eval set (the one named, else those found for it) with its ``claude
    plugin eval`` cases after its own entries; the cases alone when it has none."""
    if evals is None:
        return eval_set_of(cases, os.path.dirname(cases[0].folder)) if cases else None
    return with_entries(evals, eval_set_of(cases, evals.path).entries, {}) if cases else evals


class _PluginCases:
    """The ``claude plugin eval`` cases of the session's plugins (``<root>/evals``) and skill
    folders (``<skill>/evals``), read once per folder, by the skill they check."""

    def __init__(self, session: SessionSkills) -> None:
        self.session = session
        self.not_collected: list[NotCollected] = []
        self._by_skill: dict[str, list[TriggerCase]] = {}
        self._read: set[str] = set()

    def of(self, skill: Skill) -> list[TriggerCase]:
        """The trigger cases that check ``skill``."""
        self._read_root(skill.path, [listed_skill(skill, group_of(skill, self.session.plugins))])
        if skill.plugin is not None:
            self._read_root(skill.plugin.root, self.session.skills_of(skill.plugin.root))
        seen: set[tuple[str, str | None]] = set()
        unique = []
        for case in self._by_skill.get(skill.id, []):  # a prompt in two eval dirs: the first
            same = (_same_query(case.prompt), case.history)
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


def _check_options(options: TargetOptions, skills: Sequence[Skill]) -> None:
    if options.eval_set is not None and len(skills) != 1:
        raise InputError(
            "--trigger-eval-set", f"names one eval file but {len(skills)} skills were given"
        )
    description = options.description
    if description is not None and not description.strip():
        raise InputError("--trigger-description", "must not be empty")
    if description is not None and not is_valid_unicode(description):
        raise InputError("--trigger-description", "is not valid UTF-8 text")


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


def _target(
    skill: Skill,
    evals: EvalSet,
    options: TargetOptions,
    session: SessionSkills,
    read: Callable[[str], Skill],
) -> Target:
    group = group_of(skill, session.plugins)
    siblings, warnings = folder_siblings(skill, read, group, session.paths)
    start = options.description if options.description is not None else skill.description
    warnings += listing_warnings(skill, start)
    installed = tuple(options.installed) + session.neighbours(skill)
    usage = 0.0
    if options.install is not None:  # the user's own install, but its copy of this skill
        installed = options.install.beside(skill.id) + installed
        usage = options.install.usage_of(skill.id)
    target = Target(
        skill=skill,
        eval_set=with_drafted_extra(evals, skill.path),
        description=start,
        siblings=siblings,
        warnings=tuple(skill.warnings) + tuple(warnings),
        installed=installed,
        group=group,
        project=options.project,
        permission_mode=options.permission_mode,
        subfolder=subfolder_of(skill, read, options.cwd, options.rootdir),
        within=options.within,
        usage=usage,
    )
    reason = target.start_context.unlisted_reason
    if reason and not skill.unlisted_reason:  # a command of its name shadows it
        shadow = f"{skill.skill_md}: {reason}; its should-trigger queries fail without a call"
        return replace(target, warnings=(*target.warnings, shadow))
    return target


def _discover_all(paths: Sequence[str]) -> Discovered:
    """Every skill under ``paths``, once each even when reached through a symlink, and the
    plugins in play, in the order found."""
    found = Discovered()
    seen: set[str] = set()
    for path in paths:
        discovered = discover(path)
        for skill in discovered.skills:
            real = os.path.realpath(skill.skill_md)
            if real not in seen:
                seen.add(real)
                found.skills.append(skill)
        found.plugins += [p for p in discovered.plugins if p not in found.plugins]
        found.notes += [n for n in discovered.notes if n not in found.notes]
    return found


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
    skills = discover(path).skills
    if len(skills) != 1:
        raise InputError(path, f"names {len(skills)} skills; give one skill folder")
    skill = skills[0]
    group = group_of(skill)
    siblings, _warnings = folder_siblings(skill, group=group)
    return context_of(skill, skill.description, Listing(siblings, installed, group))


def load_routing_sets(found: Found, paths: Sequence[str]) -> list[RoutingSet]:
    """The routing sets of the folders holding the targets that the run collects (a
    routing file below one of ``paths``)."""
    folders = {os.path.dirname(target.skill.path) for target in found.targets}
    return [
        routing
        for routing in found.routing
        if any(within(routing.path, os.path.abspath(p)) for p in paths)
        and any(within(folder, routing.folder) for folder in folders)
    ]
