"""How much of a skill listing Claude Code shows on each model: the listing budget.

Past the budget Claude Code lists skills as bare names (``- pdf``, no text), and a bare-listed
skill is chosen, if at all, by its name alone: a verdict measured on a full listing says
nothing about what users of that model see. The rule (a share of the model's context window,
the bundled built-ins keeping their text, the others filled by usage, then in listing
order) was observed
with the pinned CLI; ``docs/explanation/context.md`` gives it with the edges
``benchmarks/bench_listing_budget.py`` measures.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_skilltrigger.model.context import ListedSkill, TriggerContext, cut_point

BUDGET_SHARE = 0.01  # of the context window, in characters
SMALL_WINDOW_BUDGET = 8_000  # 200,000 tokens x 4 characters x 1%
LARGE_WINDOW_BUDGET = 30_000  # 1,000,000 tokens x 3 characters x 1%
EXTENDED_WINDOW_BUDGET = 40_000  # a 4.x model with "[1m]": 1,000,000 x 4 x 1%
# the models the pinned CLI gives a 200k-token window (dated names included)
SMALL_WINDOW_MODELS = (
    "claude-haiku-4-5",
    "claude-sonnet-4-6",
    "claude-opus-4-5",
    "claude-opus-4-6",
)
# the CLI's bundled built-in lines as its budget counts them: 6,039 characters of lines and
# the 10 newlines between them, measured with 2.1.328 (the same on every model)
BUNDLED_CHARS = 6_039 + 10
BUDGET_ENV = "SLASH_COMMAND_TOOL_CHAR_BUDGET"

FULL, CUT, BARE, UNLISTED = "full", "cut", "bare", "unlisted"


def listing_budget(model: str | None, environ: Mapping[str, str] = os.environ) -> int:
    """The listing budget, in characters, that Claude Code gives ``model``."""
    override = environ.get(BUDGET_ENV, "").strip()
    if override.isdigit() and int(override) > 0:
        return int(override)
    name = (model or "").lower()
    if any(name.startswith(small) for small in SMALL_WINDOW_MODELS):
        return EXTENDED_WINDOW_BUDGET if name.endswith("[1m]") else SMALL_WINDOW_BUDGET
    return LARGE_WINDOW_BUDGET


@dataclass(frozen=True)
class ListingFit:
    """How one listing fits a budget: its full size and the skills shown as bare names."""

    budget: int
    size: int  # the listing with every text shown, as the budget counts it
    bare: frozenset[str]
    model: str | None = None  # whose budget it is (None: the CLI's default model's)

    @property
    def over_by(self) -> int:
        """How far the full listing passes the budget (0 within it)."""
        return max(0, self.size - self.budget)

    def shown(self, skill: ListedSkill | None) -> str:
        """How a skill is shown: full, cut (its text past 1,536 characters), bare, or
        unlisted (None: not in the listing at all)."""
        if skill is None:
            return UNLISTED
        if skill.name in self.bare:
            return BARE
        return CUT if cut_point(skill.description, skill.when_to_use) else FULL

    def shown_in(self, context: TriggerContext) -> str:
        """How the context's skill under test is shown (unlisted when it is never listed)."""
        return self.shown(context.tested if context.model_invocable else None)

    def to_dict(self) -> dict[str, int]:
        """The budget, the full listing's size and how far it passes the budget."""
        return {"budget": self.budget, "size": self.size, "over_by": self.over_by}

    def line(self, skill: ListedSkill) -> str:
        """The skill's line as the model sees it."""
        return skill.bare_line if skill.name in self.bare else skill.line


def fit_listing(skills: Sequence[ListedSkill], budget: int, model: str | None = None) -> ListingFit:
    """Which skills of a listing (in Claude Code's order) are shown bare within ``budget``."""
    bundled = [s for s in skills if s.bundled]
    others = [s for s in skills if not s.bundled]
    fixed = BUNDLED_CHARS if bundled else 0
    newlines = max(0, len(others) - 1) + (1 if bundled and others else 0)
    size = fixed + sum(_full(s) for s in others) + newlines
    if size <= budget:
        return ListingFit(budget, size, frozenset(), model)
    left = budget - fixed - newlines - sum(_bare(s) for s in others)
    bare = set()
    # the most used first (the CLI's usage score), then the rest in listing order
    ranked = sorted(others, key=lambda s: -s.usage)  # stable: listing order among equals
    for skill in ranked:
        extra = _full(skill) - _bare(skill)
        if extra <= left:
            left -= extra
        else:
            bare.add(skill.name)
    return ListingFit(budget, size, frozenset(bare), model)


def _full(skill: ListedSkill) -> int:
    return skill.cli_sizes[0] if skill.cli_sizes else len(skill.line)


def _bare(skill: ListedSkill) -> int:
    return skill.cli_sizes[1] if skill.cli_sizes else len(skill.bare_line)


def fit_of(
    context: TriggerContext, model: str | None, environ: Mapping[str, str] = os.environ
) -> ListingFit:
    """How the context's listing fits the budget of ``model``."""
    return fit_listing(context.listing(), listing_budget(model, environ), model)


def how_shown(
    context: TriggerContext, model: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, ListingFit]:
    """How the skill under test is shown on ``model``, and the fit that says so."""
    fit = fit_of(context, model, environ)
    return fit.shown_in(context), fit
