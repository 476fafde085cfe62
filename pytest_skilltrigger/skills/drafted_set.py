"""A first trigger eval set for a skill that ships none: the request to the improve model, and
the checks its answer must pass. Text in, text out; asking is the engine's, writing the file
:mod:`.write_back`'s.

Why these checks: a drafted set is only worth running if it tests the description where it
can fail. The request follows the reference workflow's guidance for trigger eval queries
(realistic requests, should-trigger ones that never name the skill, near-misses that share its
words but need something else, nothing a keyword match settles); the checks refuse what would
make a set useless or misleading: too few or too many entries, one kind missing or swamping
the other, duplicates, and queries that quote the description (they would pass by echo).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.skills.history import read_entry_history, turns_of
from pytest_skilltrigger.skills.skill import Skill
from pytest_skilltrigger.support.errors import InputError

FEWEST, MOST = 16, 24  # entries a drafted set may have
MIN_SHARE = 1 / 3  # the least share of either kind
QUOTE_WORDS = 6  # this many consecutive words of the description in a query quote it
MAX_QUERY = 2000  # characters: a request, not a document
MIN_MID = 2  # the fewest entries asked mid-conversation (after a history)
DRAFTED_NAME = "trigger-eval.json"  # where a skill without an eval set gets its draft
EXTRA_NAME = "trigger-eval.drafted.json"  # where ``--trigger-draft=also`` drafts more
REVIEW = "drafted: review these queries before you trust them"
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_TAGS = re.compile(r"<(eval_set|queries|json)>\s*(.*?)\s*</\1>", re.S)


@dataclass(frozen=True)
class DraftedEntry:
    """One drafted query and whether the skill should take it."""

    query: str
    should_trigger: bool
    history: str | None = None  # the turns before it, canonical (None: it opens the session)

    def to_dict(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"query": self.query, "should_trigger": self.should_trigger}
        if self.history is not None:
            entry["history"] = turns_of(self.history)
        return {**entry, "drafted": True}


def draft_prompt(skill: Skill, context: TriggerContext, avoid: Sequence[str] = ()) -> str:
    """The request for a first eval set: the whole SKILL.md, what else is listed beside it
    (its sibling skills with their descriptions, the other skills only by name), and what a
    useful set holds. ``avoid`` are queries the skill's eval set has already (``also``)."""
    siblings = [s for s in context.siblings if s.name != skill.name]
    others = "\n".join(f"- {s.name}: {s.description}" for s in siblings) or "(none)"
    competitors = ", ".join(s.name for s in context.generic_competitors) or "(none)"
    if context.installed:  # --trigger-extra-skills: they compete in every listing
        competitors += "\nSkills the user has installed, listed beside it too:\n" + "\n".join(
            f"- {s.name}: {s.description}" for s in context.installed
        )
    known = ""
    if avoid:
        known = (
            "\nThe skill's eval set already has these; write different ones:\n"
            + "\n".join(f"- {q}" for q in avoid)
            + "\n"
        )
    return (
        f"Write a trigger eval set for the Agent Skill '{skill.name}'. An assistant sees only "
        "the skill's name and description among other skills and decides from a user's "
        "request whether to use it; the eval set checks that decision.\n\n"
        f"The skill's SKILL.md:\n<skill_md>\n{skill.text}\n</skill_md>\n\n"
        f"Skills of the same project, listed beside it:\n{others}\n\n"
        f"Other skills the assistant can choose instead: {competitors}\n{known}\n"
        "Write 20 requests a real user might type, as they would type them (some casual, "
        "some formal, with the details real requests carry: file names, numbers, context):\n"
        "- 10 that should use this skill: different phrasings of its uses, requests that "
        "never name the skill or its file type but clearly need it, less common uses, and "
        "requests where another listed skill competes and this one should win;\n"
        "- 10 that should not: near misses that share its words or topic but need something "
        "else (a neighbouring task, a sibling's or another skill's work, a question about the "
        "topic rather than the task); never requests that are plainly unrelated;\n"
        "- every request substantial enough that a skill could help: a one-step request "
        "(read a file, answer a fact) is answered directly whatever the description says;\n"
        "- no request quoting the description or naming the skill's own name;\n"
        "- about a quarter of them, of both kinds, asked mid-conversation: give those a "
        '"history" of the two to four turns before the request, as a list of '
        '{"role": "user" or "assistant", "content": text}, starting with the user and ending '
        "with the assistant's answer (a session where the skill was not needed yet, or where "
        "an earlier request went elsewhere).\n\n"
        'Answer with a JSON array of objects {"query": "...", "should_trigger": true or false, '
        'optionally "history": [...]} and nothing else.'
    )


def repair_prompt(prompt: str, problems: Sequence[str]) -> str:
    """The one follow-up a refused answer gets: the request again (each question stands
    alone), with what was wrong with the answer."""
    listed = "\n".join(f"- {p}" for p in problems)
    return (
        f"{prompt}\n\nAn earlier answer to this could not be used:\n{listed}\nWrite it again, "
        "fixing these: "
        f"{FEWEST} to {MOST} entries, both kinds about equally, at least {MIN_MID} with a "
        "history, no duplicates, none the eval set has already, no request quoting the "
        'description. Answer with only the JSON array of {"query", "should_trigger", '
        'optionally "history"} objects.'
    )


