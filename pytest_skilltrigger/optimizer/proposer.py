"""Asking a model for a better description.

The prompt carries what the reference tool gives the model (skill name and SKILL.md, the
current description, the train failures of both kinds with "triggered k/n times", earlier
attempts with their train scores and results, the writing rules), in our own words, plus what
the model chose instead for each failure, which is the most useful hint for fixing it. Test
queries and test scores never appear in it: the test set must stay unseen to measure anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_skilltrigger.model.context import LISTED_LIMIT
from pytest_skilltrigger.model.formatting import describe_chosen
from pytest_skilltrigger.model.outcome import QueryResult, Usage, format_score
from pytest_skilltrigger.skills.skill import description_problems
from pytest_skilltrigger.support.errors import AskError

TAG = re.compile(r"<new_description>(.*?)</new_description>", re.DOTALL)


@dataclass(frozen=True)
class Attempt:
    """An earlier description and how it did on the train set."""

    description: str
    train_results: tuple[QueryResult, ...]

    @property
    def train_score(self) -> str:
        return format_score(self.train_results)


@dataclass
class Proposal:
    """One round's exchange with the improve model, kept for the results folder."""

    prompt: str
    response: str
    description: str | None
    problems: list[str] = field(default_factory=list)
    repair_prompt: str | None = None
    repair_response: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


def _result_line(result: QueryResult) -> str:
    status = "PASS" if result.passed else "FAIL"
    expected = "should trigger" if result.should_trigger else "should not trigger"
    return (
        f"[{status}] {expected}, triggered {result.triggers}/{result.runs} times: {result.query!r}"
    )


def build_prompt(
    skill_name: str,
    skill_md: str,
    current: str,
    train_results: Sequence[QueryResult],
    attempts: Sequence[Attempt],
    when_to_use: str | None = None,
    folder_lines: Sequence[str] = (),
) -> str:
    """The proposer prompt. Only train data goes in; see the module docstring."""
    missed = [r for r in train_results if r.should_trigger and r.passed is False]
    false_hits = [r for r in train_results if not r.should_trigger and r.passed is False]
    parts = [
        f"You are improving the description of an Agent Skill called {skill_name!r}.",
        "An assistant sees only each skill's name and description when it decides whether to "
        "load the skill for a user's request, so the description alone decides when the "
        "skill is used.",
        f"The full SKILL.md of the skill:\n<skill_md>\n{skill_md}\n</skill_md>",
        f"<current_description>\n{current}\n</current_description>",
    ]
    own = f"skill:{skill_name}"
    if missed:
        lines = [
            f"- {r.query!r}: triggered {r.triggers}/{r.runs} times; the assistant used "
            f"{describe_chosen(r.chosen, exclude=own)} instead"
            for r in missed
        ]
        parts.append("Requests that SHOULD have used the skill but did not:\n" + "\n".join(lines))
    if false_hits:
        lines = [f"- {r.query!r}: triggered {r.triggers}/{r.runs} times" for r in false_hits]
        parts.append("Requests that should NOT have used the skill but did:\n" + "\n".join(lines))
    if folder_lines:
        parts.append(
            "The assistant chooses among all the skills of this skill's folder. Requests of "
            "the other skills there that the current description gets wrong (taking a "
            "sibling's request is as bad as missing one of its own):\n"
            + "\n".join(f"- {line}" for line in folder_lines)
        )
    if attempts:
        blocks = []
        for n, attempt in enumerate(attempts, 1):
            results = "\n".join(_result_line(r) for r in attempt.train_results)
            blocks.append(
                f"Attempt {n} (train score {attempt.train_score}):\n"
                f"<description>\n{attempt.description}\n</description>\n{results}"
            )
        parts.append("Earlier attempts and how they did:\n\n" + "\n\n".join(blocks))
    parts.append(
        "Write a better description. Rules:\n"
        "- Generalise from the failures to the kinds of user intent the skill serves and "
        "the near-misses it must not claim; do not list the example requests.\n"
        '- Write in the imperative, addressed to the assistant ("Use this skill when ...").\n'
        "- Aim for about 100-200 words; the hard limit is 1024 characters.\n"
        "- Do not use the characters < or >.\n"
        + _listing_rules(when_to_use)
        + "Answer with the new description inside <new_description></new_description> tags."
    )
    return "\n\n".join(parts)


def parse_proposal(text: str) -> str | None:
    """The description inside the last pair of tags, stripped; None when there is none."""
    found = TAG.findall(text)
    if not found:
        return None
    value = found[-1].strip()
    return value or None


def repair_prompt(previous: str, problems: Sequence[str]) -> str:
    return (
        "This skill description cannot be used: " + "; ".join(problems) + ".\n\n"
        f"<description>\n{previous}\n</description>\n\n"
        "Rewrite it so that it keeps its meaning, stays under 1024 characters and contains "
        "neither < nor >. Answer inside <new_description></new_description> tags."
    )


Ask = Callable[[str], tuple[str, Usage]]


class DescriptionProposer:
    """One proposal per round, with one repair request when it breaks the rules.

    ``ask`` sends a prompt to the improve model and returns its text and usage (the session's
    ``ask``: the Messages API or, for users with only a Claude Code login, the CLI).
    """

    def __init__(self, ask: Ask) -> None:
        self.ask = ask

    def propose(self, prompt: str) -> Proposal:
        try:
            response, usage = self.ask(prompt)
        except AskError as exc:
            return Proposal(prompt, "", None, error=str(exc))
        proposal = Proposal(prompt, response, parse_proposal(response), usage=usage)
        problems = self._problems(proposal.description)
        if not problems:
            return proposal
        proposal.repair_prompt = repair_prompt(proposal.description or response, problems)
        try:
            proposal.repair_response, more = self.ask(proposal.repair_prompt)
        except AskError as exc:
            proposal.problems = problems
            proposal.error = str(exc)
            proposal.description = None
            return proposal
        proposal.usage = proposal.usage + more
        proposal.description = parse_proposal(proposal.repair_response)
        proposal.problems = self._problems(proposal.description)
        if proposal.problems:
            proposal.description = None
        return proposal

    @staticmethod
    def _problems(description: str | None) -> list[str]:
        if description is None:
            return ["no <new_description> tags in the answer"]
        return description_problems(description)


def _listing_rules(when_to_use: str | None) -> str:
    """What Claude Code's listing does to the text, so the proposal is written for the line
    the assistant really reads."""
    suffix = (
        f" followed by ' - ' and the skill's when_to_use text, which stays as it is: "
        f"{when_to_use!r}"
        if when_to_use
        else ""
    )
    return (
        f"- The assistant reads the skill as one line, '- name: ' and the description{suffix}. "
        "Newlines become spaces, and the line is cut after "
        f"{LISTED_LIMIT} characters, so put what decides use first.\n"
    )
