"""Asking a model for better descriptions: several different ones a round, knowing the folder.

The prompt carries what the reference tool gives the model (skill name and SKILL.md, the
current description, the train failures of both kinds with "triggered k/n times", earlier
attempts with their train scores, the writing rules), in our own words, plus what the model
chose instead for each failure, which is the most useful hint for fixing it. It also shows
what the skill competes with: its siblings' listed descriptions, the names of the built-in
skills of the listing, and the siblings' should-trigger train requests as near-misses the
description must not claim. Test queries and test scores never appear in it: the held-out set
must stay unseen to measure anything.

One request asks for ``count`` different descriptions. An answer that breaks the rules
(too long, ``<`` or ``>``), or that repeats a description already tried, gets one follow-up
request for replacements; what is still unusable is dropped and said so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pytest_skilltrigger.model.context import LISTED_LIMIT, ListedSkill
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


@dataclass(frozen=True)
class Competition:
    """What a skill's description competes with in the listing, for the proposer."""

    siblings: tuple[ListedSkill, ...] = ()
    builtins: tuple[str, ...] = ()
    near_misses: tuple[tuple[str, str], ...] = ()  # (sibling, a train request of its own)


@dataclass
class Proposal:
    """One round's exchange with the improve model, kept for the results folder."""

    prompt: str
    response: str
    descriptions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    repair_prompt: str | None = None
    repair_response: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    # what the first answer did wrong when a repair was asked for (repeats named)
    repaired: list[str] = field(default_factory=list)

    @property
    def description(self) -> str | None:
        """The first usable description (the one a single proposal gives)."""
        return self.descriptions[0] if self.descriptions else None


def normalised(text: str) -> str:
    """A description as compared for repeats: case and spacing do not make it another."""
    return " ".join(text.lower().split())


def _result_line(result: QueryResult) -> str:
    status = "PASS" if result.passed else "FAIL"
    expected = "should trigger" if result.should_trigger else "should not trigger"
    triggered = f"triggered {result.triggers}/{result.runs_made} times"
    return f"[{status}] {expected}, {triggered}: {result.query!r}"


@dataclass(frozen=True)
class PromptInputs:
    """What the proposer is told: the skill, its current description, how it did on train
    (and in earlier attempts), the folder's requests it gets wrong, what it competes with,
    and how many descriptions to propose."""

    skill_name: str
    skill_md: str
    current: str
    train_results: Sequence[QueryResult]
    attempts: Sequence[Attempt] = ()
    when_to_use: str | None = None
    folder_lines: Sequence[str] = ()
    count: int = 1
    competition: Competition | None = None
    # queries no description so far got right (after two rounds): shown apart, not chased
    unreachable: Sequence[str] = ()


def build_prompt(inputs: PromptInputs) -> str:
    """The proposer prompt. Only train data goes in; see the module docstring."""
    skill_name, current = inputs.skill_name, inputs.current
    parts = [
        f"You are improving the description of an Agent Skill called {skill_name!r}.",
        "An assistant sees only each skill's name and description when it decides whether to "
        "load the skill for a user's request, so the description alone decides when the "
        "skill is used.",
        f"The full SKILL.md of the skill:\n<skill_md>\n{inputs.skill_md}\n</skill_md>",
        f"<current_description>\n{current}\n</current_description>",
        *_failure_parts(
            skill_name, [r for r in inputs.train_results if r.query not in inputs.unreachable]
        ),
    ]
    if inputs.unreachable:
        parts.append(
            "No description tried so far has made these requests come out right; the "
            "assistant answers them its own way. Do not chase them:\n"
            + "\n".join(f"- {q!r}" for q in inputs.unreachable)
        )
    if inputs.folder_lines:
        parts.append(
            "The assistant chooses among all the skills of this skill's folder. Requests of "
            "the other skills there that the current description gets wrong (taking a "
            "sibling's request is as bad as missing one of its own):\n"
            + "\n".join(f"- {line}" for line in inputs.folder_lines)
        )
    if inputs.competition is not None:
        parts += _competition_parts(inputs.competition)
    if inputs.attempts:
        blocks = []
        for n, attempt in enumerate(inputs.attempts, 1):
            results = "\n".join(_result_line(r) for r in attempt.train_results)
            blocks.append(
                f"Attempt {n} (train score {attempt.train_score}):\n"
                f"<description>\n{attempt.description}\n</description>\n{results}"
            )
        parts.append("Earlier attempts and how they did:\n\n" + "\n\n".join(blocks))
    parts.append(_rules(inputs.count, inputs.when_to_use))
    return "\n\n".join(parts)


