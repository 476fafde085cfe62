"""What the pinned official runner (``claude plugin eval``, Claude Code 2.1.328) accepts as a
case, in its words where it has them: the fields of ``case.yaml``, the keys of ``prompt.md``'s
frontmatter, the graders and their keys. A case it refuses is an
:class:`~pytest_skilltrigger.support.errors.InputError` here, one line naming the file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pytest_skilltrigger.support.errors import InputError

CASE_FILE = "case.yaml"
PROMPT_FILE = "prompt.md"
GRADERS_DIR = "graders"
SKILL_TOOL = "Skill"
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


def _anything(value: Any) -> str | None:
    return None


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
    return None if value in ("with-only", "both") else "Expected 'with-only' | 'both'"


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
        {"pattern": _text, "target": _anything, "flags": _text, "match": _text},
        frozenset({"pattern"}),
    ),
    "tool_order": ({"before": _anything, "after": _anything}, frozenset({"before", "after"})),
    "tool_used": (
        {"tool": _text, "input_match": _text, "min": whole(0), "max": whole(0)},
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


def validate(case: dict[str, Any], where: str) -> None:
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
    if int(major.group()) > SUPPORTED_MAJOR:
        raise InputError(
            where,
            f'schema_version "{version}" requires a newer Claude Code '
            f"(the runner supports up to {SUPPORTED_MAJOR}.x)",
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
