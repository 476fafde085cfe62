"""What the collected items will sample: their contexts, entries and plans.

The header's cost estimate sizes every item of the session before collection; message
batches make the items' runs ahead (in a plain run from the items, on the xdist controller
from the node ids the workers collected, as it has the skills but no items).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin.items import (
    SamplingItem,
    routing_item_name,
    routing_request,
    trigger_item_name,
)

if TYPE_CHECKING:
    from pytest_skilltrigger.model.context import TriggerContext
    from pytest_skilltrigger.model.plan import SamplingPlan
    from pytest_skilltrigger.plugin.role import Role
    from pytest_skilltrigger.skills.evalset import EvalEntry

Request = tuple["TriggerContext", "EvalEntry", "SamplingPlan"]


def requests_of_items(items: Iterable[pytest.Item], plan: SamplingPlan) -> list[Request]:
    """What the collected items will sample (a plain run's)."""
    return [item.request(plan) for item in items if isinstance(item, SamplingItem)]


def requests_of_ids(role: Role, ids: Sequence[str], plan: SamplingPlan) -> list[Request]:
    """What the items with these node ids will sample (the xdist controller's, which has the
    skills but no items): each id's file is a skill's SKILL.md or a routing eval set, and its
    name the item name built from the same entry."""
    by_file: dict[str, dict[str, Request]] = {}
    requests: list[Request] = []
    for nodeid in ids:
        file, _, name = nodeid.partition("::")
        path = os.path.abspath(os.path.join(role.config.rootpath, file))
        if path not in by_file:
            by_file[path] = _named_requests(role, path, plan)
        request = by_file[path].get(name)
        if request is not None:
            requests.append(request)
    return requests


def requests_of_session(role: Role, plan: SamplingPlan) -> list[Request]:
    """What every item of the session will sample, known before collection (the header's
    estimate): each skill's entries and each routing entry, once per model of a matrix."""
    paths = [*role.by_skill_md, *role.by_routing_path]
    return [request for path in paths for request in _named_requests(role, path, plan).values()]


def _named_requests(role: Role, path: str, plan: SamplingPlan) -> dict[str, Request]:
    models = role.settings.models or (None,)  # a matrix's items are one per model
    target = role.by_skill_md.get(path)
    if target is not None:
        context = target.context()
        return {
            trigger_item_name(target, e, m): (context.on_model(m), e, plan)
            for e in target.eval_set.entries
            for m in models
        }
    routing = role.by_routing_path.get(path)
    if routing is None:
        return {}
    contexts = role.routing_contexts(routing)
    return {
        routing_item_name(e, m): routing_request(routing, contexts, e, plan, m)
        for e in routing.entries
        for m in models
    }
