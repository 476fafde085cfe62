"""Writing an eval set as the official runner's cases: one ``<case>/case.yaml`` per entry.

Every target is checked before the first file is written; only cases an earlier export wrote
are replaced (they carry a marker comment on their first line), and each file is written
atomically.

A case of a plugin's skill ends cleanly right after the skill is called: it loads the plugin
under test and a small plugin of its own (``<case>/skilltrigger-stop``) whose ``PostToolUse``
hook on ``Skill`` ends the run once the call names the skill. Observed with the pinned runner:
without it, a model that looks around first or keeps working after loading the skill ends
its run at ``max_turns`` with an error in the report; with it, every run ends with none, and
the grader reads the whole run up to there, as ``--trigger-within=turn`` reads a run. A call of
another skill does not end the run, so the verdict is the one of the whole run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet
from pytest_skilltrigger.skills.plugin_eval.schema import (
    CASE_FILE,
    GRADERS_DIR,
    PROMPT_FILE,
    SKILL_TOOL,
    STOP_PLUGIN,
    whole,
)
from pytest_skilltrigger.support.atomic import atomic_write_text, write_problem
from pytest_skilltrigger.support.errors import InputError

MARKER = "# Written by pytest-skilltrigger --trigger-export-plugin-eval"
"""How the first line of an exported ``case.yaml`` starts: an export replaces only these."""
_STOP_DESCRIPTION = (
    "Written by pytest-skilltrigger --trigger-export-plugin-eval: ends an eval run once the skill "
    "under test is called"
)
_MARKER_RE = re.compile(re.escape(MARKER) + r" for skill (?P<skill>\S+),")
_WRITTEN_VERSION = "1.0"


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
    aliases: tuple[str, ...] = ()
    # the plugin under test's root (None: a skill of no plugin): its cases end at the skill
    plugin_root: str | None = None


@dataclass(frozen=True)
class _CaseFile:
    """One case to write: its ``case.yaml`` path and text, whether it replaces ours, and
    the files of its stopping plugin (path, text)."""

    path: str
    text: str
    replaces: bool
    helpers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CaseSkill:
    """What a case needs of its skill beyond its listed name: the other names the CLI loads
    it by (a bare name, a frontmatter name), and the root of its plugin (None: none)."""

    aliases: tuple[str, ...] = ()
    plugin_root: str | None = None


def write_plugin_eval(
    out_dir: str,
    listed_name: str,
    eval_set: EvalSet,
    runs: int | None = None,
    skill: CaseSkill = CaseSkill(),
) -> list[str]:
    """Write ``eval_set`` as ``claude plugin eval`` cases for the skill listed as
    ``listed_name``, one ``<out_dir>/<case>/case.yaml`` per query; return their paths.

    Every target is checked before the first file is written: a case folder that is not one
    of our exports (for this skill) is never touched. Cases an earlier export of this skill
    wrote and this one does not are removed, so the folder holds exactly this eval set.
    ``runs`` sets each case's runs (the runner's default when None); ``skill.aliases`` are
    the other names the CLI loads the skill by: a call by any of them passes the case, as it
    counts as a trigger here. ``skill.plugin_root`` is the root of the skill's plugin: each
    case inside it loads that plugin and its stopping plugin.
    """
    export = _Export(out_dir, listed_name, eval_set, runs, skill.aliases, skill.plugin_root)
    files = _planned_cases(export)
    stale = _stale_cases(out_dir, listed_name, {os.path.dirname(f.path) for f in files})
    for case_file in files:
        _write(case_file)
    for path in stale:
        os.remove(path)
        shutil.rmtree(os.path.join(os.path.dirname(path), STOP_PLUGIN), ignore_errors=True)
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
    if export.runs is not None and whole(1, 50)(export.runs):
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


def input_match_for(listed_name: str, aliases: Sequence[str] = ()) -> str:
    """A JavaScript regex that matches a ``Skill`` call of exactly ``listed_name`` or one of
    ``aliases``: each name as JSON writes it, regex characters escaped, closed by its quote
    (after a ``/``, which the CLI drops from a called name, when there are aliases)."""
    names = [_escaped(name) for name in dict.fromkeys([listed_name, *aliases])]
    if len(names) == 1:
        return f'"skill":"{names[0]}"'
    return f'"skill":"\\/?(?:{"|".join(names)})"'


def _escaped(name: str) -> str:
    quoted = json.dumps(name, ensure_ascii=False)[1:-1]
    return re.sub(r"([\\^$.|?*+()\[\]{}/])", r"\\\1", quoted)


def _case_file(export: _Export, position: int, entry: EvalEntry) -> _CaseFile:
    name = _case_name(export, position, entry)
    folder = os.path.join(export.out_dir, name)
    replaces = _check_target(folder, export.listed_name)
    marker = _marker(export, folder, entry.index + 1) + GRADED_AS
    plugins = _case_plugins(export, folder)
    text = marker + _case_yaml(export, name, entry, plugins)
    helpers = _stop_files(export, folder) if plugins else ()
    return _CaseFile(os.path.join(folder, CASE_FILE), text, replaces, helpers)


GRADED_AS = (
    "# Its grader reads the whole run: a call of the skill after looking around passes, as "
    "pytest-skilltrigger --trigger-within=turn reads a run.\n"
)


def _case_plugins(export: _Export, folder: str) -> list[str]:
    """The case's ``plugins``: the plugin under test and the stopping plugin, as paths from
    the case folder; none when the case is not inside the plugin (the runner loads only
    plugins under it)."""
    root = export.plugin_root
    if root is None or not os.path.abspath(folder).startswith(root.rstrip(os.sep) + os.sep):
        return []
    own = os.path.relpath(root, os.path.abspath(folder)).replace(os.sep, "/")
    return [own, f"./{STOP_PLUGIN}"]


def _stop_files(export: _Export, folder: str) -> tuple[tuple[str, str], ...]:
    """The stopping plugin of a case: its manifest, and its hook that ends the run once a
    ``Skill`` call names the skill (by any name it loads by), printing ``continue: false``."""
    names = [
        re.sub(r"([.^$|?*+()\[\]{}\\])", r"\\\1", n) for n in (export.listed_name, *export.aliases)
    ]
    pattern = '"skill":"/?(' + "|".join(dict.fromkeys(names)) + ')"'
    stop = json.dumps(
        {"continue": False, "stopReason": "pytest-skilltrigger: the skill was called"}
    )
    command = f"grep -Eq '{pattern}' && echo '{stop}' || true"
    hooks = {
        "hooks": {
            "PostToolUse": [
                {"matcher": SKILL_TOOL, "hooks": [{"type": "command", "command": command}]}
            ]
        }
    }
    manifest = {"name": STOP_PLUGIN, "version": "1.0.0", "description": _STOP_DESCRIPTION}
    root = os.path.join(folder, STOP_PLUGIN)
    return (
        (
            os.path.join(root, ".claude-plugin", "plugin.json"),
            json.dumps(manifest, indent=2) + "\n",
        ),
        (os.path.join(root, "hooks", "hooks.json"), json.dumps(hooks, indent=2) + "\n"),
    )


def _case_yaml(export: _Export, name: str, entry: EvalEntry, plugins: Sequence[str]) -> str:
    """The case: the query as the prompt, one grader on the Skill tool; inside a plugin, the
    plugin under test and the one that ends the run at the skill (the runner's own turn
    limit is kept: looking around first is part of the run)."""
    grader: dict[str, Any] = {
        "name": _Text("triggers" if entry.should_trigger else "does-not-trigger"),
        "type": _Text("tool_used"),
        "tool": _Text(SKILL_TOOL),
        "input_match": _Text(input_match_for(export.listed_name, export.aliases)),
    }
    if entry.should_trigger:
        grader["min"] = 1
    else:  # scored in the runner's without-plugin arm too: no call there either
        grader.update({"min": 0, "max": 0, "arm": _Text("both")})
    case: dict[str, Any] = {"schema_version": _Text(_WRITTEN_VERSION), "name": _Text(name)}
    if export.runs is not None:
        case["runs"] = export.runs
    if plugins:
        case["plugins"] = _Flow([_Text(p) for p in plugins])
    case["execution"] = {"prompt": _Text(entry.query)}
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
    entries = set(os.listdir(folder)) - {STOP_PLUGIN}
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
    for path, text in case_file.helpers:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write_text(path, text, overwrite=True)
        except OSError as exc:
            raise InputError(path, f"cannot be written: {exc.strerror or exc}") from None
    try:
        atomic_write_text(case_file.path, case_file.text, overwrite=case_file.replaces)
    except FileExistsError:
        raise InputError(
            case_file.path, "appeared while the export was written; not replaced"
        ) from None
    except OSError as exc:
        raise InputError(case_file.path, f"cannot be written: {exc.strerror or exc}") from None
