"""Routing eval sets: which skill of a folder should be chosen first for a request.

``routing-eval.json`` (or ``evals/routing-eval.json``) in the folder that holds the skills is
a list of ``{"query": ..., "expected_skill": "<name>" | null}``; ``null`` means no project
skill should be chosen. Read strictly, as eval sets are: an unknown skill name, a query given
twice or a malformed entry is a one-line error naming the file and the entry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pytest_skilltrigger.skills.evalset import (
    check_duplicate_key,
    check_query,
    check_unique,
    entry_name,
    load_json,
)
from pytest_skilltrigger.support.errors import InputError

ROUTING_NAMES = ("routing-eval.json", os.path.join("evals", "routing-eval.json"))


@dataclass(frozen=True)
class RoutingEntry:
    """One request and the skill that should be chosen first for it (None: no skill)."""

    index: int
    query: str
    expected_skill: str | None


@dataclass(frozen=True)
class RoutingSet:
    """A folder's routing eval set: its file, the folder and the skills it routes among."""

    path: str
    folder: str
    skills: tuple[str, ...]
    entries: tuple[RoutingEntry, ...]


def find_routing_set(folder: str) -> str | None:
    """The routing eval set of a folder of skills, if it has one."""
    for name in ROUTING_NAMES:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None


def load_routing_set(path: str, skills: tuple[str, ...]) -> RoutingSet:
    """Read and check a routing eval set against the names of the folder's skills."""
    where = os.path.abspath(path)
    data, duplicates = load_json(where, "a JSON list of {query, expected_skill} objects")
    if not isinstance(data, list):
        raise InputError(where, "must be a JSON list of {query, expected_skill} objects")
    named: list[tuple[RoutingEntry, str]] = []
    for index, item in enumerate(data):
        name = entry_name(index)
        if not isinstance(item, dict):
            raise InputError(where, f"{name}: must be an object with query and expected_skill")
        check_duplicate_key(item, where, name, duplicates)
        query = check_query(item.get("query"), "query" in item, where, name)
        if "expected_skill" not in item:
            raise InputError(where, f"{name}: has no expected_skill (a skill name, or null)")
        expected = item["expected_skill"]
        if expected is not None and not isinstance(expected, str):
            raise InputError(where, f"{name}: expected_skill must be a skill name or null")
        if expected is not None and expected not in skills:
            known = ", ".join(skills)
            raise InputError(where, f"{name}: unknown skill {expected!r} (this folder: {known})")
        named.append((RoutingEntry(index, query, expected), name))
    check_unique(named, where)
    entries = [entry for entry, _name in named]
    if not entries:
        raise InputError(where, "holds no entries")
    folder = os.path.dirname(where)
    if os.path.basename(folder) == "evals":
        folder = os.path.dirname(folder)
    return RoutingSet(where, folder, skills, tuple(entries))
