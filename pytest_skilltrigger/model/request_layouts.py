"""How Claude Code lays out its first request for each model: where the skill listing sits,
which reminder sections surround it, and how the model is asked to think.

The pinned CLI (2.1.328) does not ask every model the same way. For the newest models the
listing is a message of its own with the system role, after the user's message; for the others
it is one of several reminder blocks that open the user's message, before the query. Output
and thinking settings differ by model as well. The builtin request follows this table, so each
model of a matrix sees the layout Claude Code gives it. It is data, read by the API
backend's request and by the cost estimate (where the listing can be read from the prompt
cache): a new CLI version's observations change rows here, not the code.

A system-role message needs no beta header (the Messages API takes it as it is), and
thinking and effort are ordinary parameters, so no layout needs a beta endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The sections of Claude Code's first request around the listing, by what they hold (the
# builtin request writes its own short text for each, in the API backend's request).
ENVIRONMENT = "environment"
IDENTITY = "identity"
DEFERRED_TOOLS = "deferred-tools"
AGENTS = "agents"
SKILLS = "skills"
BUDGET = "budget"
GIT_STATUS = "git-status"
DATE = "date"
ATTRIBUTION = "attribution"

# Where the listing sits.
SYSTEM_MESSAGE = "system message"
REMINDER = "reminder"


@dataclass(frozen=True)
class RequestLayout:
    """One model's first request as the pinned CLI sends it.

    ``reminders`` are the ``<system-reminder>`` blocks that open the user's message, in order,
    before the query; ``system_sections`` the sections of the system-role message that follows
    it (none: there is no such message). The only cached block of the messages is that system
    message when there is one, else the query. The git-status reminder is there because the
    CLI sends it in a git repository, where users work and where the claude-code backend's
    workspaces are (outside one the CLI leaves it out).
    """

    reminders: tuple[str, ...]
    system_sections: tuple[str, ...]
    max_tokens: int
    thinking: str | None = None  # "adaptive", "enabled" (with a budget) or None (not sent)
    thinking_budget: int = 0
    effort: str | None = None  # ``output_config.effort`` (None: not sent)

    @property
    def placement(self) -> str:
        """Where the listing sits: a system-role message, or a reminder block."""
        return SYSTEM_MESSAGE if SKILLS in self.system_sections else REMINDER

    def thinking_param(self) -> dict[str, Any] | None:
        """The ``thinking`` parameter, without the CLI's display setting (the default
        display returns thinking as the stream reader expects it)."""
        if self.thinking == "enabled":
            return {"type": "enabled", "budget_tokens": self.thinking_budget}
        if self.thinking is not None:
            return {"type": self.thinking}
        return None


# The listing in a system-role message after the user's, which holds only the git status and
# attribution reminders and the query.
_SYSTEM_SECTIONS = (ENVIRONMENT, IDENTITY, DEFERRED_TOOLS, AGENTS, SKILLS, DATE)
_SYSTEM_REMINDERS = (GIT_STATUS, ATTRIBUTION)
# The listing as the fifth reminder of the user's message; the Claude 3 models get no
# deferred tools, and the oldest no token budget either.
_REMINDERS = (
    ENVIRONMENT,
    IDENTITY,
    DEFERRED_TOOLS,
    AGENTS,
    SKILLS,
    BUDGET,
    GIT_STATUS,
    DATE,
    ATTRIBUTION,
)
_REMINDERS_NO_DEFERRED = tuple(s for s in _REMINDERS if s != DEFERRED_TOOLS)
_REMINDERS_OLDEST = tuple(s for s in _REMINDERS_NO_DEFERRED if s != BUDGET)


def _system(max_tokens: int, effort: str) -> RequestLayout:
    return RequestLayout(_SYSTEM_REMINDERS, _SYSTEM_SECTIONS, max_tokens, "adaptive", 0, effort)


def _reminders(max_tokens: int, thinking: str | None, effort: str | None = None) -> RequestLayout:
    budget = max_tokens - 1 if thinking == "enabled" else 0
    return RequestLayout(_REMINDERS, (), max_tokens, thinking, budget, effort)


#: The layouts observed with the pinned CLI, by model-name prefix (the longest prefix that
#: matches wins, so dated names and ``[1m]`` follow their model).
LAYOUTS: dict[str, RequestLayout] = {
    "claude-opus-5-5": _system(128_000, "medium"),
    "claude-sonnet-5-5": _system(128_000, "medium"),
    "claude-haiku-5-5": _system(128_000, "medium"),
    "claude-opus-5": _system(64_000, "high"),
    "claude-sonnet-5": _system(64_000, "high"),
    "claude-fable-5": _system(64_000, "high"),
    "claude-opus-4-8": _system(64_000, "high"),
    "claude-opus-4-7": _reminders(64_000, "adaptive", "xhigh"),
    "claude-opus-4-6": _reminders(64_000, "adaptive", "high"),
    "claude-opus-4-5": _reminders(32_000, "enabled", "high"),
    "claude-sonnet-4-6": _reminders(32_000, "adaptive", "high"),
    "claude-sonnet-4-5": _reminders(32_000, "enabled"),
    "claude-sonnet-4": _reminders(32_000, "enabled"),
    "claude-haiku-4-5": _reminders(32_000, "enabled"),
    "claude-3-7-sonnet": RequestLayout(_REMINDERS_NO_DEFERRED, (), 32_000),
    "claude-3-5-haiku": RequestLayout(_REMINDERS_NO_DEFERRED, (), 8_192),
    "claude-3-haiku": RequestLayout(_REMINDERS_OLDEST, (), 4_096),
}

#: A name the CLI does not know gets the default model's placement, with these settings.
UNKNOWN_MODEL_LAYOUT = _system(32_000, "high")


def layout_for(model: str | None) -> RequestLayout:
    """The layout the pinned CLI gives ``model`` (None: its default model's)."""
    name = (model or "claude-opus-5-5").lower()
    matches = [prefix for prefix in LAYOUTS if name.startswith(prefix)]
    return LAYOUTS[max(matches, key=len)] if matches else UNKNOWN_MODEL_LAYOUT


def listing_shared(model: str | None) -> bool:
    """Whether the runs of one context can read the listing from the prompt cache on
    ``model``: only where it sits before the query (in the system message after it, every
    run sends it anew)."""
    return not layout_for(model).system_sections


# The model aliases the pinned CLI takes (``--model haiku``, a set's ``model: haiku``), and the
# model each names in the request it sends (observed with Claude Code 2.1.328).
MODEL_ALIASES = {
    "haiku": "claude-haiku-5-5",
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-5-5",
}


def resolve_model_alias(name: str) -> str:
    """A model's full name, as the pinned CLI reads an alias (a full name as it is)."""
    return MODEL_ALIASES.get(name.strip().lower(), name.strip())