def _failure_parts(skill_name: str, train_results: Sequence[QueryResult]) -> list[str]:
    missed = [r for r in train_results if r.should_trigger and r.passed is False]
    false_hits = [r for r in train_results if not r.should_trigger and r.passed is False]
    own = f"skill:{skill_name}"
    parts = []
    if missed:
        lines = [
            f"- {r.query!r}: triggered {r.triggers}/{r.runs_made} times; the assistant used "
            f"{describe_chosen(r.chosen, exclude=own)} instead"
            for r in missed
        ]
        parts.append("Requests that SHOULD have used the skill but did not:\n" + "\n".join(lines))
    if false_hits:
        lines = [f"- {r.query!r}: triggered {r.triggers}/{r.runs_made} times" for r in false_hits]
        parts.append("Requests that should NOT have used the skill but did:\n" + "\n".join(lines))
    return parts


def _competition_parts(competition: Competition) -> list[str]:
    parts = []
    if competition.siblings:
        lines = "\n".join(s.line for s in competition.siblings)
        parts.append(
            "The other skills of this folder, as the assistant sees them (their "
            f"requests are theirs, not this skill's):\n{lines}"
        )
    if competition.builtins:
        names = ", ".join(competition.builtins)
        parts.append(f"Built-in skills the assistant is also shown: {names}.")
    if competition.near_misses:
        lines = "\n".join(f"- {q!r} (belongs to {owner!r})" for owner, q in competition.near_misses)
        parts.append(
            f"Near-misses the description must not claim, requests of the other skills:\n{lines}"
        )
    return parts


def _rules(count: int, when_to_use: str | None) -> str:
    several = (
        f"Write {count} different descriptions: each takes its own approach (what it leads "
        "with, which kinds of request it names, how it rules out the near-misses), not small "
        "rewordings of one another.\n"
        if count > 1
        else "Write a better description.\n"
    )
    return (
        f"{several}Rules:\n"
        "- Generalise from the failures to the kinds of user intent the skill serves and "
        "the near-misses it must not claim; do not list the example requests.\n"
        '- Write in the imperative, addressed to the assistant ("Use this skill when ...").\n'
        "- Aim for about 100-200 words; the hard limit is 1024 characters.\n"
        "- Do not use the characters < or >.\n"
        + _listing_rules(when_to_use)
        + "Answer with each description inside its own <new_description></new_description> "
        "tags."
    )


def parse_proposals(text: str) -> list[str]:
    """Every description inside a pair of tags, stripped, in order (empty ones dropped)."""
    return [value.strip() for value in TAG.findall(text) if value.strip()]


def repair_prompt(problems: Sequence[str], count: int) -> str:
    reasons = "\n".join(f"- {p}" for p in problems)
    return (
        f"An earlier answer to this gave descriptions that cannot be used:\n{reasons}\n\n"
        f"Write {count} other "
        f"description{'s' if count > 1 else ''} that keep{'' if count > 1 else 's'} the "
        "meaning, stay under 1024 characters, contain neither < nor >, and differ from every "
        "earlier one. Answer with each inside its own <new_description></new_description> "
        "tags."
    )


Ask = Callable[[str], tuple[str, Usage]]


class DescriptionProposer:
    """A round's proposals, with one repair request for those that break the rules or
    repeat a description already tried.

    ``ask`` sends a prompt to the improve model and returns its text and usage (the session's
    ``ask``: the Messages API or, for users with only a Claude Code login, the CLI).
    """

    def __init__(self, ask: Ask) -> None:
        self.ask = ask

    def propose(self, prompt: str, count: int = 1, tried: Sequence[str] = ()) -> Proposal:
        """Up to ``count`` usable descriptions, none of them a repeat of ``tried``."""
        try:
            response, usage = self.ask(prompt)
        except AskError as exc:
            return Proposal(prompt, "", error=str(exc))
        proposal = Proposal(prompt, response, usage=usage)
        seen = {normalised(t) for t in tried}
        problems = self._take(proposal, parse_proposals(response), count, seen)
        if not problems or len(proposal.descriptions) >= count:
            return proposal
        proposal.repaired = problems
        proposal.repair_prompt = (
            prompt + "\n\n" + repair_prompt(problems, count - len(proposal.descriptions))
        )
        try:
            proposal.repair_response, more = self.ask(proposal.repair_prompt)
        except AskError as exc:
            proposal.problems = problems
            proposal.error = str(exc) if not proposal.descriptions else None
            return proposal
        proposal.usage = proposal.usage + more
        missing = count - len(proposal.descriptions)
        proposal.problems = self._take(
            proposal, parse_proposals(proposal.repair_response), missing, seen
        )
        return proposal

    @staticmethod
    def _take(proposal: Proposal, found: list[str], count: int, seen: set[str]) -> list[str]:
        """Keep up to ``count`` usable, new descriptions of ``found``; why the others were
        not kept."""
        if not found:
            return ["no <new_description> tags in the answer"]
        problems: list[str] = []
        kept = 0
        for text in found:
            broken = description_problems(text)
            if broken:
                problems += broken
            elif normalised(text) in seen:
                problems.append(f"repeats a description already tried: {text[:80]!r}")
            elif kept < count:
                proposal.descriptions.append(text)
                seen.add(normalised(text))
                kept += 1
        return problems


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
