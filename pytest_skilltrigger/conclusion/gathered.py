"""Every item's result, typed, as it arrives from the process that ran it.

The controller decodes each report once (:mod:`pytest_skilltrigger.plugin.wire`) and hands the
typed result here; the report, the routing tables, the improvement rounds' first iteration
and the pytest-html columns all read what is gathered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from typing import Any

from pytest_skilltrigger.engine.load_governor import LoadReport
from pytest_skilltrigger.model.outcome import QueryResult, routing_verdict
from pytest_skilltrigger.reports.json_report import compact
from pytest_skilltrigger.reports.routing_table import (
    RoutingItemResult,
    RoutingTable,
    routing_tables,
)
from pytest_skilltrigger.reports.summary import SessionResults, Variant
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.routing_set import RoutingSet


class Gathered:
    """The session's results by skill and by folder, and each trigger item's by node id."""

    def __init__(
        self,
        targets: Sequence[Target],
        routing_sets: Sequence[RoutingSet],
        models: Sequence[str] = (),
    ) -> None:
        self.targets = list(targets)
        self.results = SessionResults(targets, models)
        #: each folder's routing items by model (None: the session's one model) and entry index
        #: (a report seen again replaces, never adds)
        self.routing: dict[tuple[str, str | None], dict[int, RoutingItemResult]] = {}
        self._by_skill_md = {t.skill.skill_md: t for t in targets}
        self._by_routing_path = {r.path: r for r in routing_sets}
        self._by_node: dict[str, tuple[Target, QueryResult]] = {}
        #: every item's result by node id, routing items' too (a shard's part carries them)
        self.by_node: dict[str, QueryResult] = {}
        #: how many CLI runs each xdist worker kept in flight (none where this process ran them)
        self.worker_loads: list[LoadReport] = []

    def add_worker_load(self, data: dict[str, Any]) -> None:
        """An xdist worker's report of the CLI runs it kept in flight, as it crossed."""

        self.worker_loads.append(LoadReport.from_dict(data))

    def add_item(
        self,
        nodeid: str,
        skill_md: str,
        index: int,
        result: QueryResult,
        variant: Variant | None = None,
    ) -> Target | None:
        """Keep a trigger item's result under its skill (and its model in a matrix, its crowd
        size); its target, or None for a skill this process did not load (a worker that read
        its skills elsewhere)."""
        target = self._by_skill_md.get(skill_md)
        if target is None:
            return None
        self._by_node[nodeid] = (target, result)
        self.by_node[nodeid] = result
        self.results.add(target, index, result, variant or Variant())
        return target

    def add_routing(
        self, nodeid: str, path: str, index: int, result: QueryResult, model: str | None = None
    ) -> RoutingItemResult | None:
        """Keep a routing item's result under its folder (and model), with its verdict."""
        routing = self._by_routing_path.get(path)
        if routing is None:
            return None
        self.by_node[nodeid] = result
        entry = routing.entries[index]
        item = RoutingItemResult(entry, result, routing_verdict(entry.expected_skill, result))
        self.routing.setdefault((routing.folder, model), {})[entry.index] = item
        return item

    def result_of(self, nodeid: str) -> tuple[Target, QueryResult] | None:
        """The typed result of a trigger item, once its report has arrived."""
        return self._by_node.get(nodeid)

    @cached_property
    def routing_tables(self) -> list[RoutingTable]:
        """Each folder's routing table, built once the items are done (the reports, the rounds'
        page and pytest-html's summary all show it)."""
        folders: dict[str, list[str]] = {}
        for target in self.targets:  # deselected ones too: a sibling is never "other"
            folders.setdefault(os.path.dirname(target.skill.path), []).append(target.name)
        tables = []
        for model in self.results.models or (None,):  # a matrix: each model's own tables
            skills = [s for s in self.results.ordered() if s.model == model and s.variant.base]
            routing = {folder: items for (folder, m), items in self.routing.items() if m == model}
            for table in routing_tables(skills, routing, folders):
                table.model = model
                tables.append(table)
        return tables

    def starting_results(self) -> dict[str, dict[int, QueryResult]]:
        """The items' results by SKILL.md and entry (a matrix's first model's): the
        improvement rounds' first iteration reuses them."""
        first = self.results.first_model()
        skills = self.results.skills.items()
        return {
            skill_md: dict(skill.rows)
            for (skill_md, variant), skill in skills
            if variant.model == first and variant.base
        }

    def over_budget(self) -> int:
        """Queries (trigger and routing items) skipped because the budget ran out."""
        routed = [i.result for items in self.routing.values() for i in items.values()]
        return sum(1 for r in [*self.results.all_results(), *routed] if r.over_budget)


def junit_properties(result: QueryResult) -> list[tuple[str, Any]]:
    """An item's numbers as junitxml properties (``chosen`` as JSON text: junitxml writes
    ``str(value)``, which for a dict would be Python's repr)."""
    low, high = result.interval
    return [
        ("trigger_rate", round(result.trigger_rate, 4)),
        ("interval_low", round(low, 4)),
        ("interval_high", round(high, 4)),
        ("decided", result.decided),
        ("borderline", result.borderline),
        ("triggers", result.triggers),
        ("runs", result.runs_made),
        ("chosen", compact(dict(result.chosen))),
    ]
