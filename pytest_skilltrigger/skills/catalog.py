"""Finding what to test: skills, their eval sets and their competitors.

A *target* is one skill with its eval set, the description to start from and the sibling
skills it competes with. Everything is read and checked here, before any run, so bad input
fails fast with one line and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from pytest_skilltrigger.model.context import (
    LISTED_LIMIT,
    ListedSkill,
    TriggerContext,
    cut_point,
)
from pytest_skilltrigger.skills.discovery import discover_skills
from pytest_skilltrigger.skills.drafted_set import EXTRA_NAME
from pytest_skilltrigger.skills.evalset import (
    EvalSet,
    find_eval_set,
    is_valid_unicode,
    load_eval_set,
)
from pytest_skilltrigger.skills.routing_set import RoutingSet, find_routing_set, load_routing_set
from pytest_skilltrigger.skills.skill import Skill, read_skill
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.paths import within


@dataclass(frozen=True)
class Target:
    """One skill to test, as everything downstream needs it."""

    skill: Skill
    eval_set: EvalSet
    description: str
    siblings: tuple[ListedSkill, ...]
    warnings: tuple[str, ...]
    installed: tuple[ListedSkill, ...] = ()  # listed before the project's skills

    @property
    def name(self) -> str:
        return self.skill.name

    @cached_property
    def start_context(self) -> TriggerContext:
        """The context of the starting description, built once: every item of the skill uses
        it, and the sampler keys its store lookups by it."""
        return context_of(self.skill, self.description, self.siblings, self.installed)

    def context(self, description: str | None = None) -> TriggerContext:
        """The trigger context for the starting description, or another one."""
        if description is None or description == self.description:
            return self.start_context
        return self.start_context.with_description(description)


def context_of(
    skill: Skill,
    description: str,
    siblings: tuple[ListedSkill, ...],
    installed: tuple[ListedSkill, ...] = (),
) -> TriggerContext:
    """The trigger context of a skill (its listing keys, its file) with a description, and
    the user's installed skills listed before the project's."""
    return TriggerContext(
        skill.name,
        description,
        siblings,
        when_to_use=skill.when_to_use,
        model_invocable=skill.model_invocable,
        unlisted_reason=skill.unlisted_reason,
        skill_md=skill.text,
        installed=installed,
    )


def listed_skill(skill: Skill) -> ListedSkill:
    """A skill as another skill's listing shows it."""
    return ListedSkill(skill.name, skill.description, skill.when_to_use, skill.text)


def load_installed(paths: Sequence[str]) -> tuple[ListedSkill, ...]:
    """The skills under ``paths`` (``--trigger-extra-skills``: an author's
    ``~/.claude/skills``, a team's plugin) as they compete in every listing; those the
    model is not shown are left out. InputError for a path without skills or a bad one."""
    found: dict[str, ListedSkill] = {}
    for path in paths:
        skills = discover_skills(path)
        if not skills:
            raise InputError(path, "--trigger-extra-skills: no SKILL.md found here")
        for skill in skills:
            if skill.model_invocable:
                found.setdefault(skill.name, listed_skill(skill))
    return tuple(found[name] for name in sorted(found))


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


def _siblings(
    skill: Skill, read: Callable[[str], Skill] = read_skill
) -> tuple[tuple[ListedSkill, ...], list[str]]:
    """The other skills in the folder that holds this skill; unreadable ones are skipped.
    ``read`` reads a skill folder (a session's targets share one cache)."""
    parent = os.path.dirname(skill.path)
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
            listed.append(listed_skill(other))
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


def load_targets(
    paths: Sequence[str],
    eval_set: str | None = None,
    description: str | None = None,
    missing: list[Skill] | None = None,
    installed: tuple[ListedSkill, ...] = (),
) -> list[Target]:
    """Every skill under ``paths`` with its eval set; raises InputError on any bad input.

    ``eval_set`` names the eval file explicitly (only with a single skill); ``description``
    replaces the file's description as the starting point. A skill without an eval set is
    an error, unless ``missing`` is given: it is then added there (for a draft) and left out.
    A drafted extra set beside the eval set (``evals/trigger-eval.drafted.json``) is read
    with it. ``installed`` skills are listed before the project's in every context.
    """
    skills = _unique_skills(paths)
    if eval_set is not None and len(skills) != 1:
        raise InputError("--eval-set", f"names one eval file but {len(skills)} skills were given")
    if description is not None and not description.strip():
        raise InputError("--skill-description", "must not be empty")
    if description is not None and not is_valid_unicode(description):
        raise InputError("--skill-description", "is not valid UTF-8 text")
    read = _reader({skill.path: skill for skill in skills})
    targets = []
    for skill in skills:
        found = eval_set if eval_set is not None else find_eval_set(skill.path)
        if found is None and missing is not None:
            missing.append(skill)
            continue
        if found is None:
            raise InputError(
                skill.path,
                "no eval set found (looked for evals/trigger-eval.json and the other usual "
                "names); name one with --eval-set",
            )
        evals = with_drafted_extra(load_eval_set(found), skill.path)
        siblings, sibling_warnings = _siblings(skill, read)
        start = description if description is not None else skill.description
        sibling_warnings += listing_warnings(skill, start)
        targets.append(
            Target(
                skill=skill,
                eval_set=evals,
                description=description if description is not None else skill.description,
                siblings=siblings,
                warnings=tuple(skill.warnings) + tuple(sibling_warnings),
                installed=installed,
            )
        )
    clash = sorted({s.name for s in installed} & {t.name for t in targets})
    if clash:
        raise InputError(
            "--trigger-extra-skills",
            f"installs a skill named {clash[0]!r}, "
            "like a tested one: an installed skill shadows it in Claude Code, "
            "so the one under test would never be seen",
        )
    return targets


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
    known = {" ".join(e.query.lower().split()) for e in evals.entries}
    entries = list(evals.entries)
    index = max((e.index for e in entries), default=-1) + 1
    for entry in load_eval_set(extra).entries:
        if " ".join(entry.query.lower().split()) in known:
            continue
        entries.append(replace(entry, index=index, extra={**entry.extra, "drafted": True}))
        index += 1
    return replace(evals, entries=tuple(entries))


def load_context(path: str, installed: tuple[ListedSkill, ...] = ()) -> TriggerContext:
    """The trigger context of the skill at ``path`` (no eval set needed: ad-hoc checks and
    drafts), with the ``installed`` skills listed before the project's as in every other."""
    skills = discover_skills(path)
    if len(skills) != 1:
        raise InputError(path, f"names {len(skills)} skills; give one skill folder")
    skill = skills[0]
    siblings, _warnings = _siblings(skill)
    return context_of(skill, skill.description, siblings, installed)


def load_routing_sets(targets: Sequence[Target], paths: Sequence[str]) -> list[RoutingSet]:
    """The routing eval sets of the folders holding these targets, for those folders the
    run collects (a routing file below one of ``paths``); checked against the folder's
    tested skills."""
    folders: dict[str, list[str]] = {}
    for target in targets:
        folders.setdefault(os.path.dirname(target.skill.path), []).append(target.name)
    found = []
    for folder, names in folders.items():
        path = find_routing_set(folder)
        if path is None or not any(within(path, os.path.abspath(p)) for p in paths):
            continue
        found.append(load_routing_set(path, tuple(sorted(names))))
    return found
