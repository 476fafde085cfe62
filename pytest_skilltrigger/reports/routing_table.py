"""Routing: what the model chose first for every query of every skill of a folder, added up.

A folder of skills is tested one eval set at a time, but the model picks among all of them:
a description that passes alone can take a sibling's queries, or lose its own to one. The
table is built from the runs already made (no extra call): rows are the skill whose eval set
a query comes from, split into should-trigger and should-not queries; columns are what was
chosen first (each project skill, each other tool, a plain answer), with errors apart.
A *clash* is a project skill chosen for another skill's should-trigger queries.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.formatting import chosen_label
from pytest_skilltrigger.model.stats import wilson
from pytest_skilltrigger.reports.summary import SkillResults

if TYPE_CHECKING:
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.skills.routing_set import RoutingEntry


@dataclass
class RoutingRow:
    """What was chosen for one skill's queries of one kind, over all their runs."""

    skill: str
    should_trigger: bool
    queries: int = 0
    runs: int = 0
    errors: int = 0
    chosen: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Clash:
    """``taker`` was chosen in ``taken`` of ``runs`` runs of ``queries`` of ``owner``'s
    should-trigger queries (the runs of the queries it was chosen in at least once)."""

    taker: str
    owner: str
    taken: int
    runs: int
    queries: int

    def line(self) -> str:
        return (
            f"{self.taker} took {self.taken} of {self.runs} runs of {self.queries} "
            f"{self.owner} {'query' if self.queries == 1 else 'queries'}"
        )


@dataclass(frozen=True)
class RoutingItemResult:
    """A routing item's result: its entry, its runs and whether it passed (None: no verdict,
    an error or a skip)."""

    entry: RoutingEntry
    result: QueryResult
    passed: bool | None


@dataclass
class RoutingTable:
    """The table of one folder of skills, and its routing items' results.

    ``accuracy`` is the share of the folder's routing items and should-trigger queries that
    passed (what ``--trigger-min-routing-accuracy`` gates); None when none was decided.
    """

    folder: str
    skills: list[str]
    rows: list[RoutingRow]
    clashes: list[Clash]
    items: list[RoutingItemResult] = field(default_factory=list)
    accuracy: float | None = None
    counted: tuple[int, int] = (0, 0)  # (passed, decided)
    confidence: float = 0.95  # of the accuracy's interval (the runs' rule's)
    # every project skill of the folder, tested in this run or not (``-k``, ``--lf``): a
    # choice of one of them is a sibling's, never an "other skill"
    folder_skills: list[str] = field(default_factory=list)
    model: str | None = None  # its model in a matrix (None: the session's one model)

    @property
    def project_skills(self) -> list[str]:
        """The names that head a column as a project skill of this folder."""
        return sorted({*self.skills, *self.folder_skills})

    def columns(self) -> list[str]:
        """The project's skills first (as ``skill:<name>``), then other choices by name."""
        seen = {c for row in self.rows for c in row.chosen}
        own = [f"skill:{s}" for s in self.skills]
        return own + sorted(seen - set(own))

    @property
    def interval(self) -> tuple[float, float]:
        """The routing accuracy's interval (Wilson, over the items and queries counted)."""
        return wilson(*self.counted, self.confidence)

    @property
    def rounded_accuracy(self) -> float | None:
        """``accuracy`` as the JSON shows it and the gate compares it (four digits)."""
        return None if self.accuracy is None else round(self.accuracy, 4)

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "model": self.model,
            "skills": self.skills,
            "folder_skills": self.project_skills,
            "columns": self.columns(),
            "rows": [
                {
                    "skill": r.skill,
                    "should_trigger": r.should_trigger,
                    "queries": r.queries,
                    "runs": r.runs,
                    "errors": r.errors,
                    "chosen": dict(sorted(r.chosen.items())),
                }
                for r in self.rows
            ],
            "clashes": [
                {
                    "taker": c.taker,
                    "owner": c.owner,
                    "taken": c.taken,
                    "runs": c.runs,
                    "queries": c.queries,
                    "text": c.line(),
                }
                for c in self.clashes
            ],
            "items": [
                {
                    "query": i.entry.query,
                    "expected_skill": i.entry.expected_skill,
                    "pass": i.passed,
                    "runs": i.result.runs_made,
                    "chosen": i.result.chosen,
                    "errors": i.result.errors,
                    "skipped": i.result.skipped,
                }
                for i in self.items
            ],
            "accuracy": self.rounded_accuracy,
            "accuracy_interval": (
                [round(v, 4) for v in self.interval] if self.accuracy is not None else None
            ),
            "passed": self.counted[0],
            "decided": self.counted[1],
        }


