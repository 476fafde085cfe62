"""The xdist worker's role."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_skilltrigger.engine.settings import Settings
from pytest_skilltrigger.plugin.items import TriggerItem
from pytest_skilltrigger.plugin.running import ItemRunner
from pytest_skilltrigger.plugin.xdist_queue import upcoming_items


class DistWorker(ItemRunner):
    """An xdist worker: runs the items handed to it and stores nothing (the controller
    stores what the reports carry); starts the runs of the items queued behind the current
    one, and spends only its share of the session's budget."""

    writes_store = False

    def adjust_settings(self, settings: Settings) -> Settings:
        if settings.budget_usd is None:
            return settings
        # every worker keeps its own guard: each gets an equal share of the budget
        workers = max(1, int(self.config.workerinput.get("workercount", 1)))
        return dataclasses.replace(settings, budget_usd=settings.budget_usd / workers)

    def upcoming(self, item: TriggerItem) -> list[pytest.Item]:
        return upcoming_items(item)
