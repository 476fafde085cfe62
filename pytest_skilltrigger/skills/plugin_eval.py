"""The official runner's cases (``claude plugin eval``), read as trigger items and written back.

Teams that already keep ``claude plugin eval`` cases should not have to rewrite them as eval
sets, and teams with eval sets should be able to hand them to the official runner. A case is
a folder under the eval dir holding ``case.yaml``, or ``prompt.md`` with ``graders/*.md``.
Its trigger check is a ``tool_used`` grader on the ``Skill`` tool whose ``input_match`` (a
JavaScript regex tested against the call's compact JSON input) names one skill: ``min`` 1
means "should trigger", ``min: 0, max: 0`` "should not". Any other case is listed as not
collected, with the reason, so nothing is measured differently from what its author meant.

Files are validated as the pinned runner validates them (a case it refuses is an
:class:`~pytest_skilltrigger.support.errors.InputError` here, one line naming the file), and
reading never writes. Writing checks every target before the first file is written, replaces
only cases an earlier export wrote (they carry a marker comment on their first line) and
writes each file atomically.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet, check_query, read_text
from pytest_skilltrigger.skills.frontmatter import locate_frontmatter, yaml_problem
from pytest_skilltrigger.support.atomic import atomic_write_text, write_problem
from pytest_skilltrigger.support.errors import InputError

CASE_FILE = "case.yaml"
PROMPT_FILE = "prompt.md"
GRADERS_DIR = "graders"
SKILL_TOOL = "Skill"
MARKER = "# Written by pytest-skilltrigger --export-plugin-eval"
"""How the first line of an exported ``case.yaml`` starts: an export replaces only these."""

# Folders the runner never reads as cases (its results, mock responders, tooling).
_SKIPPED = frozenset({"node_modules", ".claude", "results", "mocks", ".git"})
_MAX_DEPTH = 16  # the runner's own limit on nesting below the eval dir
_SUPPORTED_MAJOR = 1
_WRITTEN_VERSION = "1.0"
# The placeholders `claude plugin eval init` writes; the runner refuses a case still holding them.
_TODO_PROMPT = "TODO: describe what the agent should do"
_TODO_CRITERIA = "TODO: describe what a successful response looks like"
_MARKER_RE = re.compile(re.escape(MARKER) + r" for skill (?P<skill>\S+),")


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


@dataclass(frozen=True)
class NotCollected:
    """A valid case that is not a trigger check (or repeats one), with the one-line reason."""

    folder: str
    reason: str


@dataclass(frozen=True)
class PluginEvalCases:
    """What :func:`read_plugin_eval` found under ``<root>/<eval_dir>``, in folder order."""

    root: str
    eval_dir: str
    cases: tuple[TriggerCase, ...]
    not_collected: tuple[NotCollected, ...]


# --- reading ---------------------------------------------------------------------------------


def read_plugin_eval(
    root: str, eval_dir: str = "evals", names: Sequence[str] = ()
) -> PluginEvalCases:
    """Read every case under ``<root>/<eval_dir>`` and sort them into trigger cases and the rest.

    ``names`` are the skill ids the caller knows, as listed (``acme:alpha`` for a plugin's
    skill, the folder name for a project's): an ``input_match`` that is not a plain literal is
    tested against them (:func:`skill_of`), and when given, a case naming another skill is
    not collected. A missing eval dir has no cases; a file the runner would refuse raises.
    """
    base = _eval_base(root, eval_dir)
    cases: list[TriggerCase] = []
    skipped: list[NotCollected] = []
    first: dict[tuple[str, str], TriggerCase] = {}
    for folder in _case_folders(base):
        case = _load_case(folder)
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        got = _trigger_case(case, relative, names)
        if isinstance(got, NotCollected):
            skipped.append(got)
            continue
        key = (got.skill, got.prompt.strip())
        if key in first:
            earlier = first[key]
            reason = f'same prompt as case "{earlier.name}" ({earlier.folder}); kept that one'
            skipped.append(NotCollected(relative, reason))
            continue
        first[key] = got
        cases.append(got)
    return PluginEvalCases(
        os.path.abspath(root), eval_dir.replace(os.sep, "/"), tuple(cases), tuple(skipped)
    )


def _eval_base(root: str, eval_dir: str) -> str:
    """The eval dir's path; like the runner, only a relative folder inside the plugin."""
    if os.path.isabs(eval_dir) or ".." in re.split(r"[\\/]", eval_dir):
        raise InputError(eval_dir, "the eval dir must be a relative path inside the plugin")
    base = os.path.join(root, eval_dir)
    if os.path.exists(base) and not os.path.isdir(base):
        raise InputError(base, "is a file, not a folder of claude plugin eval cases")
    return base


def _case_folders(base: str) -> list[str]:
    """The case folders under ``base``, sorted as the runner sorts them.

    A folder holding a ``case.yaml`` or ``prompt.md`` file is a case and is not searched
    further; other folders are searched, skipping the runner's reserved names.
    """
    found: list[str] = []
    seen: set[str] = set()

    def walk(folder: str, depth: int) -> None:
        real = os.path.realpath(folder)
        if depth > _MAX_DEPTH or real in seen:
            return
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        if any(e.name in (CASE_FILE, PROMPT_FILE) and not e.is_dir() for e in entries):
            found.append(folder)
            return
        for entry in entries:
            if entry.is_dir() and entry.name.lower() not in _SKIPPED:
                walk(entry.path, depth + 1)

    if os.path.isdir(base):
        walk(base, 0)
    return sorted(found)


def _load_case(folder: str) -> dict[str, Any]:
    """One case as the runner builds it: ``case.yaml``, with ``prompt.md`` and the grader
    files laid over it, validated."""
    yaml_path = os.path.join(folder, CASE_FILE)
    data = _read_case_yaml(yaml_path) if os.path.isfile(yaml_path) else None
    prose = _read_prose(folder)
    case = _merge(data, prose, folder) if prose is not None else data
    if case is None:
        raise InputError(
            folder,
            "no case definition: case.yaml and prompt.md are empty or missing "
            "(write the prompt to test in prompt.md, or define the case in case.yaml)",
        )
    _validate(case, yaml_path if data is not None else os.path.join(folder, PROMPT_FILE))
    return case


def _load_yaml(text: str, where: str, line_offset: int = 0) -> Any:
    """YAML from ``text``, which starts ``line_offset`` lines into the file ``where``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(where, f"not valid YAML: {yaml_problem(exc, line_offset)}") from None
    except (ValueError, RecursionError) as exc:  # a bad date, deep nesting
        raise InputError(where, f"not usable YAML: {exc}") from None


def _read_case_yaml(path: str) -> dict[str, Any] | None:
    data = _load_yaml(read_text(path), path)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InputError(path, "case.yaml must be a YAML object")
    return data


# prompt.md's frontmatter: keys of the case, and keys of its execution; any other is an error.
_PROSE_TOP = (
    "schema_version",
    "name",
    "description",
    "tags",
    "plugins",
    "runs",
    "expected_outcome",
)
_PROSE_EXECUTION = (
    "model",
    "max_turns",
    "timeout_seconds",
    "allowed_tools",
    "disallowed_tools",
    "artifact_publish",
    "growthbook_overrides",
    "append_system_prompt",
    "env",
)
# A grader file's body fills this key when its frontmatter leaves it out.
_BODY_KEY = {"llm": "criteria", "baseline": "criteria", "regex": "pattern"}


@dataclass(frozen=True)
class _Prose:
    """What ``prompt.md`` and ``graders/*.md`` add to a case."""

    top: dict[str, Any]
    execution: dict[str, Any]
    prompt: str | None
    graders: list[dict[str, Any]]


def _split_markdown(path: str) -> tuple[dict[str, Any], str, bool]:
    """A Markdown file's (frontmatter, body, had frontmatter), as the runner reads it."""
    text = read_text(path)
    if not re.match(r"---[ \t\r]*\n", text):
        return {}, text, False
    span = locate_frontmatter(text, path)
    data = _load_yaml(text[span.start : span.end], path, line_offset=1)  # after its "---"
    if data is None:
        return {}, text[span.body_start :], True
    if not isinstance(data, dict):
        raise InputError(path, "frontmatter must be a YAML object")
    return data, text[span.body_start :], True


def _read_prose(folder: str) -> _Prose | None:
    prompt_path = os.path.join(folder, PROMPT_FILE)
    top: dict[str, Any] = {}
    execution: dict[str, Any] = {}
    prompt = None
    if os.path.isfile(prompt_path):
        front, body, _ = _split_markdown(prompt_path)
        prompt = body.strip() or None
        for key, value in front.items():
            if key in _PROSE_TOP:
                top[key] = value
            elif key in _PROSE_EXECUTION:
                execution[key] = value
            else:
                allowed = ", ".join(_PROSE_TOP + _PROSE_EXECUTION)
                raise InputError(
                    prompt_path, f'unknown frontmatter key "{key}" (expected one of: {allowed})'
                )
    graders = list(_read_grader_files(os.path.join(folder, GRADERS_DIR)))
    if prompt is None and not (top or execution or graders):
        return None
    return _Prose(top, execution, prompt, graders)


def _read_grader_files(folder: str) -> Iterator[dict[str, Any]]:
    """Each ``graders/*.md`` with frontmatter, named by its file (files without any are
    skipped, as the runner skips them)."""
    if not os.path.isdir(folder):
        return
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if not name.endswith(".md") or os.path.isdir(path):
            continue
        front, body, had = _split_markdown(path)
        if not had:
            continue
        kind = front.get("type")
        if not isinstance(kind, str):
            raise InputError(
                path,
                'frontmatter must include "type:" '
                "(regex | tool_order | tool_used | file_exists | llm | baseline)",
            )
        grader = {"name": name[: -len(".md")], **front}
        key = _BODY_KEY.get(kind)
        if key and key not in grader and body.strip():
            grader[key] = body.strip()
        yield grader


def _merge(data: dict[str, Any] | None, prose: _Prose, folder: str) -> dict[str, Any]:
    """Lay ``prompt.md`` and the grader files over ``case.yaml`` (or over the defaults a
    prose-only case gets: the folder's name, the current schema version)."""
    base = data if data is not None else {"schema_version": "1.1", "name": _basename(folder)}
    case = {**base, **prose.top}
    earlier = base.get("execution")
    execution = dict(earlier) if isinstance(earlier, dict) else {}
    before = execution.get("disallowed_tools")
    execution.update(prose.execution)
    after = prose.execution.get("disallowed_tools")
    if isinstance(before, list) and isinstance(after, list):  # the runner joins the two
        execution["disallowed_tools"] = [*before, *after]
    if prose.prompt is not None:
        execution["prompt"] = prose.prompt
    case["execution"] = execution
    if prose.graders:
        graders = base.get("graders")
        case["graders"] = [*(graders if isinstance(graders, list) else []), *prose.graders]
    return case


def _basename(folder: str) -> str:
    return os.path.basename(os.path.normpath(folder))


# --- validation (the runner's schema) --------------------------------------------------------

_Check = Callable[[Any], "str | None"]


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "Expected string"


def _name(value: Any) -> str | None:
    if not isinstance(value, str):
        return "Expected string"
    return None if value else "String must contain at least 1 character(s)"


def _texts(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return "Expected a list of strings"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "Expected boolean"


def _table(value: Any) -> str | None:
    return None if isinstance(value, dict) else "Expected object"


def _text_table(value: Any) -> str | None:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return None
    return "Expected an object of strings"


def _anything(value: Any) -> str | None:
    return None


def _whole(low: int, high: int | None = None) -> _Check:
    """A check for a whole number in ``low..high``: ``2.0`` is one to the runner, a YAML
    boolean is not a number."""

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "Expected number"
        if isinstance(value, float) and not value.is_integer():
            return "Expected integer, received float"
        if value < low or (high is not None and value > high):
            upper = f" and at most {high}" if high is not None else ""
            return f"Number must be at least {low}{upper}"
        return None

    return check


def _positive(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "Expected number"
    return None if value > 0 else "Number must be greater than 0"


def _arm(value: Any) -> str | None:
    return None if value in ("with-only", "both") else "Expected 'with-only' | 'both'"


_TOP_FIELDS: dict[str, _Check] = {
    "name": _name,
    "description": _text,
    "tags": _texts,
    "plugins": _texts,
    "runs": _whole(1, 50),
    "expected_outcome": _text,
}
_CONTEXT_FIELDS: dict[str, _Check] = {
    "scaffold_script": _text,
    "history_file": _text,
    "add_dirs": _texts,
}
_EXECUTION_FIELDS: dict[str, _Check] = {
    "prompt": _text,
    "max_turns": _whole(1, 200),
    "timeout_seconds": _whole(1, 3600),
    "model": _text,
    "allowed_tools": _texts,
    "disallowed_tools": _texts,
    "artifact_publish": _flag,
    "growthbook_overrides": _table,
    "append_system_prompt": _text,
    "env": _text_table,
}
_GRADER_COMMON: dict[str, _Check] = {
    "name": _text,
    "type": _text,
    "weight": _positive,
    "arm": _arm,
}
# Per grader type: its own keys (checked) and which of them are required.
_GRADER_FIELDS: dict[str, tuple[dict[str, _Check], frozenset[str]]] = {
    "regex": (
        {"pattern": _text, "target": _anything, "flags": _text, "match": _text},
        frozenset({"pattern"}),
    ),
    "tool_order": ({"before": _anything, "after": _anything}, frozenset({"before", "after"})),
    "tool_used": (
        {"tool": _text, "input_match": _text, "min": _whole(0), "max": _whole(0)},
        frozenset({"tool"}),
    ),
    "file_exists": ({"path": _text, "exists": _flag}, frozenset({"path"})),
    "llm": ({"criteria": _text, "focus": _anything}, frozenset({"criteria"})),
    "baseline": (
        {"baseline_file": _text, "criteria": _text},
        frozenset({"baseline_file", "criteria"}),
    ),
}


def _invalid(where: str, path: str, problem: str) -> InputError:
    return InputError(where, f"invalid case.yaml: {path}: {problem}")


def _validate(case: dict[str, Any], where: str) -> None:
    """Refuse what the runner refuses, with its wording where it has one."""
    _check_version(case.get("schema_version"), where)
    if "name" not in case:
        raise _invalid(where, "name", "Required")
    _check_fields(case, _TOP_FIELDS, "", where)
    for section, fields in (("context", _CONTEXT_FIELDS), ("execution", _EXECUTION_FIELDS)):
        if section not in case:
            if section == "execution":
                raise _invalid(where, section, "Required")
            continue
        if not isinstance(case[section], dict):
            raise _invalid(where, section, "Expected object")
        _check_fields(case[section], fields, f"{section}.", where)
    _check_graders(case.get("graders"), where)
    _check_prompt(case, where)


def _check_version(version: Any, where: str) -> None:
    if not isinstance(version, str):
        raise InputError(where, 'missing required field schema_version (e.g. "1.0")')
    major = re.match(r"\s*[+-]?\d+", version.split(".")[0])
    if major is None:
        raise InputError(where, f'schema_version "{version}" is not a valid version string')
    if int(major.group()) > _SUPPORTED_MAJOR:
        raise InputError(
            where,
            f'schema_version "{version}" requires a newer Claude Code '
            f"(the runner supports up to {_SUPPORTED_MAJOR}.x)",
        )


def _check_fields(data: dict[str, Any], fields: dict[str, _Check], prefix: str, where: str) -> None:
    for key, check in fields.items():
        if key in data:
            problem = check(data[key])
            if problem:
                raise _invalid(where, f"{prefix}{key}", problem)


def _check_graders(graders: Any, where: str) -> None:
    if graders is None:
        raise _invalid(where, "graders", "Required")
    if not isinstance(graders, list):
        raise _invalid(where, "graders", "Expected array")
    if not graders:
        raise _invalid(where, "graders", "Array must contain at least 1 element(s)")
    seen: set[str] = set()
    for position, grader in enumerate(graders):
        _check_grader(grader, f"graders.{position}", where)
        if grader["name"] in seen:
            raise _invalid(where, "graders", f'duplicate grader name "{grader["name"]}"')
        seen.add(grader["name"])
        if _TODO_CRITERIA in str(grader.get("criteria", grader.get("pattern", ""))):
            raise InputError(
                where,
                f'grader "{grader["name"]}" is still the blank `init` template: replace '
                f'the "{_TODO_CRITERIA}" line with concrete pass criteria',
            )


def _check_grader(grader: Any, path: str, where: str) -> None:
    if not isinstance(grader, dict):
        raise _invalid(where, path, "Expected object")
    kind = grader.get("type")
    if not isinstance(kind, str) or kind not in _GRADER_FIELDS:
        kinds = " | ".join(f"'{k}'" for k in _GRADER_FIELDS)
        raise _invalid(where, f"{path}.type", f"Invalid discriminator value. Expected {kinds}")
    own, required = _GRADER_FIELDS[kind]
    fields = {**_GRADER_COMMON, **own}
    unknown = [key for key in grader if key not in fields]
    if unknown:
        listed = ", ".join(f"'{key}'" for key in unknown)
        raise _invalid(where, path, f"Unrecognized key(s) in object: {listed}")
    for key in sorted(required | {"name"}):
        if key not in grader:
            raise _invalid(where, f"{path}.{key}", "Required")
    _check_fields(grader, fields, f"{path}.", where)


def _check_prompt(case: dict[str, Any], where: str) -> None:
    prompt = case["execution"].get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        if case.get("context", {}).get("history_file"):
            problem = "context.history_file requires execution.prompt (the next turn)"
        else:
            problem = (
                "execution.prompt is required (a prompt.md body, or execution.prompt in case.yaml)"
            )
        raise InputError(where, problem)
    if _TODO_PROMPT in prompt:
        raise InputError(
            where,
            f'the prompt is still the blank `init` template: replace the "{_TODO_PROMPT}" '
            "line with the user prompt to test",
        )


# --- which cases are trigger checks -----------------------------------------------------------

# Settings that change what the model sees beyond the prompt, which a trigger item does not
# reproduce: such a case measures something else.
_UNREPRODUCED = (
    ("context", "history_file", "it resumes a conversation (context.history_file)"),
    ("execution", "append_system_prompt", "it adds to the system prompt (append_system_prompt)"),
    ("", "plugins", "it loads other plugins (plugins)"),
)


def _trigger_case(
    case: dict[str, Any], folder: str, names: Sequence[str]
) -> TriggerCase | NotCollected:
    for section, key, why in _UNREPRODUCED:
        holder = case.get(section, {}) if section else case
        if holder.get(key):
            return NotCollected(folder, f"{why}, which a trigger item does not reproduce")
    verdict = _graders_verdict(case["graders"], names)
    if isinstance(verdict, str):
        return NotCollected(folder, verdict)
    skill, should_trigger = verdict
    if names and skill not in names:
        listed = ", ".join(names)
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


def _graders_verdict(graders: list[dict[str, Any]], names: Sequence[str]) -> tuple[str, bool] | str:
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


def _grader_verdict(grader: dict[str, Any], names: Sequence[str]) -> tuple[str, bool] | str:
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


def skill_of(input_match: str, names: Sequence[str] = ()) -> str | None:
    """The one skill an ``input_match`` pattern names, or None.

    The common literal forms are read directly: ``"skill":"NAME"`` (with ``\\"`` for the
    quotes, ``\\s*`` around the colon) and ``"skill":"(plugin:)?NAME"``, whose result is the
    spelling found in ``names``, the qualified one first. Any other pattern is tested, with
    Python's ``re``, against the call input ``{"skill":"<id>"}`` of each of ``names``: the
    result is the one that matches, None when none or several do.
    """
    spellings = _literal_spellings(input_match)
    if spellings:
        return next((s for s in spellings if s in names), spellings[0])
    matched = [name for name in dict.fromkeys(names) if _matches(input_match, name)]
    return matched[0] if len(matched) == 1 else None


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


# --- as an eval set -----------------------------------------------------------------------------


def eval_set_of(cases: Sequence[TriggerCase], path: str) -> EvalSet:
    """One skill's trigger cases as an eval set, one entry per case in folder order.

    ``path`` names the set in reports (usually the eval dir). Each entry's ``extra`` says
    which case it came from. The cases must name one skill and differ in prompt (as
    :func:`read_plugin_eval` returns them): anything else raises an InputError.
    """
    ordered = sorted(cases, key=lambda case: case.folder)
    if not ordered:
        raise InputError(path, "no trigger cases to make an eval set of")
    skills = sorted({case.skill for case in ordered})
    if len(skills) > 1:
        raise InputError(path, f"the cases name several skills ({', '.join(skills)})")
    seen: dict[str, TriggerCase] = {}
    entries: list[EvalEntry] = []
    for case in ordered:
        check_query(case.prompt, True, case.folder, "prompt")  # as an eval file's query is
        earlier = seen.setdefault(case.prompt.strip(), case)
        if earlier is not case:
            raise InputError(path, f"{case.folder} repeats the prompt of {earlier.folder}")
        extra = {"case": case.name, "case_dir": case.folder}
        entries.append(EvalEntry(len(entries), case.prompt, case.should_trigger, extra))
    meta = {"skill_name": skills[0], "format": "claude plugin eval cases"}
    return EvalSet(path=os.path.abspath(path), entries=tuple(entries), meta=meta)


def pinned_models(cases: Sequence[TriggerCase]) -> list[str]:
    """A warning for each case that pins ``execution.model``: its trigger item runs on the
    session's model(s), as every item does, so what it measures may not be what the runner
    measures."""
    return [
        f"case {case.folder} pins execution.model {case.model}; its trigger item runs on the "
        "session's model (--trigger-model, --trigger-models)"
        for case in cases
        if case.model
    ]


# --- writing ----------------------------------------------------------------------------------


class _Text(str):
    """A string value written quoted, so that YAML 1.1 and 1.2 readers agree it is text."""


class _Flow(list[Any]):
    """A short list written on one line."""


class _Dumper(yaml.SafeDumper):
    """Quotes every string value (single quotes on one line, double quotes when it holds a
    line break or a character single quotes cannot hold), never folds a line."""


def _represent_text(dumper: yaml.SafeDumper, text: _Text) -> yaml.Node:
    breaks = any(ch in text for ch in "\n\r\x85\u2028\u2029")
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style='"' if breaks else "'")


def _represent_flow(dumper: yaml.SafeDumper, items: _Flow) -> yaml.Node:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", list(items), flow_style=True)


_Dumper.add_representer(_Text, _represent_text)
_Dumper.add_representer(_Flow, _represent_flow)


@dataclass(frozen=True)
class _Export:
    """What one export writes: the eval set of the skill listed as ``listed_name``."""

    out_dir: str
    listed_name: str
    eval_set: EvalSet
    runs: int | None


@dataclass(frozen=True)
class _CaseFile:
    """One case to write: its ``case.yaml`` path and text, and whether it replaces ours."""

    path: str
    text: str
    replaces: bool


def write_plugin_eval(
    out_dir: str, listed_name: str, eval_set: EvalSet, runs: int | None = None
) -> list[str]:
    """Write ``eval_set`` as ``claude plugin eval`` cases for the skill listed as
    ``listed_name``, one ``<out_dir>/<case>/case.yaml`` per query; return their paths.

    Every target is checked before the first file is written: a case folder that is not one
    of our exports (for this skill) is never touched. Cases an earlier export of this skill
    wrote and this one does not are removed, so the folder holds exactly this eval set.
    ``runs`` sets each case's runs (the runner's default when None).
    """
    files = _planned_cases(_Export(out_dir, listed_name, eval_set, runs))
    stale = _stale_cases(out_dir, listed_name, {os.path.dirname(f.path) for f in files})
    for case_file in files:
        _write(case_file)
    for path in stale:
        os.remove(path)
        if not os.listdir(os.path.dirname(path)):
            os.rmdir(os.path.dirname(path))
    return [case_file.path for case_file in files]


def check_plugin_eval(out_dir: str, exports: Sequence[tuple[str, EvalSet]]) -> None:
    """Raise what :func:`write_plugin_eval` would raise for each ``(listed name, eval set)``
    in turn, writing nothing, or that two skills' cases would share a folder (``acme:alpha``
    and ``acme-alpha`` both export as ``acme-alpha-01-…``): a session that exports several
    skills checks every one before it writes the first."""
    owners: dict[str, str] = {}
    for listed_name, eval_set in exports:
        for case_file in _planned_cases(_Export(out_dir, listed_name, eval_set, None)):
            folder = os.path.dirname(case_file.path)
            owner = owners.setdefault(folder, listed_name)
            if owner != listed_name:
                raise InputError(
                    folder, f"the cases of {owner} and {listed_name} would share this folder"
                )


def _planned_cases(export: _Export) -> list[_CaseFile]:
    """The case files of an export, every target checked."""
    _check_export(export)
    entries = export.eval_set.entries
    return [_case_file(export, position, entry) for position, entry in enumerate(entries)]


def _check_export(export: _Export) -> None:
    where = export.eval_set.path
    if not export.listed_name or re.search(r"\s", export.listed_name):
        raise InputError(where, f"not a skill name to export for: {export.listed_name!r}")
    if not export.eval_set.entries:
        raise InputError(where, "the eval set has no entries to export")
    if export.runs is not None and _whole(1, 50)(export.runs):
        raise InputError(where, f"runs must be a whole number from 1 to 50, not {export.runs}")
    for entry in export.eval_set.entries:
        if not entry.query.strip():
            raise InputError(where, f"entry {entry.index + 1}: the query is empty")
    problem = write_problem(export.out_dir, folder=True)
    if problem:
        raise InputError(export.out_dir, problem)


def _case_name(export: _Export, position: int, entry: EvalEntry) -> str:
    """The exported case's name and folder: ``acme-alpha-03-trigger``,
    ``acme-alpha-12-no-trigger`` (the skill's id, the entry's place in the set, the
    expectation): the runner sorts cases by folder, so they keep the eval set's order, and
    two plugins' ``alpha`` skills export into one folder side by side."""
    base = re.sub(r"[^\w.-]+", "-", export.listed_name).strip("-.") or "skill"
    kind = "trigger" if entry.should_trigger else "no-trigger"
    width = max(2, len(str(len(export.eval_set.entries))))
    return f"{base}-{position + 1:0{width}d}-{kind}"


def input_match_for(listed_name: str) -> str:
    """A JavaScript regex that matches a ``Skill`` call of exactly ``listed_name``: the
    name as JSON writes it, regex characters escaped, closed by its quote."""
    quoted = json.dumps(listed_name, ensure_ascii=False)[1:-1]
    escaped = re.sub(r"([\\^$.|?*+()\[\]{}/])", r"\\\1", quoted)
    return f'"skill":"{escaped}"'


def _case_file(export: _Export, position: int, entry: EvalEntry) -> _CaseFile:
    name = _case_name(export, position, entry)
    folder = os.path.join(export.out_dir, name)
    replaces = _check_target(folder, export.listed_name)
    marker = _marker(export, folder, entry.index + 1)
    text = marker + _case_yaml(export, name, entry)
    return _CaseFile(os.path.join(folder, CASE_FILE), text, replaces)


def _case_yaml(export: _Export, name: str, entry: EvalEntry) -> str:
    """The case: the query as the prompt, one turn, the Skill tool alone, one grader."""
    grader: dict[str, Any] = {
        "name": _Text("triggers" if entry.should_trigger else "does-not-trigger"),
        "type": _Text("tool_used"),
        "tool": _Text(SKILL_TOOL),
        "input_match": _Text(input_match_for(export.listed_name)),
    }
    if entry.should_trigger:
        grader["min"] = 1
    else:  # scored in the runner's without-plugin arm too: no call there either
        grader.update({"min": 0, "max": 0, "arm": _Text("both")})
    case: dict[str, Any] = {"schema_version": _Text(_WRITTEN_VERSION), "name": _Text(name)}
    if export.runs is not None:
        case["runs"] = export.runs
    case["execution"] = {
        "prompt": _Text(entry.query),
        "max_turns": 1,
        "allowed_tools": _Flow([_Text(SKILL_TOOL)]),
    }
    case["graders"] = [grader]
    return yaml.dump(case, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=sys.maxsize)


def _marker(export: _Export, folder: str, number: int) -> str:
    """The first line of an exported case: ours, for which skill, from which eval set entry
    (the set's path relative to the case, so that the line reads the same on every machine)."""
    try:
        source = os.path.relpath(export.eval_set.path, os.path.abspath(folder))
    except ValueError:  # another drive (Windows)
        source = export.eval_set.path
    source = " ".join(source.replace(os.sep, "/").split())
    return (
        f"{MARKER} for skill {export.listed_name}, from {source} (entry {number}); "
        "a new export replaces this file.\n"
    )


def _exported_for(path: str) -> str | None:
    """The skill an exported ``case.yaml`` was written for, or None when it is not ours."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline().decode("utf-8", "replace")
    except OSError:
        return None
    match = _MARKER_RE.match(first)
    return match.group("skill") if match else None


def _check_target(folder: str, listed_name: str) -> bool:
    """Whether writing the case into ``folder`` replaces an earlier export (True) or makes a
    new one (False); refuse anything else."""
    path = os.path.join(folder, CASE_FILE)
    if not os.path.lexists(folder):
        problem = write_problem(path)
        if problem:
            raise InputError(path, problem)
        return False
    if not os.path.isdir(folder):
        raise InputError(folder, "exists and is not a case folder; not replaced")
    entries = set(os.listdir(folder))
    if not entries:
        return False
    owner = _exported_for(path) if CASE_FILE in entries else None
    if owner is None or entries & {PROMPT_FILE, GRADERS_DIR}:
        raise InputError(
            folder, "holds files not written by pytest-skilltrigger's export; not replaced"
        )
    if owner != listed_name:
        raise InputError(folder, f"holds the export of skill {owner}; export into another folder")
    problem = write_problem(path)
    if problem:
        raise InputError(path, problem)
    return True


def _stale_cases(out_dir: str, listed_name: str, kept: set[str]) -> list[str]:
    """The ``case.yaml`` files an earlier export of this skill wrote that this one does not."""
    if not os.path.isdir(out_dir):
        return []
    stale = []
    for entry in sorted(os.scandir(out_dir), key=lambda e: e.name):
        path = os.path.join(entry.path, CASE_FILE)
        if entry.is_dir() and entry.path not in kept and _exported_for(path) == listed_name:
            stale.append(path)
    return stale


def _write(case_file: _CaseFile) -> None:
    try:
        atomic_write_text(case_file.path, case_file.text, overwrite=case_file.replaces)
    except FileExistsError:
        raise InputError(
            case_file.path, "appeared while the export was written; not replaced"
        ) from None
    except OSError as exc:
        raise InputError(case_file.path, f"cannot be written: {exc.strerror or exc}") from None
