"""The listing the model is shown: skills installed for the user (``--trigger-extra-skills``)
listed before the project's, untested, in the builtin request; checked on the server's side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI, parse_listing
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
    write_skill(project, "b-sheets", "Tidy spreadsheet columns and rows.",
                [{"query": "tidy spreadsheet columns please", "should_trigger": True}])  # fmt: skip
    write_skill(project, "a-notes", "Write meeting notes.",
                [{"query": "write meeting notes", "should_trigger": True}])  # fmt: skip
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
    result = pytester.runpytest_subprocess(*plugin_args(project),
                                           f"--trigger-extra-skills={installed}")  # fmt: skip
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --trigger-extra-skills: installs a skill named 'sheets'*"])
    assert fake_api.stats["calls"] == 0
