"""A lint of eval sets: what makes a set measure the wrong thing, found at collection with no
call (``--trigger-lint``).

Each rule is one a field report named: a query that names the skill leaks the answer; a query
twice (or nearly so), or on both sides, counts twice or contradicts itself; a slash command is
run by Claude Code without asking the model; a set with no positive or no negative entry
measures half of what it claims; an improvement-round split with a side lacking either cannot
show a gain. A finding names the file and the entry's line.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet

LONG_QUERY = 4000  # characters: past this a query is a pasted document, not a request
_SPACE = re.compile(r"\s+")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "“”‘’«»¿¡…")


@dataclass(frozen=True)
class LintFinding:
    """One problem of an eval set: the rule, the file, the entry's line (None: the set's)."""

    rule: str
    path: str
    line: int | None
    message: str

    def text(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message} [{self.rule}]"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class LintedSkill:
    """What the lint needs of a skill: its names as the model could read them and its set."""

    names: tuple[str, ...]  # its id, frontmatter name, listed name
    eval_set: EvalSet
    folder: str  # where its folder's routing is decided


def normalized(query: str) -> str:
    """A query for near-duplicate checks: case, whitespace and punctuation set aside."""
    return _SPACE.sub(" ", query.lower().translate(_PUNCTUATION)).strip()


def lint_sets(skills: Sequence[LintedSkill], split: Any = None) -> list[LintFinding]:
    """Every finding of every skill's set, then those across a folder's skills. ``split``
    (``problem(entries) -> str | None``) checks the improvement rounds' split when given."""
    findings: list[LintFinding] = []
    finders = {s.eval_set.path: _LineFinder(s.eval_set.path) for s in skills}  # read once
    for skill in skills:
        lines = finders[skill.eval_set.path]
        findings += _leaks(skill, lines)
        findings += _repeats(skill.eval_set, lines)
        findings += _shapes(skill.eval_set, lines)
        if split is not None:
            problem = split(skill.eval_set.entries)
            if problem:
                findings.append(LintFinding("split", skill.eval_set.path, None, problem))
    findings += _across_folder(skills, finders)
    return findings


def _leaks(skill: LintedSkill, lines: _LineFinder) -> list[LintFinding]:
    found = []
    for entry in skill.eval_set.entries:
        named = next((n for n in skill.names if _mentions(entry.query, n)), None)
        if named is not None:
            message = (
                f"entry [{entry.index:02d}] names the skill ({named!r}): the query gives the "
                "answer away; ask as a user who does not know the skill exists"
            )
            found.append(LintFinding("leak", skill.eval_set.path, lines.of(entry), message))
    return found


def _mentions(query: str, name: str) -> bool:
    """Whether ``query`` names the skill: as the listing does (``csv-cleaner``,
    ``acme:pdf``), or, whatever the name's shape, as a skill (``the pdf skill``, ``pdf
    skill``, ``skill called pdf``, ``/pdf``, ``$pdf``). A one-word name alone is an
    ordinary word, and a name's words spaced out are the domain's own phrase (``release
    notes``): neither gives the answer away."""
    text = query.lower()
    word = re.escape(name.lower())
    as_skill = (
        rf"(?<![\w-]){word}(?:'s)?\s+skill\b",
        rf"\bskill\s+(?:called|named)\s+[\"'`]?{word}(?![\w-])",
        rf"(?<![\w/$]){re.escape('/')}{word}(?![\w-])",
        rf"(?<![\w$])\${word}(?![\w-])",
    )
    if any(re.search(pattern, text) for pattern in as_skill):
        return True
    if not re.search(r"[-_:]", name):
        return False
    return re.search(r"(?<![\w-])" + word + r"(?![\w-])", text) is not None


def _repeats(evals: EvalSet, lines: _LineFinder) -> list[LintFinding]:
    """Near duplicates (the loader refuses exact ones) and a query on both sides."""
    found = []
    first: dict[tuple[str, str | None], EvalEntry] = {}
    for entry in evals.entries:
        key = (normalized(entry.query), entry.history)
        earlier = first.setdefault(key, entry)
        if earlier is entry:
            continue
        if earlier.should_trigger != entry.should_trigger:
            rule, what = "both-sides", "is on both sides: it should and should not trigger"
        else:
            rule, what = "near-duplicate", "repeats a query but for case, spaces or punctuation"
        message = f"entry [{entry.index:02d}] {what} (entry [{earlier.index:02d}])"
        found.append(LintFinding(rule, evals.path, lines.of(entry), message))
    return found


def _shapes(evals: EvalSet, lines: _LineFinder) -> list[LintFinding]:
    found = []
    for entry in evals.entries:
        query = entry.query.strip()
        if query.startswith("/"):
            message = (
                f"entry [{entry.index:02d}] is a slash command ({query.split()[0]}): Claude "
                "Code runs it without asking the model, so it measures nothing"
            )
            found.append(LintFinding("slash-command", evals.path, lines.of(entry), message))
        if len(query) > LONG_QUERY:
            message = f"entry [{entry.index:02d}] is {len(query):,} characters long"
            found.append(LintFinding("long-query", evals.path, lines.of(entry), message))
    sides = {entry.should_trigger for entry in evals.entries}
    for side, word in ((True, "should-trigger"), (False, "should-not-trigger")):
        if side not in sides:
            message = f"the set has no {word} entry: it measures only half of what it claims"
            found.append(LintFinding("one-sided", evals.path, None, message))
    return found


def _across_folder(
    skills: Sequence[LintedSkill], finders: dict[str, _LineFinder]
) -> list[LintFinding]:
    """A query two skills of one folder both expect: the model chooses one of them."""
    found = []
    wanted: dict[tuple[str, str], tuple[LintedSkill, EvalEntry]] = {}
    for skill in skills:
        for entry in skill.eval_set.entries:
            if not entry.should_trigger:
                continue
            key = (skill.folder, normalized(entry.query))
            other = wanted.setdefault(key, (skill, entry))
            if other[0] is not skill:
                message = (
                    f"entry [{entry.index:02d}] should trigger {skill.names[0]}, and "
                    f"{other[0].names[0]}'s set expects the same query: the model chooses one"
                )
                line = finders[skill.eval_set.path].of(entry)
                found.append(LintFinding("routing-clash", skill.eval_set.path, line, message))
    return found


class _LineFinder:
    """The line of an eval file an entry's query is on (None when it cannot be found)."""

    def __init__(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8-sig") as handle:
                self.lines = handle.read().split("\n")
        except OSError:
            self.lines = []

    def of(self, entry: EvalEntry) -> int | None:
        needle = json.dumps(entry.query, ensure_ascii=False)[1:-1]
        for number, line in enumerate(self.lines, 1):
            if needle in line or entry.query in line:
                return number
        return None
