"""Routing eval sets: which skill of a folder should be chosen first for a request.

``routing-eval.json`` (or ``evals/routing-eval.json``) in the folder that holds the skills, or
a set above it whose entries name the skill that should trigger (``should_trigger:
"<skill>"``), is a list of ``{"query": ..., "expected_skill": "<name>" | null}``; ``null``
means no project skill should be chosen. Read strictly, as eval sets are (by
:mod:`.set_places`): an unknown skill name, a query given twice or a malformed entry is a
one-line error naming the file and the entry.
"""

from __future__ import annotations

from dataclasses import dataclass


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
