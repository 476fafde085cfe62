"""Which cases are trigger checks: a ``tool_used`` grader on the ``Skill`` tool whose
``input_match`` (a JavaScript regex tested against the call's compact JSON input) names one
skill, ``min`` 1 meaning "should trigger" and ``min: 0, max: 0`` "should not". Any other case
is not collected, with the reason, so nothing is measured differently from what its author
meant.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.skills.plugin_eval.schema import SKILL_TOOL

#: the names skills are called by: each with the id of the skill it loads, or ids alone
Names = Mapping[str, str] | Sequence[str]


@dataclass(frozen=True)
class TriggerCase:
    """A case that is a trigger check: its prompt, the skill its ``Skill`` grader names, and
    whether that skill should be called. ``folder`` is the case folder relative to the plugin
    root, in ``/`` form as the runner reports it; ``runs`` and ``model`` are None when the
    case leaves them to the runner's defaults. ``unmeasured`` are its other graders (on the
    answer, the trace, files: outside a trigger test), ``notes`` what was left out of it and
    why (a grader that can never pass, a tool named like a skill)."""

    name: str
    folder: str
    prompt: str
    skill: str
    should_trigger: bool
    runs: int | None = None
    model: str | None = None
    history: str | None = None  # the conversation it resumes (``context.history_file``)
    unmeasured: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotCollected:
    """A valid case that is not a trigger check (or repeats one), with the one-line reason."""

    folder: str
    reason: str


# Settings that change what the model sees beyond the prompt, which a trigger item does not
# reproduce: such a case measures something else.
_UNREPRODUCED = (
    ("execution", "append_system_prompt", "it adds to the system prompt (append_system_prompt)"),
)


def trigger_case(case: dict[str, Any], folder: str, names: Names) -> TriggerCase | NotCollected:
    for section, key, why in _UNREPRODUCED:
        holder = case.get(section, {}) if section else case
        if holder.get(key):
            return NotCollected(folder, f"{why}, which a trigger item does not reproduce")
    graders = _Graders.sort(case["graders"], names)
    verdict = graders.verdict()
    if isinstance(verdict, str):
        return NotCollected(folder, verdict)
    skill, should_trigger = verdict
    ids = names.values() if isinstance(names, Mapping) else names
    if ids and skill not in ids:
        listed = ", ".join(dict.fromkeys(ids))
        return NotCollected(folder, f'names skill "{skill}", which is not one found ({listed})')
    execution = case["execution"]
    return TriggerCase(
        name=case["name"],
        folder=folder,
        prompt=execution["prompt"],
        skill=skill,
        should_trigger=should_trigger,
        runs=int(case["runs"]) if "runs" in case else None,
        model=execution.get("model"),
        unmeasured=tuple(graders.unmeasured),
        notes=tuple(graders.notes),
    )


@dataclass
class _Graders:
    """A case's graders, sorted for a trigger test: the trigger checks (a ``tool_used`` on
    ``Skill`` naming one skill: its skill, whether it should be called), the graders a
    trigger test does not measure (described), what was left out with why (``notes``), and
    why each other ``Skill`` grader is not a trigger check (``reasons``)."""

    checks: list[tuple[str, bool]]
    unmeasured: list[str]
    notes: list[str]
    reasons: list[str]

    @classmethod
    def sort(cls, graders: list[dict[str, Any]], names: Names) -> _Graders:
        sorted_ = cls([], [], [], [])
        for grader in graders:
            sorted_.take(grader, names)
        return sorted_

    def take(self, grader: dict[str, Any], names: Names) -> None:
        label = f'grader "{grader["name"]}"'
        if grader["type"] != "tool_used":
            self.unmeasured.append(_described(grader))
            return
        if grader["tool"] != SKILL_TOOL:
            hint = _skill_named_tool(grader, names)
            self.notes += [hint] if hint else []
            self.unmeasured.append(_described(grader))
            return
        low, high = grader.get("min"), grader.get("max")
        expected = _expectation(low, high)
        if expected is None:
            self.notes.append(
                f"{label} (min {1 if low is None else low}, max {high}) can never pass: the "
                f'official runner scores it "expected {1 if low is None else low}..{high}"; '
                "left out here"
            )
            return
        found = _named_skill(grader, expected, names)
        if isinstance(found, str):
            self.reasons.append(f"{label} {found}")
            self.unmeasured.append(_described(grader))
            return
        if grader.get("input_match") is None:
            self.notes.append(
                f"{label} has no input_match: the official runner counts a call of any "
                f"skill; here a call of {found[0]}, the only skill the plugin lists (a call of "
                "a built-in skill passes there and not here)"
            )
        self.checks.append(found)

    def verdict(self) -> tuple[str, bool] | str:
        """``(skill, should trigger)`` of the trigger checks, else why there is none: the
        first ``Skill`` grader's reason, or what a ``tool:`` named like a skill means."""
        if not self.checks:
            if self.reasons:
                return self.reasons[0]
            if self.notes:
                return self.notes[0]
            return (
                "it has no tool_used grader on Skill, the one grader a trigger test measures "
                f"(its graders: {', '.join(self.unmeasured)})"
            )
        skills = sorted({skill for skill, _ in self.checks})
        if len(skills) > 1:
            return f"its Skill graders name different skills ({', '.join(skills)})"
        if len({expected for _, expected in self.checks}) > 1:
            return "its Skill graders disagree: one expects a call of the skill, another none"
        return self.checks[0]


