"""Pytest nodes: one collector per skill (its SKILL.md) and one item per eval entry.

The item waits for its query's result in ``setup`` (so a failed API call is an *error*, a
budget stop a *skip*) and checks the verdict in ``runtest`` (a wrong trigger rate is a
*failure* that explains itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.engine.outcome import QueryResult, describe_chosen
from pytest_skilltrigger.engine.verdict import passes
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.evalset import EvalEntry

if TYPE_CHECKING:
    from pytest_skilltrigger.plugin.runtime import PluginRuntime

MARKER = "skill_trigger"


def slug(text: str, limit: int = 40) -> str:
    """A readable, stable id fragment from a query."""
    words = re.findall(r"\w+", text.lower())
    out = "-".join(words)[:limit].strip("-_")
    return out or "query"


def safe_name(name: str) -> str:
    """A skill name usable in a node id: ``::``, brackets and spaces would break selection."""
    return re.sub(r"[^\w.-]+", "-", name).strip("-") or "skill"


def failure_message(result: QueryResult, skill_name: str) -> str:
    """What a failing item prints: query, expectation, observed rate and what was chosen."""
    expected = "trigger" if result.should_trigger else "not trigger"
    relation = ">=" if result.trigger_rate >= result.threshold else "<"
    lines = [
        f"query: {result.query!r}",
        f"expected {skill_name!r} to {expected}: triggered {result.triggers}/{result.runs} runs, "
        f"rate {result.trigger_rate:.2f} {relation} threshold {result.threshold:.2f}",
    ]
    if result.should_trigger:
        instead = describe_chosen(result.chosen, exclude=f"skill:{skill_name}")
        lines.append(f"the model chose instead: {instead}")
    else:
        lines.append(f"the model chose: {describe_chosen(result.chosen)}")
    return "\n".join(lines)


@dataclass(frozen=True)
class TriggerCheck:
    """What the ``skill_trigger`` fixture returns for one query."""

    rate: float
    triggers: int
    runs: int
    triggered: bool
    chosen: dict[str, int]

    @classmethod
    def from_result(cls, result: QueryResult) -> TriggerCheck:
        return cls(
            rate=result.trigger_rate,
            triggers=result.triggers,
            runs=result.runs,
            triggered=passes(True, result.trigger_rate, result.threshold),
            chosen=dict(result.chosen),
        )


class BackendRequiredError(Exception):
    """No backend is available and --trigger-require-backend forbids skipping."""


class TriggerRunError(Exception):
    """A run failed after retries: the item errors instead of counting a miss."""


class TriggerMismatch(Exception):
    """The trigger rate is on the wrong side of the threshold."""


class SkillFile(pytest.File):
    """The collector for one skill; ``path`` is its SKILL.md."""

    target: Target
    runtime: PluginRuntime

    def collect(self) -> Iterator[TriggerItem]:
        for entry in self.target.eval_set.entries:
            yield TriggerItem.from_parent(
                self,
                name=f"{safe_name(self.target.name)}[{entry.index:02d}-{slug(entry.query)}]",
                entry=entry,
            )


class TriggerItem(pytest.Item):
    """One eval entry: its verdict is the trigger-rate threshold check."""

    def __init__(self, *, entry: EvalEntry, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.result: QueryResult | None = None
        self.add_marker(MARKER)

    @property
    def target(self) -> Target:
        assert isinstance(self.parent, SkillFile)
        return self.parent.target

    @property
    def runtime(self) -> PluginRuntime:
        assert isinstance(self.parent, SkillFile)
        return self.parent.runtime

    def setup(self) -> None:
        self.result = self.runtime.result_for(self)
        if self.result.skipped:
            pytest.skip(self.result.skipped)
        if self.result.errors:
            raise TriggerRunError(self.result.error)

    def runtest(self) -> None:
        assert self.result is not None
        if not self.result.passed:
            message = failure_message(self.result, self.target.name)
            if self.runtime.gates.min_accuracy is not None:
                pytest.xfail(message.replace("\n", "; "))
            raise TriggerMismatch(message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str:
        if isinstance(excinfo.value, TriggerMismatch):
            return str(excinfo.value)
        if isinstance(excinfo.value, TriggerRunError):
            return f"query: {self.entry.query!r}\ntrigger run failed: {excinfo.value}"
        return str(super().repr_failure(excinfo, style=style))

    def _repr_failure_py(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        # pytest renders setup errors with this method, not repr_failure: keep them short too
        if isinstance(excinfo.value, (TriggerMismatch, TriggerRunError)):
            return self.repr_failure(excinfo, style=style)
        return super()._repr_failure_py(excinfo, style=style)

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.target.eval_set.path, None, f"{self.name}: {self.entry.query}"