# each folder's routing items by entry index
RoutingResults = Mapping[str, Mapping[int, RoutingItemResult]]


def routing_tables(
    skills: Iterable[SkillResults],
    routing: RoutingResults | None = None,
    folder_skills: Mapping[str, Iterable[str]] | None = None,
) -> list[RoutingTable]:
    """One table per folder holding at least two of the tested skills, or a routing eval
    set; ``routing`` gives each folder's routing items (entry, result, passed) and
    ``folder_skills`` the names of each folder's project skills (tested or not)."""
    routing = routing or {}
    folder_skills = folder_skills or {}
    by_folder: dict[str, list[SkillResults]] = {}
    for skill in skills:
        by_folder.setdefault(os.path.dirname(skill.target.skill.path), []).append(skill)
    tables = []
    for folder in [*by_folder, *(f for f in routing if f not in by_folder)]:
        group = by_folder.get(folder, [])
        if len(group) < 2 and folder not in routing:
            continue
        table = _table(folder, group)
        table.folder_skills = sorted(folder_skills.get(folder, ()))
        items = routing.get(folder, {})
        table.items = [items[i] for i in sorted(items)]
        decided = [i.passed for i in table.items if i.passed is not None]
        decided += [
            r.passed
            for s in group
            for r in s.results()
            if r.should_trigger and r.passed is not None
        ]
        table.counted = (sum(1 for ok in decided if ok), len(decided))
        results = [*(r for s in group for r in s.results()), *(i.result for i in table.items)]
        if results:
            table.confidence = results[0].rule.confidence
        table.accuracy = table.counted[0] / len(decided) if decided else None
        tables.append(table)
    return tables


def _table(folder: str, group: list[SkillResults]) -> RoutingTable:
    names = sorted(s.target.name for s in group)
    rows: list[RoutingRow] = []
    clashes: list[Clash] = []
    for skill in sorted(group, key=lambda s: s.target.name):
        owner = skill.target.name
        for should in (True, False):
            row = RoutingRow(owner, should)
            taken: dict[str, list[int]] = {}  # taker -> [runs taken, runs of those queries, n]
            for result in skill.results():
                if result.should_trigger != should or result.unlisted:
                    continue
                row.queries += 1
                row.errors += result.errors
                row.runs += result.runs_made
                for choice, count in result.chosen.items():
                    row.chosen[choice] = row.chosen.get(choice, 0) + count
                    taker = choice.removeprefix("skill:")
                    if should and choice.startswith("skill:") and taker != owner:
                        entry = taken.setdefault(taker, [0, 0, 0])
                        entry[0] += count
                        entry[1] += result.runs_made
                        entry[2] += 1
            rows.append(row)
            clashes += [
                Clash(taker, owner, n, runs, queries)
                for taker, (n, runs, queries) in taken.items()
                if taker in names
            ]
    clashes.sort(key=lambda c: (-c.taken, -c.queries, c.taker, c.owner))
    return RoutingTable(folder, names, rows, clashes)


def choice_label(choice: str, skills: Collection[str] | None = None) -> str:
    """A column's heading: the skill's name, ``other skill X``, ``tool X``, or ``a plain answer``.

    ``skills`` are the folder's skills (a table's rows): a skill chosen that is not one of
    them, such as a built-in competitor of the listing (``charts``, ``review``), is headed
    ``other skill X`` so that it never reads as one of the project's skills. Without
    ``skills`` (a caller that does not know the folder) every skill is headed by its name.
    """
    if choice.startswith("skill:"):
        name = choice.removeprefix("skill:")
        return name if skills is None or name in skills else f"other skill {name}"
    return chosen_label(choice)
