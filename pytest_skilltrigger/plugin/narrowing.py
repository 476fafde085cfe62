"""Which collected trigger and routing items run, as pytest deselects: the skills a change
touched (``--trigger-changed-since``), one shard's part (``--trigger-shard``), and in a merge
(``--trigger-merge``) the items the parts hold. Every process decides the same from the same
inputs (git, the items' ids), so xdist's workers agree with their controller.

What is read for it (git, the baseline's competitors, the parts) is read when the session
is set up, before any call: a bad revision or a missing part is a one-line usage error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin import options
from pytest_skilltrigger.plugin.items import RoutingItem, SamplingItem, TriggerItem
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.merge import Parts
    from pytest_skilltrigger.model.shards import Shard
    from pytest_skilltrigger.plugin.setup import Setup, SkillsInPlay
    from pytest_skilltrigger.skills.changed import ChangeSelection


@dataclass(frozen=True)
class Narrowing:
    """The session's narrowing of its items (each part None: not asked for)."""

    changes: ChangeSelection | None = None
    shard: Shard | None = None
    parts: Parts | None = None

    @classmethod
    def of(cls, setup: Setup, skills: SkillsInPlay) -> Narrowing:
        """Read from the options: git for a change, the parts for a merge."""
        config = setup.config
        since = options.value(config, "--trigger-changed-since")
        shard_text = options.value(config, "--trigger-shard")
        merge = options.value(config, "--trigger-merge")
        if merge and shard_text:
            raise InputError("--trigger-merge", "merges the parts: not with --trigger-shard")
        changes = _changes(setup, skills, str(since)) if since and skills.targets else None
        shard = None
        if shard_text:
            from pytest_skilltrigger.model.shards import Shard  # deferred: only for a shard

            shard = Shard.parse(shard_text)
        parts = None
        if merge and skills.targets:
            from pytest_skilltrigger.conclusion.merge import read_parts  # deferred: a merge

            parts = read_parts(str(merge))
        return cls(changes, shard, parts)

    @property
    def active(self) -> bool:
        return self.changes is not None or self.shard is not None or self.parts is not None

    def select(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Deselect (through pytest's hook) the items that do not run."""
        if not self.active:
            return
        kept = [item for item in items if self._changed(item)]
        if self.shard is not None:
            ids = [item.nodeid for item in kept if isinstance(item, SamplingItem)]
            part = self.shard.picks(ids)
            kept = [i for i in kept if not isinstance(i, SamplingItem) or i.nodeid in part]
        if self.parts is not None:
            held = self.parts.results
            kept = [i for i in kept if not isinstance(i, SamplingItem) or i.nodeid in held]
        if len(kept) == len(items):
            return
        chosen = {id(item) for item in kept}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in chosen])
        items[:] = kept

    def keeps_file(self, path: str) -> bool:
        """Whether a change lets a file's items run (a SKILL.md's or a routing set's)."""
        changes = self.changes
        return changes is None or changes.keeps_skill(path) or changes.keeps_routing(path)

    def _changed(self, item: pytest.Item) -> bool:
        """Whether a change lets the item run (every item when there is no change)."""
        if self.changes is None:
            return True
        if isinstance(item, TriggerItem):
            return self.changes.keeps_skill(item.target.skill.skill_md)
        if isinstance(item, RoutingItem):
            return self.changes.keeps_routing(item.routing.path)
        return True

    def header_lines(self) -> list[str]:
        """What the header says of the narrowing."""
        lines = []
        if self.changes is not None:
            lines.append(f"skilltrigger: {self.changes.line()}")
        if self.shard is not None:
            lines.append(f"skilltrigger: shard {self.shard}: this part's items run")
        if self.parts is not None:
            lines.append(f"skilltrigger: {self.parts.line()}")
        return lines


def _changes(setup: Setup, skills: SkillsInPlay, since: str) -> ChangeSelection:
    """The skills the change touched, with their competitors in the baseline if one is
    given."""
    # deferred: git and the change's rules, only for --trigger-changed-since
    from pytest_skilltrigger.skills.changed import select_changed
    from pytest_skilltrigger.support.git import changed_files

    changed = changed_files(str(setup.config.rootpath), since)
    neighbours = None
    baseline = setup.gates.baseline_path
    if baseline:
        from pytest_skilltrigger.reports.analysis import load_baseline  # deferred: a baseline

        neighbours = load_baseline(baseline).neighbours
    return select_changed(skills.targets, skills.routing_sets, changed, since, neighbours)
