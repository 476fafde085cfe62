"""Improving one skill of a folder without hurting its siblings.

The model chooses among every skill of a folder, so a description that wins its own queries
can do it by taking its siblings' (a description of "spreadsheets" that also claims "PDF
tables" takes the pdf skill's requests). The siblings' should-trigger queries are therefore
the improved skill's natural negatives, and the folder's routing entries say which requests
are its own and which are not. Both are measured with every candidate, in the improved
skill's context (the folder's listing with the candidate in it), through each sibling's own
train/test split: the proposer sees the train side, and the folder's score on fresh test runs
decides whether a winner may be written (see :class:`~pytest_skilltrigger.optimizer.loop.
Confirmation`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pytest_skilltrigger.model.context import ListedSkill
from pytest_skilltrigger.model.formatting import describe_chosen
from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.optimizer.proposer import Competition
from pytest_skilltrigger.optimizer.split import split_entries
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.skills.rewrite import replace_description
from pytest_skilltrigger.skills.routing_set import RoutingSet
from pytest_skilltrigger.support.errors import InputError

# the owner of an entry taken from the folder's routing eval set (no skill name has brackets)
ROUTING = "(routing)"
CROSS_INDEX = 1_000_000  # cross entries' indexes start here, apart from the skill's own


@dataclass(frozen=True)
class CrossEntry:
    """A query from the folder, sampled in the improved skill's context. ``entry`` says
    whether the improved skill should take it; ``owner`` is the sibling whose eval set it
    comes from (it should not), or :data:`ROUTING`."""

    entry: EvalEntry
    owner: str


@dataclass(frozen=True)
class Folder:
    """The folder's queries that measure what a candidate does to its siblings."""

    train: tuple[CrossEntry, ...] = ()
    test: tuple[CrossEntry, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.train or self.test)

    @property
    def owners(self) -> list[str]:
        return sorted({c.owner for c in self.train + self.test})


def folder_of(
    target: Target,
    targets: Sequence[Target],
    routing_sets: Sequence[RoutingSet],
    holdout: float,
    seed: int,
) -> Folder:
    """The cross entries of ``target``'s folder: each sibling's should-trigger queries (on the
    side of that sibling's own split) and the folder's routing entries (split the same way),
    leaving out queries of the skill's own eval set."""
    # the same query as the loaders see it: surrounding blanks do not make another one
    seen = {e.query.strip() for e in target.eval_set.entries}
    sides: tuple[list[CrossEntry], list[CrossEntry]] = ([], [])
    parts = [
        *_sibling_parts(target, targets, holdout, seed),
        *_routing_parts(target, routing_sets, holdout, seed),
    ]
    for owner, split in parts:
        for side, entries in zip(sides, split, strict=True):
            for e in entries:
                if e.query.strip() in seen:
                    continue
                seen.add(e.query.strip())
                index = CROSS_INDEX + len(sides[0]) + len(sides[1])
                entry = EvalEntry(index, e.query, e.should_trigger, {"owner": owner})
                side.append(CrossEntry(entry, owner))
    return Folder(tuple(sides[0]), tuple(sides[1]))


Split = tuple[list[EvalEntry], list[EvalEntry]]  # train, test


def _sibling_parts(
    target: Target, targets: Sequence[Target], holdout: float, seed: int
) -> list[tuple[str, Split]]:
    """Each sibling's should-trigger queries, which ``target`` should not take, on the side
    of the sibling's own split."""
    where = os.path.dirname(target.skill.path)
    parts = []
    for sibling in targets:
        if sibling.skill.path == target.skill.path or os.path.dirname(sibling.skill.path) != where:
            continue
        s_train, s_test = split_entries(sibling.eval_set.entries, holdout, seed)
        taken = [
            [replace(e, should_trigger=False) for e in part if e.should_trigger]
            for part in (s_train, s_test)
        ]
        parts.append((sibling.name, (taken[0], taken[1])))
    return parts


def _routing_parts(
    target: Target, routing_sets: Sequence[RoutingSet], holdout: float, seed: int
) -> list[tuple[str, Split]]:
    """The folder's routing entries, as ``target`` should (or should not) take them."""
    where = os.path.dirname(target.skill.path)
    parts = []
    for routing in routing_sets:
        if routing.folder != where or target.name not in routing.skills:
            continue
        as_entries = [
            EvalEntry(e.index, e.query, e.expected_skill == target.name) for e in routing.entries
        ]
        r_train, r_test = split_entries(as_entries, holdout, seed)
        parts.append((ROUTING, (list(r_train), list(r_test))))
    return parts


def competition_of(target: Target, folder: Folder) -> Competition:
    """What the proposer is told the skill competes with: its siblings as the listing shows
    them, the built-in skills' names, and its siblings' should-trigger train requests as the
    near-misses it must not claim (never a test request)."""
    context = target.context()
    project = {s.name for s in context.siblings} | {target.name}
    builtins = tuple(s.name for s in context.generic_competitors if s.name not in project)
    near = tuple(
        (c.owner, c.entry.query)
        for c in folder.train
        if c.owner != ROUTING and not c.entry.should_trigger
    )
    return Competition(context.siblings, builtins, near)


def with_sibling_description(target: Target, name: str, description: str) -> Target:
    """``target`` with sibling ``name`` listed under a new description: the skills of a
    folder are improved in turn, each against its siblings as they now are. The sibling's
    SKILL.md text changes with it: the Claude Code backend installs that text, and captured
    requests list what it says."""
    siblings = tuple(_relisted(s, description) if s.name == name else s for s in target.siblings)
    return replace(target, siblings=siblings) if siblings != target.siblings else target


def _relisted(sibling: ListedSkill, description: str) -> ListedSkill:
    text = sibling.skill_md
    if text is not None:
        try:
            text = replace_description(text, description, sibling.name)
        except InputError:  # no rendering reads back exactly: listed by name and description
            text = None
    return replace(sibling, description=description, skill_md=text)


def taken_lines(
    skill_name: str, cross: Sequence[CrossEntry], results: Sequence[QueryResult]
) -> list[str]:
    """What a description gets wrong among the folder's queries, one sentence each: a
    sibling's request it takes, a routed request it takes or leaves (for the proposer, the
    JSON history and the HTML report)."""

    lines = []
    for item, result in zip(cross, results, strict=True):
        if result.passed is not False:
            continue
        if item.entry.should_trigger:
            lines.append(
                f"the request {result.query!r} is routed to this skill, but the model chose "
                f"{describe_chosen(result.chosen, exclude=f'skill:{skill_name}')}"
            )
        elif item.owner == ROUTING:
            lines.append(
                f"the model chose {skill_name!r} for {result.query!r} "
                f"({result.triggers}/{result.runs_made} runs), which is routed elsewhere"
            )
        else:
            lines.append(
                f"the model chose {skill_name!r} for this request of {item.owner!r}: "
                f"{result.query!r} ({result.triggers}/{result.runs_made} runs)"
            )
    return lines


def skill_scores(
    skill_name: str,
    own: Sequence[QueryResult],
    cross: Sequence[CrossEntry],
    results: Sequence[QueryResult],
) -> dict[str, list[int]]:
    """Per skill of the folder, ``[passed, total]``: the improved skill's own queries, and
    for each sibling (and the routing set) its queries the candidate leaves alone."""
    scores = {skill_name: [sum(1 for r in own if r.passed), len(own)]}
    for item, result in zip(cross, results, strict=True):
        score = scores.setdefault(item.owner, [0, 0])
        score[0] += 1 if result.passed else 0
        score[1] += 1
    return scores
