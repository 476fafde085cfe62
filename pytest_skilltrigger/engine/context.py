"""What the model is shown when it decides whether to use a skill.

A :class:`TriggerContext` is the skill under test (with the description being tested) and the
skills it competes with. Claude Code never offers a skill alone: its built-in skills and the
project's other skills are listed next to it, so we do the same. Backends turn a context into
their own request; the store keys results by a hash of that request.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ListedSkill:
    """One line of the skill listing."""

    name: str
    description: str


# Generic skills of the kinds Claude Code lists as built-ins, written for this project. They make
# the skill under test compete the way it will in real use; the wording is ours.
DEFAULT_COMPETITORS: tuple[ListedSkill, ...] = (
    ListedSkill(
        "data-charts",
        "Turn tables or numbers into a chart image or an interactive plot. Use when the user "
        "asks for a graph, a visualisation or a dashboard of some data.",
    ),
    ListedSkill(
        "assistant-settings",
        "Change how this coding assistant behaves: permissions, hooks, environment variables, "
        "default model and the settings files. Use when the user wants to configure the tool.",
    ),
    ListedSkill(
        "code-review",
        "Review a diff, branch or pull request for bugs, security problems and style, and "
        "report findings with file and line. Use when the user asks for a review.",
    ),
    ListedSkill(
        "api-reference",
        "Answer questions about the Anthropic API and SDKs with exact parameter names and "
        "examples. Use when the user is writing code that calls the Claude API.",
    ),
    ListedSkill(
        "skill-authoring",
        "Create a new Agent Skill or improve an existing one: folder layout, SKILL.md "
        "frontmatter and instructions. Use when the user wants to build a skill.",
    ),
    ListedSkill(
        "document-drafting",
        "Draft and iteratively refine long prose documents such as proposals, specs and "
        "reports together with the user. Use for writing tasks longer than a page.",
    ),
    ListedSkill(
        "web-page-builder",
        "Build small self-contained web pages and front-end components with HTML, CSS and "
        "JavaScript. Use when the user wants a page, widget or UI prototype.",
    ),
    ListedSkill(
        "spreadsheet-files",
        "Create, read and edit spreadsheet files (.xlsx, .ods) with formulas and formatting. "
        "Use when the task is about a workbook rather than plain data.",
    ),
)


@dataclass(frozen=True)
class TriggerContext:
    """The skill under test, the description being tested, and what it competes with."""

    skill_name: str
    description: str
    siblings: tuple[ListedSkill, ...] = ()
    generic_competitors: tuple[ListedSkill, ...] = DEFAULT_COMPETITORS

    def with_description(self, description: str) -> TriggerContext:
        """The same context testing another description (used by the optimizer)."""
        return TriggerContext(self.skill_name, description, self.siblings, self.generic_competitors)

    def listing(self) -> list[ListedSkill]:
        """Every listed skill: generic ones first, then the project's skills by name.

        A generic skill that has the name of a project skill is dropped, as Claude Code lets
        a project skill shadow a built-in of the same name.
        """
        project = {s.name: s for s in self.siblings if s.name != self.skill_name}
        project[self.skill_name] = ListedSkill(self.skill_name, self.description)
        generic = [s for s in self.generic_competitors if s.name not in project]
        return generic + [project[name] for name in sorted(project)]

    def key(self, **extra: Any) -> str:
        """A stable hash of everything that shapes the request, plus backend specifics."""
        payload = {
            "skill": self.skill_name,
            "listing": [[s.name, s.description] for s in self.listing()],
            **extra,
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def one_line(text: str) -> str:
    """A description as one listing line: whitespace (including newlines) folded to spaces."""
    return " ".join(text.split())