def parse_answer(text: str) -> Any:
    """The JSON the answer holds: bare, in a code fence, or inside tags (the last one found);
    None when there is none."""
    candidates = [m.group(2) for m in _TAGS.finditer(text)]
    candidates += [m.group(1) for m in _FENCE.finditer(text)]
    candidates.append(text)
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate.strip())
        except ValueError:
            continue
    return None


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _quotes(query: str, description: str) -> bool:
    """Whether ``query`` carries :data:`QUOTE_WORDS` consecutive words of ``description``."""
    words = re.findall(r"\w+", description.lower())
    asked = " " + " ".join(re.findall(r"\w+", query.lower())) + " "
    runs = {" ".join(words[i : i + QUOTE_WORDS]) for i in range(len(words) - QUOTE_WORDS + 1)}
    return any(f" {run} " in asked for run in runs)


def _checked_entry(n: int, item: Any, seen: set[str], description: str) -> DraftedEntry | str:
    """The ``n``-th entry of an answer, or what is wrong with it."""
    if not (
        isinstance(item, dict)
        and isinstance(item.get("query"), str)
        and isinstance(item.get("should_trigger"), bool)
    ):
        return f'entry {n} is not a {{"query": text, "should_trigger": true/false}}'
    query = item["query"].strip()
    if not query or len(query) > MAX_QUERY:
        return f"entry {n} has an empty query or one over {MAX_QUERY} characters"
    if _normalised(query) in seen:
        return f"entry {n} repeats an earlier query: {query[:60]!r}"
    if _quotes(query, description):
        return f"entry {n} quotes the description: {query[:60]!r}"
    history, problem = _history_of(n, item)
    return problem or DraftedEntry(query, item["should_trigger"], history)


def _history_of(n: int, item: dict[str, Any]) -> tuple[str | None, str | None]:
    """An entry's history (None: it has none) and what is wrong with it (None: nothing):
    turns that replay, ending with the assistant's answer before the request."""
    if "history_file" in item:
        return None, f"entry {n} names a history file; a drafted entry carries its turns"
    try:
        text = read_entry_history(item, "the draft", f"entry {n}")
    except InputError as exc:
        return None, exc.problem
    if text is not None and turns_of(text)[-1]["role"] != "assistant":
        return None, f"entry {n}: its history must end with the assistant's answer"
    return text, None


@dataclass(frozen=True)
class CheckedAnswer:
    """An answer, checked: its usable new entries, why it cannot be used (``problems``: the
    hard checks, enough entries of both kinds), what it lacks or left out (``lacks``: a set
    is kept with these, said as warnings), and the queries it repeats from the eval set the
    skill has already (``--trigger-draft=also``: left out)."""

    entries: list[DraftedEntry]
    problems: list[str]
    repeats: list[str]
    lacks: list[str] = field(default_factory=list)

    def refusals(self, repaired: bool) -> list[str]:
        """Why the answer cannot be used (none: usable). Repeats of the set ask for a repair;
        after it they are left out, when enough new entries remain."""
        if not self.repeats or (repaired and len(self.entries) >= FEWEST // 2):
            return self.problems
        shown = ", ".join(repr(q[:40]) for q in self.repeats[:3])
        repeat = f"{len(self.repeats)} entries repeat queries the eval set has already ({shown})"
        return [repeat, *self.problems]


def check_answer(data: Any, description: str, known: Sequence[str] = ()) -> CheckedAnswer:
    """The entries of an answer and what is wrong with it (nothing: usable). An entry that is
    malformed, repeats another or quotes the description is left out (said in ``lacks``);
    the set is refused only without enough entries of both kinds. Entries mid-conversation
    are welcome, not required: too few is said, not refused. ``known`` are the queries the
    skill's eval set has: a drafted query that repeats one is not new."""
    if not isinstance(data, list):
        return CheckedAnswer(
            [], ['the answer holds no JSON array of {"query", "should_trigger"} objects'], []
        )
    entries: list[DraftedEntry] = []
    lacks: list[str] = []
    repeats: list[str] = []
    have = {_normalised(q) for q in known}
    seen: set[str] = set()
    for n, item in enumerate(data, 1):
        checked = _checked_entry(n, item, seen, description)
        if isinstance(checked, str):
            lacks.append(f"{checked} (left out)")
        elif _normalised(checked.query) in have:
            repeats.append(checked.query)
        else:
            seen.add(_normalised(checked.query))
            entries.append(checked)
    problems = []
    if not FEWEST <= len(entries) <= MOST and (entries or not repeats):
        problems.append(f"{len(entries)} usable entries; {FEWEST} to {MOST} are wanted")
    positives = sum(e.should_trigger for e in entries)
    for kind, count in (("should-trigger", positives), ("should-not", len(entries) - positives)):
        if count < MIN_SHARE * max(len(entries), 1) and (entries or not repeats):
            problems.append(
                f"{count} {kind} entries of {len(entries)}: both kinds are wanted, about equally"
            )
    mid = sum(e.history is not None for e in entries)
    if entries and mid < MIN_MID:
        lacks.append(
            f"{mid} entries asked mid-conversation (at least {MIN_MID} with a history are "
            "welcome): add some by hand to test the skill mid-session"
        )
    return CheckedAnswer(entries, problems, repeats, lacks)


def drafted_json(entries: Sequence[DraftedEntry]) -> str:
    """The file's text: a plain list (the reference scripts read it too), each entry marked
    ``"drafted": true``, should-trigger ones first."""
    ordered = sorted(entries, key=lambda e: not e.should_trigger)
    return json.dumps([e.to_dict() for e in ordered], indent=2, ensure_ascii=False) + "\n"
