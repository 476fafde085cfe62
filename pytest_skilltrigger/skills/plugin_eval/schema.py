"""What the pinned official runner (``claude plugin eval``, Claude Code 2.1.328) accepts as a
case, in its words where it has them: the fields of ``case.yaml``, the keys of ``prompt.md``'s
frontmatter, the graders and their keys. A case it refuses is an
:class:`~pytest_skilltrigger.support.errors.InputError` here, one line naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pytest_skilltrigger.support.errors import InputError

CASE_FILE = "case.yaml"
PROMPT_FILE = "prompt.md"
GRADERS_DIR = "graders"
SKILL_TOOL = "Skill"
# the plugin an exported case carries in its folder to end its run at the skill's call (see
# :mod:`.write`); reading such a case, it is no other plugin
STOP_PLUGIN = "skilltrigger-stop"
SUPPORTED_MAJOR = 1
# The placeholders `claude plugin eval init` writes; the runner refuses a case still holding them.
_TODO_PROMPT = "TODO: describe what the agent should do"
_TODO_CRITERIA = "TODO: describe what a successful response looks like"

# prompt.md's frontmatter: keys of the case, and keys of its execution; any other is an error.
PROSE_TOP = (
    "schema_version",
    "name",
    "description",
    "tags",
    "plugins",
    "runs",
    "expected_outcome",
)
PROSE_EXECUTION = (
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
BODY_KEY = {"llm": "criteria", "baseline": "criteria", "regex": "pattern"}


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


def whole(low: int, high: int | None = None) -> _Check:
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
    if value in ("with-only", "both"):
        return None
    return f"Invalid enum value. Expected 'with-only' | 'both', received '{value}'"


# where a regex grader looks (``target``) and an llm grader reads (``focus``)
_SOURCES = ("last_message", "trace", "files", "mock_calls")


def _source(value: Any) -> str | None:
    """A ``target`` or ``focus``: one of the runner's sources, or a file of the run's."""
    if isinstance(value, str) and value in _SOURCES:
        return None
    if (
        isinstance(value, dict)
        and value.get("source") == "file"
        and set(value)
        == {
            "source",
            "path",
        }
    ):
        return None if isinstance(value["path"], str) else "Invalid input"
    return "Invalid input"


def _flags(value: Any) -> str | None:
    if isinstance(value, str) and re.fullmatch("[dgimsuvy]*", value):
        return None
    return "must be JS RegExp flags (d g i m s u v y)"


def _match(value: Any) -> str | None:
    if isinstance(value, str) and re.fullmatch(r"contains|not_contains|count:\d+", value):
        return None
    return "must be contains | not_contains | count:N"


def _tool_ref(value: Any) -> str | None:
    """A ``tool_order`` side: a tool's name, or ``{tool, input_match}``."""
    if isinstance(value, str):
        return None
    if isinstance(value, dict) and "tool" in value and set(value) <= {"tool", "input_match"}:
        return None
    return "Invalid input"


_TOP_FIELDS: dict[str, _Check] = {
    "name": _name,
    "description": _text,
    "tags": _texts,
    "plugins": _texts,
    "runs": whole(1, 50),
    "expected_outcome": _text,
}
_CONTEXT_FIELDS: dict[str, _Check] = {
    "scaffold_script": _text,
    "history_file": _text,
    "add_dirs": _texts,
}
_EXECUTION_FIELDS: dict[str, _Check] = {
    "prompt": _text,
    "max_turns": whole(1, 200),
    "timeout_seconds": whole(1, 3600),
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
        {"pattern": _text, "target": _source, "flags": _flags, "match": _match},
        frozenset({"pattern"}),
    ),
    "tool_order": ({"before": _tool_ref, "after": _tool_ref}, frozenset({"before", "after"})),
    "tool_used": (
        {"tool": _text, "input_match": _text, "min": whole(0), "max": whole(0)},
        frozenset({"tool"}),
    ),
    "file_exists": ({"path": _text, "exists": _flag}, frozenset({"path"})),
    "llm": ({"criteria": _text, "focus": _source}, frozenset({"criteria"})),
    "baseline": (
        {"baseline_file": _text, "criteria": _text},
        frozenset({"baseline_file", "criteria"}),
    ),
}

#: a schema issue: the field's path (``graders.2.focus``) and what is wrong with it
Issue = tuple[str, str]


