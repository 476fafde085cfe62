"""Controls before the spend: can this session see a trigger at all?

A harness that cannot see a trigger (a CLI that offers skills differently, a proxy that strips
the tools, a model that answers without them, a timeout read as "did not trigger") reports
every skill as never triggering, for a full run's money. Before the first item of each model,
the session samples two control queries against a control skill with an unmistakable
description, listed with the real ones in the control runs only (the items' requests stay as
they are): one query must trigger it, one must not. Sampled with the items' rule, stored and
counted like any run (phase ``controls``), so a rerun pays nothing; a control that fails stops
the session with what the control saw, and its runs are dropped from the store: a fixed
harness is asked again, never answered from the store by the broken one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.context import USER, ListedSkill, TriggerContext
from pytest_skilltrigger.model.formatting import describe_chosen
from pytest_skilltrigger.skills.evalset import EvalEntry

if TYPE_CHECKING:
    from concurrent.futures import Future

    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.model.plan import SamplingPlan

    #: how a control query is sampled: the session's ``submit``
    Submit = Callable[[TriggerContext, EvalEntry, SamplingPlan], Future[QueryResult]]

CONTROL = ListedSkill(
    "moon-phase-almanac",
    "Tells the phase of the moon (new, waxing, full, waning) for any date and place. Use "
    "whenever the user asks what the moon's phase is, was or will be on a given date.",
    group=USER,
)
POSITIVE = "what phase will the moon be in on 3 March 2027, full or waning?"
NEGATIVE = "what is 17 times 23?"
NO_TRIGGER_CAUSES = (
    "the model answers without tools, a proxy or gateway strips the tools from the request, "
    "the CLI offers skills differently from what this plugin reads, or runs time out"
)
ALWAYS_CAUSES = (
    "the model calls the Skill tool whatever is asked (a stand-in, or a forced tool choice)"
)


@dataclass(frozen=True)
class ControlResult:
    """One model's two controls: their results, and why the session cannot trust its items
    (None: it can). ``context`` is the controls' context (where their runs are stored)."""

    model: str | None
    positive: QueryResult
    negative: QueryResult
    context: TriggerContext | None = None

    @property
    def errored(self) -> bool:
        """Whether a control did not run (an error, a skip): no answer to keep or drop."""
        return any(r.errors or r.skipped for r in (self.positive, self.negative))

    @property
    def stored(self) -> bool:
        """Whether the controls' answer came from runs an earlier session stored."""
        runs = [o for r in (self.positive, self.negative) for o in r.outcomes]
        return bool(runs) and all(o.from_store for o in runs)

    @property
    def problem(self) -> str | None:
        for result in (self.positive, self.negative):
            if result.errors or result.skipped:
                why = result.error or result.skipped
                return f"the control query {result.query!r} did not run: {why}"
        on = f" on {self.model}" if self.model else ""
        if self.positive.passed is not True:
            saw = describe_chosen(self.positive.chosen)
            return (
                f"the positive control{on} did not trigger: asked {POSITIVE!r} beside a skill "
                f"that plainly answers it ({CONTROL.name}), the model chose {saw}. The items "
                f"would read the same as 'never triggers'. Likely: {NO_TRIGGER_CAUSES}"
            )
        if self.negative.passed is not True:
            return (
                f"the negative control{on} triggered: asked {NEGATIVE!r}, the model chose "
                f"{describe_chosen(self.negative.chosen)}. Likely: {ALWAYS_CAUSES}"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "skill": {"name": CONTROL.name, "description": CONTROL.description},
            "positive": {**self.positive.summary_row(), "pass": self.positive.passed},
            "negative": {**self.negative.summary_row(), "pass": self.negative.passed},
        }


def control_context(context: TriggerContext) -> TriggerContext:
    """The control runs' context: ``context``'s listing, its skill under test among the
    others, with the control skill listed too (as a user's skill) and under test."""
    others = (*context.siblings, context.tested) if context.model_invocable else context.siblings
    return TriggerContext(
        CONTROL.name,
        CONTROL.description,
        others,
        context.generic_competitors,
        installed=context.installed,
        model=context.model,
        group=USER,
    )


def run_controls(
    submit: Submit, plan: SamplingPlan, contexts: Sequence[TriggerContext]
) -> list[ControlResult]:
    """Sample the controls with ``submit`` and the items' ``plan`` (in their own phase), once
    per model of ``contexts`` (the first context of each)."""
    plan = replace(plan, phase="controls")
    by_model: dict[str | None, TriggerContext] = {}
    for context in contexts:
        by_model.setdefault(context.model, context)
    pending = []
    for model, context in by_model.items():
        probe = control_context(context)
        positive = submit(probe, EvalEntry(-1, POSITIVE, True), plan)
        negative = submit(probe, EvalEntry(-2, NEGATIVE, False), plan)
        pending.append((model, positive, negative, probe))
    return [ControlResult(model, p.result(), n.result(), c) for model, p, n, c in pending]
