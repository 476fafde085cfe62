"""What counts as a trigger within a run (``--trigger-within``).

``first-call``, the reference scripts' rule: the model's first tool call decides; a ``Read``
first is the choice. ``turn``, what a user sees in a session and what ``claude plugin eval``'s
``tool_used`` grader reads: the run goes on through read-only looking around (reading a file,
listing or searching the project) and ends at the first call that is neither, which is the
choice; a ``Skill`` call naming the skill after three reads is a trigger. A run that is still
looking around after :attr:`TurnRule.bound` read-only calls ends as its own outcome,
:data:`LOOKING`, reported as such (never a silent miss).

Each step of the way is kept on the run's outcome, in words (``read README.md``), so that a
failing item shows the path: "read README.md, then chose tool Bash".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# the default bound is the option table's (imported with the plugin, which this module need
# not be)
from pytest_skilltrigger.model.options_sampling import DEFAULT_BOUND

#: the chosen key of a run still looking around at the bound
LOOKING = "looking"
#: the tools that only look: a run goes on past them in ``turn``
READ_ONLY_TOOLS = frozenset({"Read", "Glob", "Grep", "LS"})
# a skill's SKILL.md being read is the skill being used (the CLI reads it so by hand)
_SKILL_FILE = re.compile(r"(?:^|/)skills/[^/]+/SKILL\.md$")


@dataclass(frozen=True)
class TurnRule:
    """A run goes on through read-only calls (at most ``bound`` of them) and ends at the
    first other call. ``root`` is the folder the session stands in, whose files answer the
    looking around (not part of what the runs are stored under: a project read from another
    checkout asks the same)."""

    bound: int = DEFAULT_BOUND
    root: str = field(default="", compare=False)

    @property
    def most_requests(self) -> int:
        """The most requests one run sends: one for each round of looking around the bound
        allows, and one for the choice."""
        return self.bound + 1

    def looks(self, tool: str, tool_input: Mapping[str, Any] | None) -> bool:
        """Whether a call only looks around (and the run goes on past it): a read-only tool,
        but not the Read of a skill's SKILL.md, which is the skill being used."""
        if tool not in READ_ONLY_TOOLS:
            return False
        path = str((tool_input or {}).get("file_path") or "").replace("\\", "/")
        return not (tool == "Read" and _SKILL_FILE.search(path))


def step_text(tool: str, tool_input: Mapping[str, Any] | None, root: str = "") -> str:
    """One read-only call in words: ``read README.md``, ``listed files matching '*.py'``,
    ``searched for 'TODO'``; paths inside ``root`` shown relative to it."""
    given = dict(tool_input or {})
    if tool == "Read":
        return f"read {_shown(str(given.get('file_path') or '?'), root)}"
    if tool == "Glob":
        return f"listed files matching {str(given.get('pattern') or '')!r}"
    if tool == "Grep":
        return f"searched for {str(given.get('pattern') or '')!r}"
    if tool == "LS":
        return f"listed {_shown(str(given.get('path') or '.'), root)}"
    return f"called {tool}"


def _shown(path: str, root: str) -> str:
    if root and path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return path


def path_text(steps: Sequence[str], chosen_label: str) -> str:
    """The way a run went: ``read README.md, then chose tool Bash`` (the choice alone when
    it looked at nothing)."""
    if not steps:
        return f"chose {chosen_label}"
    return f"{', '.join(steps)}, then chose {chosen_label}"
