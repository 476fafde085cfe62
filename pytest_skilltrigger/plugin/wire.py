"""The one channel results cross to the controller on: ``report.skilltrigger``.

xdist sends only plain JSON values, so the process that ran a test encodes its typed results
once and the controller decodes them once, when the report arrives; everything after that
(reports, junit properties, pytest-html cells) works on the typed records. A report carries a
list of records: a trigger item's or a routing item's result, and the ``skill_trigger``
fixture's checks made by a test.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_skilltrigger.model.outcome import QueryResult

ATTRIBUTE = "skilltrigger"


@dataclass(frozen=True)
class ItemRecord:
    """A trigger item's result."""

    skill_md: str  # which target (the controller loaded the same ones)
    index: int  # the entry's position in its eval set
    context_key: str | None  # what the runs are stored under
    model: str | None  # its model in a matrix (None: the session's one model)
    result: QueryResult
    crowd: int | None = None  # the other installed skills it was asked among (--trigger-crowd)
    mode: str | None = None  # its permission mode in a matrix (None: the session's own)


@dataclass(frozen=True)
class RoutingRecord:
    """A routing item's result."""

    path: str  # the routing eval set
    index: int
    context_key: str | None
    model: str | None  # its model in a matrix (None: the session's one model)
    result: QueryResult


@dataclass(frozen=True)
class CheckRecord:
    """One ``skill_trigger`` fixture check made by a test."""

    context_key: str | None
    result: QueryResult


Record = ItemRecord | RoutingRecord | CheckRecord
KINDS: dict[str, type[Record]] = {k.__name__: k for k in (ItemRecord, RoutingRecord, CheckRecord)}


def attach(report: Any, records: list[Record]) -> None:
    """Put records on a report as plain values."""
    payload = []
    for record in records:
        fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        fields["result"] = record.result.to_dict()
        payload.append({"kind": type(record).__name__, **fields})
    setattr(report, ATTRIBUTE, payload)


def carries(report: Any) -> bool:
    """Whether a report carries records (a project's own test's report carries none, unless
    it used the ``skill_trigger`` fixture)."""
    return bool(getattr(report, ATTRIBUTE, None))


def decode(report: Any) -> list[Record]:
    """The records a report carries (none for reports of other tests)."""
    data = getattr(report, ATTRIBUTE, None)
    if not data or not isinstance(data, list):
        return []
    from pytest_skilltrigger.model.outcome import QueryResult  # deferred: once a skill ran

    records: list[Record] = []
    for item in data:
        fields = {k: v for k, v in item.items() if k != "kind"}
        fields["result"] = QueryResult.from_dict(fields["result"])
        records.append(KINDS[item["kind"]](**fields))
    return records
