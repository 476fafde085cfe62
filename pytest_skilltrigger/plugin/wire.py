"""The one channel an item's result crosses to the controller on: ``report.skilltrigger``.

xdist sends only plain JSON values, so the process that ran the item encodes its typed result
once and the controller decodes it once, when the report arrives; everything after that
(reports, junit properties, pytest-html cells) works on the typed :class:`ItemRecord`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.outcome import QueryResult

ATTRIBUTE = "skilltrigger"


@dataclass(frozen=True)
class ItemRecord:
    """An item's result as the controller keeps it."""

    skill_md: str  # which target (the controller loaded the same ones)
    index: int  # the entry's position in its eval set
    context_key: str | None  # what the runs are stored under
    result: QueryResult


def encode(record: ItemRecord) -> dict[str, Any]:
    return {
        "skill_md": record.skill_md,
        "index": record.index,
        "context_key": record.context_key,
        "result": record.result.to_dict(),
    }


def attach(report: Any, record: ItemRecord) -> None:
    """Put the record on a report as plain values."""
    setattr(report, ATTRIBUTE, encode(record))


@dataclass(frozen=True)
class RoutingRecord:
    """A routing item's result as the controller keeps it."""

    path: str  # the routing eval set
    index: int
    context_key: str | None
    result: QueryResult


def attach_routing(report: Any, record: RoutingRecord) -> None:
    setattr(
        report,
        ATTRIBUTE,
        {"routing": record.path, "index": record.index, "context_key": record.context_key,
         "result": record.result.to_dict()},
    )  # fmt: skip


def decode_routing(report: Any) -> RoutingRecord | None:
    """The routing record a report carries, or None."""
    data = getattr(report, ATTRIBUTE, None)
    if not isinstance(data, dict) or "routing" not in data:
        return None
    from pytest_skilltrigger.engine.outcome import QueryResult  # only once a skill ran

    return RoutingRecord(
        data["routing"], int(data["index"]), data.get("context_key"),
        QueryResult.from_dict(data["result"]),
    )  # fmt: skip


def attach_checks(report: Any, checks: list[tuple[str | None, QueryResult]]) -> None:
    """Put the ``skill_trigger`` fixture's results of a test on its report, as plain values
    (the controller stores their runs and counts their calls)."""
    setattr(
        report,
        ATTRIBUTE,
        {"checks": [{"context_key": k, "result": r.to_dict()} for k, r in checks]},
    )


def decode_checks(report: Any) -> list[tuple[str | None, QueryResult]]:
    """The fixture results a test's report carries (empty for other reports)."""
    data = getattr(report, ATTRIBUTE, None)
    if not isinstance(data, dict) or "checks" not in data:
        return []
    from pytest_skilltrigger.engine.outcome import QueryResult  # only once a check ran

    return [(c.get("context_key"), QueryResult.from_dict(c["result"])) for c in data["checks"]]


def decode(report: Any) -> ItemRecord | None:
    """The item record a report carries, or None for reports of other tests."""
    data = getattr(report, ATTRIBUTE, None)
    if not isinstance(data, dict) or "skill_md" not in data:
        return None
    from pytest_skilltrigger.engine.outcome import QueryResult  # only once a skill ran

    return ItemRecord(
        skill_md=data["skill_md"],
        index=int(data["index"]),
        context_key=data.get("context_key"),
        result=QueryResult.from_dict(data["result"]),
    )