def _described(grader: dict[str, Any]) -> str:
    """A grader a trigger test does not measure, as the header lists it: its name, type
    and what it reads (``says-done (regex on last_message)``)."""
    kind = grader["type"]
    looked = {"regex": "target", "llm": "focus"}.get(kind)
    if looked is not None:
        place = grader.get(looked, "last_message")
        shown = place if isinstance(place, str) else f"file {place.get('path')}"
        return f"{grader['name']} ({kind} on {shown})"
    if kind == "tool_used":
        return f"{grader['name']} (tool_used on {grader['tool']})"
    return f"{grader['name']} ({kind})"


def _skill_named_tool(grader: dict[str, Any], names: Names) -> str | None:
    """The hint for a ``tool_used`` whose ``tool`` is a skill's name: what the runner makes
    of it, and the ``Skill`` form that means what the author wanted."""
    tool = grader["tool"]
    ids = dict(names) if isinstance(names, Mapping) else {name: name for name in names}
    by_bare = {i.rpartition(":")[2]: i for i in ids.values()}
    skill = ids.get(tool) or by_bare.get(tool)
    if skill is None:
        return None
    low, high = grader.get("min"), grader.get("max")
    never = "always passes" if (low == 0 and high == 0) else "never passes"
    plugin, _, bare = skill.rpartition(":")
    spelled = f"(?:{plugin}:)?{bare}" if plugin else bare
    return (
        f'grader "{grader["name"]}" checks tool "{tool}", a skill\'s name: the official '
        "runner counts calls of a tool of that name, which Claude Code does not have, so it "
        f"{never}; to check the skill, write tool: Skill with input_match: "
        f'\'"skill":"{spelled}"\''
    )


def _named_skill(
    grader: dict[str, Any], expected: bool | str, names: Names
) -> tuple[str, bool] | str:
    """The skill a ``Skill`` grader checks and whether it should be called, else why it is
    not a trigger check."""
    if isinstance(expected, str):
        return expected
    pattern = grader.get("input_match")
    ids = set(names.values() if isinstance(names, Mapping) else names)
    if pattern is None and len(ids) == 1:
        return ids.pop(), expected  # the plugin's one skill (see the note)
    if pattern is None:
        return "has no input_match: it counts calls of any skill"
    skill = skill_of(pattern, names)
    if skill is None:
        return f"input_match {json.dumps(pattern)} does not name one skill"
    return skill, expected


def _expectation(low: int | None, high: int | None) -> bool | str | None:
    """True for "should trigger" (min 1), False for "should not" (min 0, max 0), None for
    counts no run can meet, else why the counts are not a trigger check."""
    low = 1 if low is None else low
    if high is not None and high < low:
        return None
    if low == 1:
        return True
    if low == 0 and high == 0:
        return False
    if low == 0:
        return "(min 0 without max 0) passes whether or not the skill is called"
    return f"expects at least {low} calls; a trigger check expects one (min 1) or none (max 0)"


# --- input_match ---------------------------------------------------------------------------

_NAME_PART = r"(?:[\w:-]|\\[.:_-])+"
_OPTIONAL_SPACE = r"(?:\\s[*?]| [*?])?"
_LITERAL_RE = re.compile(
    r'"skill"'
    + _OPTIONAL_SPACE
    + ":"
    + _OPTIONAL_SPACE
    + '"'
    + r"(?:\((?:\?:)?(?P<prefix>"
    + _NAME_PART
    + r"):\)\?)?"
    + r"(?P<name>"
    + _NAME_PART
    + ')"'
)


def skill_of(input_match: str, names: Names = ()) -> str | None:
    """The one skill an ``input_match`` pattern names, or None.

    ``names`` are the names the CLI loads skills by, each with the id of the skill it loads
    (a mapping), or ids alone. The common literal forms are read directly:
    ``"skill":"NAME"`` (with ``\\"`` for the quotes, ``\\s*`` around the colon) and
    ``"skill":"(plugin:)?NAME"``: the skill of the spelling found in ``names``, the
    qualified one first. Any other pattern is tested, with Python's ``re``, against the call
    input ``{"skill":"<name>"}`` of each name: the result is the skill every matching name
    loads (``"(?:[\\w-]+:)?pdf"`` matches ``acme:pdf`` and ``pdf``, one skill), None when no
    name matches or the names load several.
    """
    ids = names if isinstance(names, Mapping) else {name: name for name in names}
    spellings = _literal_spellings(input_match)
    if spellings:
        found = next((s for s in spellings if s in ids), spellings[0])
        return ids.get(found, found)
    matched = {ids[name] for name in ids if _matches(input_match, name)}
    return matched.pop() if len(matched) == 1 else None


def _literal_spellings(pattern: str) -> list[str]:
    """The names a literal pattern accepts, most qualified first; [] when it is not one (or
    when it does not in fact match its own name: then it is left to the names)."""
    match = _LITERAL_RE.fullmatch(pattern.replace('\\"', '"'))
    if match is None:
        return []
    name = _unescape(match.group("name"))
    prefix = match.group("prefix")
    spellings = [f"{_unescape(prefix)}:{name}", name] if prefix else [name]
    return spellings if all(_matches(pattern, s) for s in spellings) else []


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def _matches(pattern: str, name: str) -> bool:
    """Whether ``pattern`` finds a match in the compact JSON input of a call of ``name``."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False
    return compiled.search(_call_input(name)) is not None


def _call_input(name: str) -> str:
    return json.dumps({"skill": name}, separators=(",", ":"), ensure_ascii=False)