def validate(case: dict[str, Any], where: str, grader_files: Sequence[str | None] = ()) -> None:
    """Refuse what the runner refuses, with its wording where it has one: every schema issue
    at once, as the runner lists them, each grader's named by its file where it has one
    (``grader_files``: the file of each grader, in order; None for one of case.yaml)."""
    _check_version(case.get("schema_version"), where)
    issues: list[Issue] = []
    if "name" not in case:
        issues.append(("name", "Required"))
    issues += _field_issues(case, _TOP_FIELDS, "")
    for section, fields in (("context", _CONTEXT_FIELDS), ("execution", _EXECUTION_FIELDS)):
        if section not in case:
            if section == "execution":
                issues.append((section, "Required"))
            continue
        if not isinstance(case[section], dict):
            issues.append((section, "Expected object"))
            continue
        issues += _field_issues(case[section], fields, f"{section}.")
    issues += _grader_issues(case.get("graders"))
    if issues:
        shown = "; ".join(_named(path, problem, grader_files) for path, problem in issues)
        raise InputError(where, f"invalid case.yaml: {shown}")
    _check_template(case["graders"], where)
    _check_prompt(case, where)


def _named(path: str, problem: str, grader_files: Sequence[str | None]) -> str:
    """An issue as the runner words it, with the grader file it is in (which the runner
    leaves to its index)."""
    match = re.match(r"graders\.(\d+)(?:\.|$)", path)
    index = int(match.group(1)) if match else -1
    file = grader_files[index] if 0 <= index < len(grader_files) else None
    return f"{path}: {problem}" + (f" (in {file})" if file else "")


def _check_version(version: Any, where: str) -> None:
    if not isinstance(version, str):
        raise InputError(where, 'missing required field schema_version (e.g. "1.0")')
    major = re.match(r"\s*[+-]?\d+", version.split(".")[0])
    if major is None:
        raise InputError(where, f'schema_version "{version}" is not a valid version string')
    if int(major.group()) > SUPPORTED_MAJOR:
        raise InputError(
            where,
            f'schema_version "{version}" requires a newer Claude Code '
            f"(the runner supports up to {SUPPORTED_MAJOR}.x)",
        )


def _field_issues(data: dict[str, Any], fields: dict[str, _Check], prefix: str) -> list[Issue]:
    found = []
    for key, check in fields.items():
        if key in data:
            problem = check(data[key])
            if problem:
                found.append((f"{prefix}{key}", problem))
    return found


def _grader_issues(graders: Any) -> list[Issue]:
    if graders is None:
        return [("graders", "Required")]
    if not isinstance(graders, list):
        return [("graders", "Expected array")]
    if not graders:
        return [("graders", "Array must contain at least 1 element(s)")]
    issues: list[Issue] = []
    seen: set[str] = set()
    for position, grader in enumerate(graders):
        issues += _one_grader_issues(grader, f"graders.{position}")
        name = grader.get("name") if isinstance(grader, dict) else None
        if isinstance(name, str) and name in seen:
            issues.append(("graders", f'duplicate grader name "{name}"'))
        if isinstance(name, str):
            seen.add(name)
    return issues


def _one_grader_issues(grader: Any, path: str) -> list[Issue]:
    if not isinstance(grader, dict):
        return [(path, "Expected object")]
    kind = grader.get("type")
    if not isinstance(kind, str) or kind not in _GRADER_FIELDS:
        kinds = " | ".join(f"'{k}'" for k in _GRADER_FIELDS)
        return [(f"{path}.type", f"Invalid discriminator value. Expected {kinds}")]
    own, required = _GRADER_FIELDS[kind]
    fields = {**_GRADER_COMMON, **own}
    issues = [
        (f"{path}.{key}", "Required") for key in sorted(required | {"name"}) if key not in grader
    ]
    issues += _field_issues(grader, fields, f"{path}.")
    unknown = [key for key in grader if key not in fields]
    if unknown:
        listed = ", ".join(f"'{key}'" for key in unknown)
        issues.append((path, f"Unrecognized key(s) in object: {listed}"))
    return issues


def _check_template(graders: list[dict[str, Any]], where: str) -> None:
    for grader in graders:
        if _TODO_CRITERIA in str(grader.get("criteria", grader.get("pattern", ""))):
            raise InputError(
                where,
                f'grader "{grader["name"]}" is still the blank `init` template: replace '
                f'the "{_TODO_CRITERIA}" line with concrete pass criteria',
            )


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
