"""Drafting a first trigger eval set with the improve model: one request, at most one repair.

The improve model, which proposes descriptions in the rounds, here proposes the queries that
test one (``--trigger-draft``). The request and the checks are
:mod:`pytest_skilltrigger.skills.drafted_set`'s; the calls go through the session (counted and
priced under the ``draft`` phase, within the budget); writing the file is the controller's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.skills.catalog import Target, load_context
from pytest_skilltrigger.skills.drafted_set import (
    DRAFTED_NAME,
    EXTRA_NAME,
    DraftedEntry,
    check_answer,
    draft_prompt,
    parse_answer,
    repair_prompt,
)
from pytest_skilltrigger.skills.skill import Skill
from pytest_skilltrigger.skills.write_back import write_drafted_set
from pytest_skilltrigger.support.errors import AskError, InputError

MAX_AT_ONCE = 4  # drafts asked at the same time (each is one long answer)


@dataclass(frozen=True)
class DraftJob:
    """One skill to draft for, what is listed beside it, where the draft goes, and the
    queries it must not repeat."""

    skill: Skill
    context: TriggerContext
    path: str
    avoid: tuple[str, ...] = ()

    @classmethod
    def missing(cls, skill: Skill, installed: tuple[ListedSkill, ...] = ()) -> DraftJob:
        """A skill without an eval set: the first name the plugin looks for."""
        return cls(
            skill,
            load_context(skill.path, installed),
            os.path.join(skill.path, "evals", DRAFTED_NAME),
        )

    @classmethod
    def extra(cls, target: Target) -> DraftJob:
        """More entries for a skill that has an eval set (``--trigger-draft=also``)."""
        return cls(
            target.skill,
            target.context(),
            os.path.join(target.skill.path, "evals", EXTRA_NAME),
            tuple(e.query for e in target.eval_set.entries),
        )


@dataclass
class Draft:
    """What drafting gave for one job: usable entries, or why not (nothing is written)."""

    job: DraftJob
    entries: list[DraftedEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    repeats: list[str] = field(default_factory=list)  # queries the set had: left out
    lacks: list[str] = field(default_factory=list)  # what the kept draft lacks or left out
    usage: Usage = field(default_factory=Usage)
    repaired: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.problems and bool(self.entries)

    def failure(self) -> str:
        """The one line a refused draft gets, naming the skill's file."""
        why = self.error or "; ".join(self.problems[:3]) or "no entries"
        asked = " (after one repair request)" if self.repaired else ""
        return f"{self.job.skill.skill_md}: no eval set drafted{asked}: {why}; nothing written"


def draft(session: TriggerSession, job: DraftJob, model: str | None = None) -> Draft:
    """Ask for an eval set for ``job``'s skill, check it, and ask once more if it fails."""
    result = Draft(job)
    description = job.skill.description
    try:
        prompt = draft_prompt(job.skill, job.context, job.avoid)
        answer, usage = session.ask(prompt, model=model, phase="draft")
        result.usage = usage
        checked = check_answer(parse_answer(answer), description, job.avoid)
        if checked.refusals(repaired=False):
            result.repaired = True
            again, more = session.ask(
                repair_prompt(prompt, checked.refusals(repaired=False)), model=model, phase="draft"
            )
            result.usage = result.usage + more
            checked = check_answer(parse_answer(again), description, job.avoid)
        result.entries, result.repeats = checked.entries, checked.repeats
        result.problems = checked.refusals(repaired=result.repaired)
        result.lacks = checked.lacks
    except AskError as exc:
        result.error = f"the improve model could not be asked: {exc}"
    return result


def draft_jobs(
    mode: str,
    missing: Sequence[Skill],
    targets: Sequence[Target],
    installed: tuple[ListedSkill, ...] = (),
) -> list[DraftJob]:
    """What to draft: every skill without an eval set; with ``also`` more entries for every
    skill that has one and no drafted extra set yet (a rerun drafts nothing). ``installed``
    are listed beside a skill without one (a target's context has them already). A skill
    Claude Code does not list to the model can never trigger: nothing is drafted for it."""
    jobs = [DraftJob.missing(skill, installed) for skill in missing if skill.model_invocable]
    if mode == "also":
        for target in targets:
            if not target.skill.model_invocable:
                continue
            job = DraftJob.extra(target)
            if not os.path.exists(job.path):
                jobs.append(job)
    return jobs


def draft_and_write(
    session: TriggerSession, jobs: Sequence[DraftJob], model: str | None = None
) -> list[Draft]:
    """Draft every job (a few at once) and write the usable drafts, never over a file; the
    drafts written. Raises InputError, once the usable ones are written, naming the first
    skill whose draft was refused (nothing is written for it)."""
    if session.backend is None:
        raise InputError("--trigger-draft", f"needs a backend: {session.no_backend}")
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_AT_ONCE, len(jobs)))) as pool:
        drafts = list(pool.map(lambda job: draft(session, job, model), jobs))
    written = [d for d in drafts if d.ok and write_drafted_set(d.job.path, d.entries)]
    refused = [d for d in drafts if not d.ok]
    if refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise InputError(None, refused[0].failure() + more)
    return written
