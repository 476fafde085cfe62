"""Layouts found in public repositories, read as Claude Code would list them: a skill at the
root of its checkout, a project's ``.claude/skills`` under ``--trigger-skill-path=.``, a skill
the CLI never lists (nothing is drafted for it)."""

from __future__ import annotations

from pathlib import Path

from pytest_skilltrigger.optimizer.drafting import draft_jobs
from pytest_skilltrigger.skills.catalog import find_targets
from pytest_skilltrigger.skills.discovery import discover_skills
from tests.skills.test_plugins import write_skill


def test_a_skill_at_its_checkouts_root_lists_no_other_checkout(tmp_path: Path) -> None:
    """``~/src/my-skill`` given with ``--trigger-skill-path=.``: the other checkouts in ``~/src``
    are not a folder of skills, so they are not listed beside it."""
    src = tmp_path / "src"
    write_skill(src / "my-skill", "Tidy commit messages.")
    write_skill(src / "someone-elses", "Bake bread.", evals=False)
    (target,) = find_targets([str(src / "my-skill")]).targets
    assert [s.name for s in target.siblings] == []
    assert "someone-elses" not in [s.name for s in target.context().own_listing()]


def test_a_folder_of_skills_lists_them_beside_each_other(tmp_path: Path) -> None:
    """A plugin's or a project's ``skills/``, or a folder the user names: its skills compete."""
    for folder in ("skills", "my-collection"):
        write_skill(tmp_path / folder / "a", "Tidy commit messages.")
        write_skill(tmp_path / folder / "b", "Bake bread.", evals=False)
    (one,) = find_targets([str(tmp_path / "skills" / "a")]).targets
    assert [s.name for s in one.siblings] == ["b"]
    (two,) = find_targets([str(tmp_path / "my-collection")]).targets
    assert [s.name for s in two.siblings] == ["b"]


def test_the_projects_claude_skills_are_found_from_its_root(tmp_path: Path) -> None:
    write_skill(tmp_path / ".claude" / "skills" / "tidy", "Tidy commit messages.")
    write_skill(tmp_path / ".claude" / "commands" / "nested", "A command, not a skill.")
    write_skill(tmp_path / ".git" / "hooks" / "x", "Hidden: never searched.")
    assert [s.id for s in discover_skills(tmp_path)] == ["tidy"]


def test_nothing_is_drafted_for_a_skill_the_cli_never_lists(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "secret"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\ndescription: Audit secrets.\ndisable-model-invocation: true\n---\nBody.\n"
    )
    write_skill(tmp_path / "skills" / "open", "Tidy commit messages.", evals=False)
    missing = discover_skills(tmp_path / "skills")
    assert [job.skill.id for job in draft_jobs("missing", missing, [])] == ["open"]
