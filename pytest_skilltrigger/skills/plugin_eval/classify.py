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
    """A case that is a trigger check: its prompt, the skill its graders name, and whether
    that skill should be called. ``folder`` is the case folder relative to the plugin root,
    in ``/`` form as the runner reports it; ``runs`` and ``model`` are None when the case
    leaves them to the runner's defaults."""

    name: str
    folder: str
    prompt: str
    skill: str
    should_trigger: bool
    runs: int | None = None
    model: str | None = None
    history: str | None = None  # the conversation it resumes (``context.history_file``)


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
    verdict = _graders_verdict(case["graders"], names)
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
    )


def _graders_verdict(graders: list[dict[str, Any]], names: Names) -> tuple[str, bool] | str:
    """``(skill, should trigger)`` when every grader is the same trigger check, else why not:
    the runner passes a case only when all its graders pass, and a trigger item has one check."""
    found: list[tuple[str, bool]] = []
    for grader in graders:
        got = _grader_verdict(grader, names)
        if isinstance(got, str):
            return got
        found.append(got)
    skills = sorted({skill for skill, _ in found})
    if len(skills) > 1:
        return f"its graders name different skills ({', '.join(skills)})"
    if len({expected for _, expected in found}) > 1:
        return "its graders disagree: one expects a call of the skill, another none"
    return found[0]


def _grader_verdict(grader: dict[str, Any], names: Names) -> tuple[str, bool] | str:
    label = f'grader "{grader["name"]}"'
    if grader["type"] != "tool_used":
        kind = grader["type"]
        return f"{label} is a {kind} grader; only tool_used graders on Skill are trigger checks"
    if grader["tool"] != SKILL_TOOL:
        return f"{label} checks tool {grader['tool']}, not Skill"
    expected = _expectation(grader.get("min"), grader.get("max"))
    if isinstance(expected, str):
        return f"{label} {expected}"
    pattern = grader.get("input_match")
    if pattern is None:
        return f"{label} has no input_match: it counts calls of any skill"
    skill = skill_of(pattern, names)
    if skill is None:
        return f"{label}: input_match {json.dumps(pattern)} does not name one skill"
    return skill, expected


def _expectation(low: int | None, high: int | None) -> bool | str:
    """True for "should trigger" (min 1), False for "should not" (min 0, max 0), else why
    the counts are not a trigger check."""
    low = 1 if low is None else low
    if low == 1 and (high is None or high >= 1):
        return True
    if low == 0 and high == 0:
        return False
    if low == 0:
        return "(min 0 without max 0) passes whether or not the skill is called"
    if high is not None and high < low:
        return f"(min {low}, max {high}) can never pass"
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
