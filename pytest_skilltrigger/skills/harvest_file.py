"""Writing a harvest (``--trigger-harvest=FILE``) and merging it into eval sets
(``--trigger-harvest-merge``).

The file is an eval set this plugin reads: ``cases`` naming their skill
(``expected_skill``), each marked ``"harvested": true`` with its signal, date, source and
history; beside them each skill's weeks. A file written before is read back and kept: a
second harvest of the same sessions adds nothing. Merging adds to a skill's own JSON eval set
only the entries it does not hold yet (the same query and history), so merging twice adds
nothing twice; a set kept in another shape (YAML, CSV, Markdown) is left as it is, and said.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_skilltrigger.skills.evalset import QUERY_KEYS, WRAPPERS
from pytest_skilltrigger.skills.harvest import Harvest
from pytest_skilltrigger.support.atomic import atomic_write_text
from pytest_skilltrigger.support.errors import InputError

SCHEMA = 1
HARVESTED = "harvested from your own sessions"  # how reports head these entries
DESCRIPTION = (
    "Trigger eval entries harvested by pytest-skilltrigger from your own Claude Code sessions: "
    "observed loads, misses the user forced next, loads the user undid. Review before relying "
    "on them."
)


def case_key(case: Mapping[str, Any]) -> tuple[str, str, str]:
    """What makes two entries the same: their skill, their query (spaces and case aside) and
    their history."""
    query = next((case[k] for k in QUERY_KEYS if isinstance(case.get(k), str)), "")
    history = json.dumps(case.get("history") or [], sort_keys=True, ensure_ascii=False)
    skill = str(case.get("expected_skill") or "")
    return skill, " ".join(query.lower().split()), history


@dataclass(frozen=True)
class Written:
    """What a harvest wrote: new entries, those the file held already, by skill and signal."""

    new: int
    kept: int
    by_signal: Mapping[str, Mapping[str, int]]


def write_harvest(path: str, harvest: Harvest) -> Written:
    """Write (or add to) the harvest file; InputError naming it when it holds something else."""
    before = _existing_cases(path)
    known = {case_key(c) for c in before}
    cases = list(before)
    by_signal: dict[str, dict[str, int]] = {}
    for found in harvest.found:
        case = found.to_case()
        counts = by_signal.setdefault(found.skill, {})
        counts[found.signal] = counts.get(found.signal, 0) + 1
        if case_key(case) not in known:
            known.add(case_key(case))
            cases.append(case)
    data = {
        "schema_version": SCHEMA,
        "description": DESCRIPTION,
        "read_from": list(harvest.folders),
        "weeks": {
            skill: {week: asdict(counts) for week, counts in weeks.items()}
            for skill, weeks in harvest.weeks.items()
        },
        "cases": cases,
    }
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return Written(len(cases) - len(before), len(before), by_signal)


def _existing_cases(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise InputError(path, f"--trigger-harvest: holds something else ({exc})") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or data.get("schema_version") != SCHEMA:
        raise InputError(path, "--trigger-harvest: is not a harvest file; name another")
    return [c for c in cases if isinstance(c, dict)]


@dataclass(frozen=True)
class Merged:
    """What a merge did to one skill's eval set: entries added, or why it was left alone."""

    path: str
    added: int = 0
    left: str = ""


def merge_into(path: str, cases: Sequence[Mapping[str, Any]]) -> Merged:
    """Add the cases the eval set at ``path`` does not hold (a new JSON list when there is
    none)."""
    data: Any = []
    if os.path.exists(path):  # (else a new list: the skill had no eval set)
        if not path.endswith(".json"):
            return Merged(path, left="kept in a shape merged by hand (not JSON)")
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return Merged(path, left="not read as JSON; left as it is")
    entries = _entry_list(data)
    if entries is None:
        return Merged(path, left="its shape is merged by hand")
    query_key = next((k for e in entries for k in QUERY_KEYS if k in e), "query")
    known = {case_key({**e, "expected_skill": ""}) for e in entries if isinstance(e, dict)}
    added = 0
    for case in cases:
        entry = _entry(case, query_key)
        if case_key({**entry, "expected_skill": ""}) not in known:
            known.add(case_key({**entry, "expected_skill": ""}))
            entries.append(entry)
            added += 1
    if added:
        atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return Merged(path, added)


def _entry_list(data: Any) -> list[Any] | None:
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        for key in WRAPPERS:
            if isinstance(data.get(key), list):
                found: list[Any] = data[key]
                return found
    return None


def _entry(case: Mapping[str, Any], query_key: str) -> dict[str, Any]:
    """A harvested case as an entry of one skill's set."""
    entry = {query_key: case["prompt"], "should_trigger": case["should_trigger"]}
    left = ("prompt", "expected_skill", "should_trigger")
    entry.update({k: v for k, v in case.items() if k not in left})
    return entry


def harvested_cases(path: str, skill: str) -> list[dict[str, Any]]:
    """The cases of a harvest file about one skill."""
    return [c for c in _existing_cases(path) if c.get("expected_skill") == skill]
