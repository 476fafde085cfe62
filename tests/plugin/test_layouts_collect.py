"""Repositories as users lay them out, with the commands the docs give: a monorepo's subfolder
skill (``packages/foo/.claude/skills/bar``, inside a folder pytest's ``norecursedirs`` keeps it
out of), ``cd skill && pytest`` in a repository with no pytest ini file, and
``--trigger-skill-path`` into a repository that has tests of its own (and a stray ``test_*.py``
in a skill's folder). Each runs pytest in a subprocess, as a user's shell does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI

QUERIES = ("deploy the web app to staging", "what is the capital of france")


def write_skill(folder: Path, description: str) -> None:
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {folder.name}\ndescription: {description}\n---\n\nBody.\n"
    )
    data = [{"query": q, "should_trigger": i == 0} for i, q in enumerate(QUERIES)]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))


@pytest.fixture
def monorepo(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> Path:
    """A git repository with tests of its own and a package whose ``.claude/skills`` holds
    ``bar`` (with a script's stray test beside its SKILL.md) and a file to read."""
    root = pytester.path
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    package = root / "packages" / "foo"
    write_skill(package / ".claude" / "skills" / "bar", "Deploy the web app to staging.")
    (package / ".claude" / "skills" / "bar" / "scripts").mkdir()
    stray = package / ".claude" / "skills" / "bar" / "scripts" / "test_deploy.py"
    stray.write_text("import nonexistent_module_of_the_skill\n")
    (package / "src").mkdir()
    (package / "src" / "app.py").write_text("print('hello')\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_unit.py").write_text("def test_one():\n    pass\n")
    return root


def collected(pytester: pytest.Pytester, *args: str) -> tuple[list[str], str]:
    """The node ids a run with ``args`` collects, and its output."""
    result = pytester.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider", *args)
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.OK, output
    return sorted(line for line in result.outlines if "::" in line), output


BAR = "packages/foo/.claude/skills/bar/SKILL.md"


@pytest.mark.parametrize(
    "args",
    [
        ("packages/foo", "--trigger-cwd=packages/foo"),  # the how-to's command
        ("--trigger-skill-path=packages/foo",),
        ("--trigger-skill-path=.",),
        ("--trigger-skill-path=packages/foo/.claude/skills/bar",),
    ],
    ids=["how-to", "skill-path-package", "skill-path-root", "skill-path-skill"],
)
def test_a_monorepo_subfolder_skill_is_collected_in_every_form_of_the_docs(
    pytester: pytest.Pytester, monorepo: Path, args: tuple[str, ...]
) -> None:
    ids, _ = collected(pytester, *args)
    assert [i.split("::")[0] for i in ids] == [BAR] * 2
    assert not any("test_deploy" in i or "test_unit" in i for i in ids)


def test_a_path_given_to_pytest_collects_its_tests_and_its_hidden_skills(
    pytester: pytest.Pytester, monorepo: Path
) -> None:
    """``pytest . --trigger-skill-path=.``: the user named the repository, so its tests run too; the
    skill's folder adds only the skill (not its script's stray test), and the header says how
    many other tests were collected and how to leave them out."""
    ids, output = collected(pytester, ".", "--trigger-skill-path=.")
    assert [i.split("::")[0] for i in ids] == [BAR, BAR, "tests/test_unit.py"]
    assert "1 other test collected beside 2 trigger items" in output
    assert "-m skill_trigger" in output


def test_pytest_in_a_skill_folder_of_a_repository_without_an_ini_file(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``cd skills/one && pytest`` with no pytest ini anywhere: pytest takes the skill's folder
    for its rootdir, and the run still collects the skill, as the existing-suite how-to says."""
    root = pytester.path
    write_skill(root / "skills" / "one", "Deploy the web app to staging.")
    write_skill(root / "skills" / "two", "Plan a garden in spring.")
    monkeypatch.chdir(root / "skills" / "one")
    ids, _ = collected(pytester)
    assert [i.split("::")[0] for i in ids] == ["SKILL.md"] * 2
    monkeypatch.chdir(root / "skills")
    ids, _ = collected(pytester)
    assert sorted({i.split("::")[0] for i in ids}) == ["one/SKILL.md", "two/SKILL.md"]


def test_a_plain_pytest_at_a_project_root_says_how_to_collect_its_skills(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A plain ``pytest`` at a project's root collects no skill (and pays nothing); when it
    collects nothing at all, one line says what to run instead."""
    write_skill(pytester.path / ".claude" / "skills" / "one", "Deploy the web app to staging.")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    line = "*no test collected; 1 skill below this folder: run pytest --trigger-skill-path=. *"
    result.stdout.fnmatch_lines([line])
    assert fake_api.stats["calls"] == 0


def test_without_a_git_folder_the_rootdir_is_the_project_root_and_the_header_says_so(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A subfolder's skill in a checkout without ``.git`` (an unpacked archive, a CI cache):
    pytest's rootdir stands in for the project root, said once in the header, instead of
    testing the skill as a root skill."""
    root = pytester.path
    (root / "pytest.ini").write_text("[pytest]\n")
    write_skill(root / "apps" / "web" / ".claude" / "skills" / "deploy", "Deploy the web app.")
    (root / "apps" / "web" / "main.py").write_text("x = 1\n")
    result = pytester.runpytest_subprocess("--collect-only", "--trigger-skill-path=apps/web")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.OK, output
    assert output.count("no .git above apps/web: its project root is pytest's rootdir") == 1
    assert "asked at the project root" not in output  # (a collect-only run samples nothing)
    result.stdout.fnmatch_lines(["*<Dir web>*", "*<SkillFile SKILL.md>*"])


def test_without_a_git_folder_a_subfolder_skill_is_reached_from_the_rootdir(
    tmp_path: Path,
) -> None:
    """The same layout, read by the catalog: the skill is a subfolder's, found after a Read
    of a file under ``apps/web`` (without the rootdir it would be tested as a root skill)."""
    from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets

    write_skill(tmp_path / "apps" / "web" / ".claude" / "skills" / "deploy", "Deploy the app.")
    (tmp_path / "apps" / "web" / "main.py").write_text("x = 1\n")
    path = [str(tmp_path / "apps" / "web")]
    (alone,) = find_targets(path).targets
    assert alone.subfolder is None
    (target,) = find_targets(path, TargetOptions(rootdir=str(tmp_path))).targets
    assert target.subfolder is not None
    assert (target.subfolder.folder, target.subfolder.read_path) == ("apps/web", "apps/web/main.py")
