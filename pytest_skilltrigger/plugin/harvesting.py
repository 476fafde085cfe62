"""``--trigger-harvest=FILE``: a command of its own, as ``--trigger-export-plugin-eval`` is.

It reads the user's own Claude Code sessions (those of this project, or every project's with
``--trigger-harvest-scope=all``) for the selected skills, writes what it found to FILE (and,
with ``--trigger-harvest-merge``, into each skill's eval set), and says in a few lines what it
read and wrote. No session starts, no item runs, no call is made, nothing is sent anywhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.model.formatting import display_path, first_few
from pytest_skilltrigger.plugin import options
from pytest_skilltrigger.plugin.setup import Setup
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.skills.catalog import Found
    from pytest_skilltrigger.skills.harvest import Harvest
    from pytest_skilltrigger.skills.skill import Skill

PREFIX = "skilltrigger: "


def harvest_command(config: pytest.Config) -> int:
    """Harvest, write, merge; a bad input is a one-line usage error, a home without
    sessions a one-line notice."""
    # deferred: the skills layer, only for this command
    from pytest_skilltrigger.skills.harvest import Names, harvest

    try:
        path = options.harvest_file(config)
        options.check_values_not_taken_for_paths(config)
        setup = Setup(config)
        paths = setup.selection.paths
        found = setup.find(paths, without_sets=True) if paths else None
        skills = [*(t.skill for t in found.targets), *found.missing] if found else []
        if not skills:
            raise InputError("--trigger-harvest", "no skill was selected")
        scope = options.value(config, "--trigger-harvest-scope")
        project = None if scope == "all" else setup.session_folder
        names = [Names.of(s.id, [s.alias] if s.alias else []) for s in skills]
        result = harvest(os.path.expanduser("~"), project, names)
        assert found is not None
        lines = _lines(config, path, result, skills, found)
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    sys.stdout.write("".join(f"{PREFIX}{line}\n" for line in lines))
    return 0


def _lines(
    config: pytest.Config, path: str, result: Harvest, skills: Sequence[Skill], found: Found
) -> list[str]:
    """What was read, what each skill's sessions say, what was written and merged."""
    from pytest_skilltrigger.skills.harvest_file import write_harvest

    where = ", ".join(result.folders) or "~/.claude/projects"
    if not result.read and not result.skipped:
        return [f"no Claude Code session of this project under {where}: nothing to harvest"]
    lines = [f"warning: {skipped}" for skipped in result.skipped]
    lines.append(
        f"read {result.read} session file(s) from {where}"
        + (f" ({len(result.skipped)} skipped)" if result.skipped else "")
    )
    written = write_harvest(path, result)
    quiet = []
    for skill in skills:
        signals = written.by_signal.get(skill.id, {})
        if signals or result.weeks.get(skill.id):
            lines.append(_skill_line(skill.id, signals, result))
        else:
            quiet.append(skill.id)
    if quiet:
        lines.append(f"nothing about {first_few(quiet, 5)} in these sessions")
    lines.append(
        f"wrote {_entries(written.new)} to {display_path(path)} ({written.kept} there "
        "before); nothing was sent anywhere and no call was made"
    )
    if options.value(config, "--trigger-harvest-merge"):
        lines += _merge_lines(path, skills, found)
    return lines


def _skill_line(skill: str, signals: Mapping[str, int], result: Harvest) -> str:
    counts = ", ".join(f"{signals.get(s, 0)} {s}" for s in ("observed", "missed", "undone"))
    weeks = result.weeks.get(skill, {})
    shown = "; ".join(
        f"{week}: {w.sessions} session(s), {w.loads} load(s), {w.forced} forced"
        for week, w in list(weeks.items())[-4:]
    )
    return f"{skill}: {counts}" + (f" (by week, {shown})" if shown else "")


def _merge_lines(path: str, skills: Sequence[Skill], found: Found) -> list[str]:
    """Merge each skill's harvested cases into its eval set (a new evals/trigger-eval.json
    for a skill without one)."""
    from pytest_skilltrigger.skills.harvest_file import harvested_cases, merge_into

    sets = {t.skill.id: t.eval_set.path for t in found.targets}
    lines = []
    for skill in skills:
        cases = harvested_cases(path, skill.id)
        if not cases:
            continue
        target = sets.get(skill.id) or os.path.join(skill.path, "evals", "trigger-eval.json")
        merged = merge_into(target, cases)
        shown = display_path(target)
        if merged.left:
            lines.append(f"{skill.id}: not merged into {shown}: {merged.left}")
        else:
            lines.append(f"{skill.id}: merged {_entries(merged.added)} into {shown}")
    return lines


def _entries(count: int) -> str:
    return f"{count} new entr{'y' if count == 1 else 'ies'}"
