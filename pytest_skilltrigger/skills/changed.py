"""Which skills a change touches (``--trigger-changed-since``): those whose SKILL.md or eval
set changed, and the skills that compete with one of them.

A skill's verdicts depend on its own description and queries, and on what else the listing
offers: when a sibling's description changes, a query of this skill may go to the sibling
instead. Which skills compete is what an earlier run saw (its queries choosing another
skill, the baseline's confusion), so with a baseline a changed skill's competitors run too;
without one, only the changed skills run, and the report says that competitors were not
known. Every other skill is not re-run, with the reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet

#: each skill's competitors by name, as an earlier run saw them (both ways)
Neighbours = Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class Unchanged:
    """A skill not re-run, and why."""

    name: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"skill": self.name, "reason": self.reason}


@dataclass(frozen=True)
class ChangeSelection:
    """What runs after a change: the skills (by SKILL.md) with why each runs, the routing
    sets (by path), and the skills that do not run."""

    since: str
    runs: Mapping[str, str]  # SKILL.md -> why it runs
    routing: frozenset[str]
    unchanged: tuple[Unchanged, ...]
    neighbours_known: bool

    def keeps_skill(self, skill_md: str) -> bool:
        return skill_md in self.runs

    def keeps_routing(self, path: str) -> bool:
        return path in self.routing

    def line(self) -> str:
        """What runs and what does not, in a line for the header."""
        known = "" if self.neighbours_known else " (competitors unknown without a baseline)"
        return (
            f"changed since {self.since}: {len(self.runs)} skill(s) run"
            f"{known}, {len(self.unchanged)} not re-run"
        )


def select_changed(
    targets: Sequence[Target],
    routing_sets: Sequence[RoutingSet],
    changed: frozenset[str],
    since: str,
    neighbours: Neighbours | None = None,
) -> ChangeSelection:
    """The skills and routing sets that run after the change (``changed``: real paths)."""
    runs = {t.skill.skill_md: why for t in targets if (why := _own_change(t, changed))}
    changed_names = {t.name for t in targets if t.skill.skill_md in runs}
    for target in targets:
        if target.skill.skill_md in runs or not neighbours:
            continue
        rivals = sorted((neighbours.get(target.name) or frozenset()) & changed_names)
        if rivals:
            runs[target.skill.skill_md] = f"competes with {', '.join(rivals)}, which changed"
    touched = {os.path.dirname(t.skill.path) for t in targets if t.skill.skill_md in runs}
    routing = frozenset(
        r.path for r in routing_sets if _real(r.path) in changed or r.folder in touched
    )
    reason = f"unchanged since {since}"
    if neighbours is not None:
        reason += ", competing with no changed skill"
    unchanged = tuple(Unchanged(t.name, reason) for t in targets if t.skill.skill_md not in runs)
    return ChangeSelection(since, runs, routing, unchanged, neighbours is not None)


def _own_change(target: Target, changed: frozenset[str]) -> str | None:
    """Why the skill's own files make it run (None: they did not change)."""
    if _real(target.skill.skill_md) in changed:
        return "SKILL.md changed"
    if _real(target.eval_set.path) in changed:
        return "its eval set changed"
    return None


def _real(path: str) -> str:
    return os.path.realpath(path)
