"""The parts of a sharded session (``--trigger-merge=GLOB``), read back for one report.

Each shard's ``--trigger-json`` (written with ``--trigger-shard=K/N``) carries its items'
results by node id under ``"items"``. The merging session collects the same items and takes
each one's result from its part, with no call: the items pass and fail as they did, and the
one report, gate, page, step summary and comment are made from them as a single run's are.
Every part of the N must be there, once: a shard that crashed is an error, not a smaller
report.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.outcome import QueryResult
from pytest_skilltrigger.model.prices import Spend
from pytest_skilltrigger.model.shards import Shard
from pytest_skilltrigger.skills.changed import Unchanged
from pytest_skilltrigger.support.errors import InputError

FLAG = "--trigger-merge"


@dataclass(frozen=True)
class Parts:
    """What the parts ran: each item's result by node id, what they spent by phase (added
    up), and what they said of the session (its backend, model and mode, what was not
    re-run)."""

    paths: tuple[str, ...]
    count: int
    results: Mapping[str, QueryResult]
    spending: Mapping[str, Spend] = field(default_factory=dict)
    backend: str | None = None
    model: str | None = None
    permission_mode: str = "default"
    not_rerun: tuple[Unchanged, ...] = ()
    changed_since: str | None = None

    def line(self) -> str:
        """The header's line."""
        return (
            f"merging {len(self.paths)} parts of {self.count} ({len(self.results)} items' "
            "results): no call is made"
        )


def read_parts(pattern: str) -> Parts:
    """Read every part the glob names; InputError naming the file for one that is not a
    shard's JSON, and for a missing or repeated part."""
    paths = sorted(glob.glob(os.path.expanduser(pattern), recursive=True))
    if not paths:
        raise InputError(FLAG, f"no file matches {pattern!r}")
    documents = [(path, _document(path)) for path in paths]
    shards = [(path, _shard_of(path, doc)) for path, doc in documents]
    count = _whole(shards)
    results: dict[str, QueryResult] = {}
    spending: dict[str, Spend] = {}
    for path, doc in documents:
        for nodeid, result in _items(path, doc):
            if nodeid in results:
                raise InputError(path, f"item {nodeid} is in another part too")
            results[nodeid] = result
        for phase, spend in _phases(doc).items():
            spending[phase] = spending.get(phase, Spend()) + spend
    first = documents[0][1]
    return Parts(
        tuple(paths),
        count,
        results,
        spending,
        _text(first.get("backend")),
        _text(first.get("model")),
        _text(first.get("permission_mode")) or "default",
        tuple(Unchanged(str(u["skill"]), str(u["reason"])) for u in _list(first, "not_rerun")),
        _text(first.get("changed_since")),
    )


def _document(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read this part: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(path, f"this part is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, "this part is not a --trigger-json report")
    if data.get("stopped"):
        raise InputError(path, f"this shard stopped at its start: {data['stopped']}")
    return data


def _shard_of(path: str, document: dict[str, Any]) -> Shard:
    if not isinstance(document.get("items"), list) or not document.get("shard"):
        raise InputError(path, "not a shard's report: write the parts with --trigger-shard=K/N")
    try:
        return Shard.parse(document["shard"])
    except InputError as exc:
        raise InputError(path, f"its shard: {exc.problem}") from None


def _whole(shards: list[tuple[str, Shard]]) -> int:
    """N, once every part 1..N is there exactly once."""
    counts = {shard.count for _path, shard in shards}
    if len(counts) != 1:
        said = ", ".join(f"{os.path.basename(p)} {s}" for p, s in shards)
        raise InputError(FLAG, f"the parts were cut in different numbers: {said}")
    count = counts.pop()
    seen: dict[int, str] = {}
    for path, shard in shards:
        if shard.index in seen:
            raise InputError(path, f"part {shard} is also {seen[shard.index]}")
        seen[shard.index] = path
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in seen]
    if missing:
        raise InputError(FLAG, f"part {', '.join(missing)} missing: did its job fail?")
    return count


def _items(path: str, document: dict[str, Any]) -> list[tuple[str, QueryResult]]:
    found = []
    for n, item in enumerate(document["items"]):
        try:
            found.append((str(item["nodeid"]), QueryResult.from_dict(item["result"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(path, f"items[{n}] is not an item's result ({exc})") from None
    return found


def _phases(document: dict[str, Any]) -> dict[str, Spend]:
    totals = document.get("totals")
    by_phase = totals.get("by_phase") if isinstance(totals, dict) else None
    if not isinstance(by_phase, dict):
        return {}
    return {str(phase): Spend.from_dict(spend) for phase, spend in by_phase.items()}


def _list(document: dict[str, Any], key: str) -> list[dict[str, Any]]:
    found = document.get(key)
    return [x for x in found if isinstance(x, dict)] if isinstance(found, list) else []


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
