"""The listing the model is shown: skills installed for the user (``--trigger-extra-skills``)
listed before the project's, untested, in the builtin request; checked on the server's side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI, bare_names, parse_listing
from tests.helpers import plugin_args


def write_skill(folder: Path, name: str, description: str, evals: list | None = None) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"
    )
    if evals is not None:
        (folder / name / "evals").mkdir()
        (folder / name / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    return folder / name


def test_extra_skills_are_listed_first_and_compete_without_items(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project = pytester.path / "skills"
    write_skill(
        project,
        "b-sheets",
        "Tidy spreadsheet columns and rows.",
        [{"query": "tidy spreadsheet columns please", "should_trigger": True}],
    )
    write_skill(
        project,
        "a-notes",
        "Write meeting notes.",
        [{"query": "write meeting notes", "should_trigger": True}],
    )
    installed = pytester.path / "home-skills"
    write_skill(installed, "zz-tidy", "Tidy spreadsheet columns, rows and cells quickly.")
    write_skill(installed, "aa-poems", "Write poems.")
    write_skill(installed, "hidden", "Never listed.")
    hidden = installed / "hidden" / "SKILL.md"
    unlisted = "disable-model-invocation: true\n---\n\n"
    hidden.write_text(hidden.read_text().replace("---\n\n", unlisted))
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(project, f"--trigger-json={out}"), f"--trigger-extra-skills={installed}"
    )
    names = [name for name, _ in parse_listing(fake_api.requests[0])]
    assert names[:4] == ["aa-poems", "zz-tidy", "a-notes", "b-sheets"]  # installed first
    assert "hidden" not in names
    # no items for the installed skills, and one of them takes the sheets query
    report = json.loads(out.read_text())
    assert sorted(s["skill_name"] for s in report["skills"]) == ["a-notes", "b-sheets"]
    assert "zz-tidy" in result.stdout.str()


def test_an_extra_skill_named_like_a_tested_one_is_refused(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project = pytester.path / "skills"
    write_skill(project, "sheets", "Tidy spreadsheets.", [{"query": "q", "should_trigger": True}])
    installed = pytester.path / "home-skills"
    write_skill(installed, "sheets", "Another sheets skill.")
    result = pytester.runpytest_subprocess(
        *plugin_args(project), f"--trigger-extra-skills={installed}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --trigger-extra-skills: installs a skill named 'sheets'*"])
    assert fake_api.stats["calls"] == 0


def test_the_fixture_and_a_draft_list_the_extra_skills_too(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A ``skill_trigger`` check and a drafted eval set's request see the same listing as the
    items: the installed skills first (the draft prompt names them with their descriptions)."""
    project = pytester.path / "skills"
    write_skill(project, "sheets", "Tidy spreadsheet columns and rows.")
    installed = pytester.path / "home-skills"
    write_skill(installed, "zz-tidy", "Tidy spreadsheet columns, rows and cells quickly.")
    pytester.makepyfile(
        test_check=f"""
        def test_sheets(skill_trigger):
            check = skill_trigger({str(project / "sheets")!r}, "tidy spreadsheet columns", runs=1)
            assert check.runs == 1
    """
    )
    extra = f"--trigger-extra-skills={installed}"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_check.py", extra)
    result.assert_outcomes(passed=1)
    (check,) = fake_api.requests
    assert [name for name, _ in parse_listing(check)][:2] == ["zz-tidy", "sheets"]
    result = pytester.runpytest_subprocess(*plugin_args(project), "--trigger-draft", extra)
    drafts = [b for b in fake_api.requests if "trigger eval set" in json.dumps(b)]
    assert len(drafts) == 1
    prompt = drafts[0]["messages"][0]["content"]
    assert "- zz-tidy: Tidy spreadsheet columns, rows and cells quickly." in prompt
    runs = [b for b in fake_api.requests[1:] if b not in drafts]
    assert runs and all(parse_listing(b)[0][0] == "zz-tidy" for b in runs)


def write_ten_skills(folder: Path) -> str:
    """Ten project skills of ~300 characters, the last one with an eval set: on
    claude-haiku-4-5 Claude Code lists the first five in full and the last five by name."""
    for i in range(10):
        text = f"Skill {i} tidies widget batches of kind {i}. " + "Use it for widgets. " * 14
        write_skill(folder, f"skill-{i:03d}", text[:299] + ".")
    evals = [{"query": "tidy the widget batches of kind nine", "should_trigger": True}]
    (folder / "skill-009" / "evals").mkdir()
    (folder / "skill-009" / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    return evals[0]["query"]


def test_past_the_models_listing_budget_a_skill_is_listed_by_name_alone(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Builtin mode lists what Claude Code would on the model: with claude-haiku-4-5 (an
    8,000-character budget) the last five of ten ~300-character skills are bare names in the
    request the server saw; the report says so, and the terminal warns by how much the
    listing passes the budget. The same folder on a 1M-token model is listed whole."""
    skills = pytester.path / "skills"
    query = write_ten_skills(skills)
    fake_api.script(query, ["text"])
    out = pytester.path / "out.json"
    args = (
        f"--trigger-skill-path={skills / 'skill-009'}",
        "--trigger-backend=anthropic",
        "--trigger-runs=1",
        "--trigger-confidence=off",
        "--trigger-cache=off",
        "-p",
        "no:cacheprovider",
        f"--trigger-json={out}",
    )
    result = pytester.runpytest_subprocess(*args, "--trigger-model=claude-haiku-4-5")
    (body,) = fake_api.requests
    assert [n for n in bare_names(body) if n.startswith("skill-")] == [
        f"skill-{i:03d}" for i in range(5, 10)
    ]
    (skill,) = json.loads(out.read_text())["skills"]
    assert skill["listed"] == "bare"
    assert skill["listing_budget"]["budget"] == 8000 and skill["listing_budget"]["over_by"] > 0
    over = skill["listing_budget"]["over_by"]
    result.stdout.fnmatch_lines(
        [
            f"*warning: skill-009 is listed as a bare name with claude-haiku-4-5: the folder's "
            f"listing passes the budget of 8,000 characters by {over:,}*"
        ]
    )
    fake_api.script(query, ["text"])
    pytester.runpytest_subprocess(*args, "--trigger-model=claude-sonnet-5-5")
    assert bare_names(fake_api.requests[-1]) == []
    assert json.loads(out.read_text())["skills"][0]["listed"] == "full"


def test_extra_skills_under_the_home_folder_are_found_by_a_tilde(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--trigger-extra-skills=~/.claude/skills`` as the docs write it: the shell leaves
    the ``~`` after ``=``, the plugin reads it as the home folder."""
    project = pytester.path / "skills"
    write_skill(project, "sheets", "Tidy spreadsheets.", [{"query": "q", "should_trigger": True}])
    write_skill(pytester.path / "home" / ".claude" / "skills", "sheets", "Another sheets skill.")
    monkeypatch.setenv("HOME", str(pytester.path / "home"))
    result = pytester.runpytest_subprocess(
        *plugin_args(project), "--trigger-extra-skills=~/.claude/skills"
    )
    result.stderr.fnmatch_lines(["ERROR: --trigger-extra-skills: installs a skill named 'sheets'*"])
    assert fake_api.stats["calls"] == 0
