"""Reading the official runner's cases: the case folders under a plugin's eval dir, each
built as the runner builds it (``case.yaml``, with ``prompt.md`` and the grader files laid
over it), validated by :mod:`.schema`, sorted into trigger cases and the rest by
:mod:`.classify`, and one skill's trigger cases as an eval set. Reading never writes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml

from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet, check_query
from pytest_skilltrigger.skills.frontmatter import locate_frontmatter, yaml_problem
from pytest_skilltrigger.skills.history import history_text, read_session_file
from pytest_skilltrigger.skills.plugin_eval.classify import (
    Names,
    NotCollected,
    TriggerCase,
    trigger_case,
)
from pytest_skilltrigger.skills.plugin_eval.schema import (
    BODY_KEY,
    CASE_FILE,
    GRADERS_DIR,
    PROMPT_FILE,
    PROSE_EXECUTION,
    PROSE_TOP,
    STOP_PLUGIN,
    validate,
)
from pytest_skilltrigger.skills.set_formats import read_text
from pytest_skilltrigger.support.errors import InputError

__all__ = [
    "NotCollected",
    "PluginEvalCases",
    "TriggerCase",
    "eval_set_of",
    "pinned_models",
    "read_plugin_eval",
]

# Folders the runner never reads as cases (its results, mock responders, tooling).
_SKIPPED = frozenset({"node_modules", ".claude", "results", "mocks", ".git"})
_MAX_DEPTH = 16  # the runner's own limit on nesting below the eval dir


@dataclass(frozen=True)
class PluginEvalCases:
    """What :func:`read_plugin_eval` found under ``<root>/<eval_dir>``, in folder order."""

    root: str
    eval_dir: str
    cases: tuple[TriggerCase, ...]
    not_collected: tuple[NotCollected, ...]


def read_plugin_eval(root: str, eval_dir: str = "evals", names: Names = ()) -> PluginEvalCases:
    """Read every case under ``<root>/<eval_dir>`` and sort them into trigger cases and the rest.

    ``names`` are the names the caller knows skills by, with the id each loads (or ids
    alone, as listed: ``acme:alpha`` for a plugin's skill, the folder name for a project's):
    an ``input_match`` that is not a plain literal is tested against them (:func:`skill_of`),
    and when given, a case naming another skill is not collected. A missing eval dir has no
    cases; a case the runner would refuse is not collected, with the runner's reason, and the
    others are read.
    """
    base = _eval_base(root, eval_dir)
    cases: list[TriggerCase] = []
    skipped: list[NotCollected] = []
    first: dict[tuple[str, str, str | None], TriggerCase] = {}
    for folder in _case_folders(base):
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        try:
            case = _load_case(folder)
            why = _plugins_problem(case.get("plugins"), folder, root)
        except InputError as exc:  # the runner skips such a case, and runs the others
            skipped.append(NotCollected(relative, _refused(exc, folder)))
            continue
        if why:
            skipped.append(NotCollected(relative, why))
            continue
        got = trigger_case(case, relative, names)
        if isinstance(got, NotCollected):
            skipped.append(got)
            continue
        history = (case.get("context") or {}).get("history_file")
        if history:
            try:
                got = replace(got, history=_history_of(folder, str(history)))
            except InputError as exc:  # the runner loads it, and every run fails
                skipped.append(NotCollected(relative, f"its history_file: {exc}"))
                continue
        key = (got.skill, got.prompt.strip(), got.history)
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


def _history_of(folder: str, given: str) -> str:
    """A case's ``context.history_file``, read as the runner resumes it: a session file
    inside the case folder."""
    path = os.path.realpath(os.path.join(folder, given))
    if os.path.commonpath([path, os.path.realpath(folder)]) != os.path.realpath(folder):
        raise InputError(given, "escapes the case directory")
    return history_text(read_session_file(path))


def _refused(exc: InputError, folder: str) -> str:
    """Why the runner refuses a case, naming the file of the case it is about."""
    where = exc.where or folder
    file = os.path.relpath(where, folder)
    named = f"{file}: " if file != "." else ""
    return f"the official runner refuses it: {named}{exc.problem}"


def _plugins_problem(plugins: Any, folder: str, root: str) -> str | None:
    """Why a case's ``plugins`` keep it from being a trigger item, or None when it loads the
    plugin under test alone (``["../.."]``, its absolute path, or no entry at all), as the
    runner reads the list: an entry is a path from the case folder; one outside the plugin or
    one that does not exist is refused at load."""
    if not plugins:
        return None
    own = os.path.realpath(root)
    others = []
    stop = os.path.realpath(os.path.join(folder, STOP_PLUGIN))
    for entry in plugins:
        path = os.path.realpath(os.path.join(folder, str(entry)))
        if path == stop:
            continue  # the plugin an export adds to end the run at the skill
        if not os.path.exists(path):
            return f'the official runner refuses it: plugins entry "{entry}" does not exist'
        if os.path.commonpath([path, own]) != own:
            return (
                f'the official runner refuses it: plugins entry "{entry}" resolves to {path}, '
                f"outside the plugin ({own})"
            )
        if path != own:
            others.append(str(entry))
    if others:
        loads = ", ".join(others)
        return f"it loads other plugins ({loads}), which a trigger item does not reproduce"
    return None


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
    files: list[str | None] = []
    if prose is not None:
        earlier = (data or {}).get("graders")
        files = [None] * (len(earlier) if isinstance(earlier, list) else 0)
        files += [f"{GRADERS_DIR}/{name}" for name in prose.grader_files]
    validate(case, yaml_path if data is not None else os.path.join(folder, PROMPT_FILE), files)
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


@dataclass(frozen=True)
class _Prose:
    """What ``prompt.md`` and ``graders/*.md`` add to a case."""

    top: dict[str, Any]
    execution: dict[str, Any]
    prompt: str | None
    graders: list[dict[str, Any]]
    grader_files: list[str]  # the file each of ``graders`` came from


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
            if key in PROSE_TOP:
                top[key] = value
            elif key in PROSE_EXECUTION:
                execution[key] = value
            else:
                allowed = ", ".join(PROSE_TOP + PROSE_EXECUTION)
                raise InputError(
                    prompt_path, f'unknown frontmatter key "{key}" (expected one of: {allowed})'
                )
    found = list(_read_grader_files(os.path.join(folder, GRADERS_DIR)))
    graders = [grader for grader, _ in found]
    if prompt is None and not (top or execution or graders):
        return None
    return _Prose(top, execution, prompt, graders, [file for _, file in found])


def _read_grader_files(folder: str) -> Iterator[tuple[dict[str, Any], str]]:
    """Each ``graders/*.md`` with frontmatter, named by its file, with that file's name
    (files without any are skipped, as the runner skips them)."""
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
        key = BODY_KEY.get(kind)
        if key and key not in grader and body.strip():
            grader[key] = body.strip()
        yield grader, name


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


# --- as an eval set ---------------------------------------------------------------------------


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
    seen: dict[tuple[str, str | None], TriggerCase] = {}
    entries: list[EvalEntry] = []
    for case in ordered:
        check_query(case.prompt, True, case.folder, "prompt")  # as an eval file's query is
        earlier = seen.setdefault((case.prompt.strip(), case.history), case)
        if earlier is not case:
            raise InputError(path, f"{case.folder} repeats the prompt of {earlier.folder}")
        extra: dict[str, object] = {"case": case.name, "case_dir": case.folder}
        if case.unmeasured:
            extra["not_measured"] = list(case.unmeasured)
        if case.notes:
            extra["left_out"] = list(case.notes)
        entries.append(
            EvalEntry(len(entries), case.prompt, case.should_trigger, extra, case.history)
        )
    meta = {"skill_name": skills[0], "format": "claude plugin eval cases"}
    return EvalSet(path=os.path.abspath(path), entries=tuple(entries), meta=meta)


def pinned_models(cases: Sequence[TriggerCase]) -> list[str]:
    """A warning for each case that pins ``execution.model``: its trigger item runs on the
    session's model(s), as every item does, so what it measures may not be what the runner
    measures."""
    return [
        f"case {case.folder} pins execution.model {case.model}; its trigger item runs on the "
        "session's model (--trigger-model)"
        for case in cases
        if case.model
    ]
