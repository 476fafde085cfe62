"""Which skill folders a run collects: ``--trigger-skill-path`` alone collects only those, with
explicit paths it adds them; the ``skill_paths`` ini key's skills join a run without explicit
paths and follow pytest's own selection otherwise (an argument inside a skill takes that
skill, one holding the ini folder takes it all, one elsewhere none)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_skilltrigger.plugin.selection import (
    OpenPaths,
    Selection,
    adjust_args,
    arg_paths,
    explicit,
    select,
)
from tests.fake_messages_api import FakeMessagesAPI

Source = pytest.Config.ArgsSource


def skill(folder: Path, queries: tuple[str, ...] = ("merge these PDF documents",)) -> Path:
    """A skill at ``folder`` whose eval set holds positive ``queries``."""
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {folder.name}\ndescription: Merge and split PDF documents.\n---\n"
    )
    data = [{"query": q, "should_trigger": True} for q in queries]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project: ``skills/`` (the ini folder) with ``pdf``, and ``group/`` holding ``csv``
    and ``xlsx``; ``tests/`` beside it; ``vendor/skills/other`` outside the ini folder."""
    skill(tmp_path / "skills" / "pdf")
    skill(tmp_path / "skills" / "group" / "csv")
    skill(tmp_path / "skills" / "group" / "xlsx")
    skill(tmp_path / "vendor" / "skills" / "other")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    return tmp_path


def config(
    root: Path, args: list[str], source: Any = Source.ARGS, started_in: Path | None = None
) -> Any:
    """The parts of a pytest config the selection reads: pytest's arguments and where they
    came from, the folder pytest was started in and rootdir."""
    return SimpleNamespace(
        args=list(args),
        args_source=source,
        invocation_params=SimpleNamespace(dir=started_in or root),
        rootpath=root,
        inipath=root / "pyproject.toml",
    )


def p(root: Path, relative: str) -> str:
    return str(root / relative)


def test_explicit_means_paths_on_the_command_line_or_a_start_below_rootdir(tree: Path) -> None:
    assert explicit(config(tree, [p(tree, "tests")], Source.ARGS))
    assert not explicit(config(tree, [str(tree)], Source.INVOCATION_DIR))
    assert explicit(config(tree, [p(tree, "skills/pdf")], Source.INVOCATION_DIR, tree / "skills"))
    assert not explicit(config(tree, [p(tree, "tests")], Source.TESTPATHS))


def test_arg_paths_are_absolute_and_drop_node_ids(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    assert arg_paths(["skills/pdf/SKILL.md::pdf[01-merge]", "tests", str(tree / "x")]) == [
        p(tree, "skills/pdf/SKILL.md"),
        p(tree, "tests"),
        p(tree, "x"),
    ]


@pytest.mark.parametrize("source", [Source.TESTPATHS, Source.INVOCATION_DIR])
def test_without_explicit_paths_the_ini_skills_join(tree: Path, source: Any) -> None:
    ini = [p(tree, "skills")]
    chosen = select(config(tree, [p(tree, "tests")], source), [], ini)
    assert chosen == Selection([], ini) and chosen.paths == ini


def test_skill_path_alone_collects_only_those_skills(tree: Path) -> None:
    given = [p(tree, "vendor/skills/other")]
    chosen = select(config(tree, [str(tree)], Source.INVOCATION_DIR), given, [p(tree, "skills")])
    assert chosen == Selection(given, []) and chosen.paths == given


@pytest.mark.parametrize(
    "arg,in_play",
    [
        ("tests", []),  # elsewhere: none of the ini skills
        ("tests/test_x.py::test_x", []),
        (".", ["skills"]),  # holds the ini folder: all of it
        ("skills", ["skills"]),
        ("skills/pdf", ["skills/pdf"]),  # inside a skill: that skill
        ("skills/pdf/SKILL.md", ["skills/pdf"]),
        ("skills/pdf/SKILL.md::pdf[01-merge-these-pdf-documents]", ["skills/pdf"]),
        ("skills/pdf/evals/trigger-eval.json", ["skills/pdf"]),
        ("skills/pdf/evals", ["skills/pdf"]),
        ("skills/group", ["skills/group"]),  # a folder of skills: itself
        ("skills/group/csv", ["skills/group/csv"]),
    ],
)
def test_explicit_paths_take_the_ini_skills_they_name(
    tree: Path, monkeypatch: pytest.MonkeyPatch, arg: str, in_play: list[str]
) -> None:
    monkeypatch.chdir(tree)
    chosen = select(config(tree, [arg]), [], [p(tree, "skills")])
    assert chosen.ini == [p(tree, x) for x in in_play] and chosen.given == []


def test_explicit_paths_in_one_skill_take_it_once_in_argument_order(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    args = ["skills/group/xlsx", "skills/pdf/SKILL.md", "skills/pdf/evals", "tests"]
    chosen = select(config(tree, args), [], [p(tree, "skills")])
    assert chosen.ini == [p(tree, "skills/group/xlsx"), p(tree, "skills/pdf")]


def test_explicit_paths_and_skill_path_together(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    given = [p(tree, "vendor/skills/other"), p(tree, "skills/pdf")]
    chosen = select(config(tree, ["skills/pdf", "skills/group/csv"]), given, [p(tree, "skills")])
    assert chosen.ini == [p(tree, "skills/pdf"), p(tree, "skills/group/csv")]
    assert chosen.paths == [*given, p(tree, "skills/group/csv")]  # no path twice


def test_several_ini_folders_each_follow_the_arguments(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tree)
    ini = [p(tree, "skills"), p(tree, "vendor/skills")]
    assert select(config(tree, ["vendor"]), [], ini).ini == [p(tree, "vendor/skills")]
    assert select(config(tree, ["."]), [], ini).ini == ini
    assert select(config(tree, [str(tree)], Source.INVOCATION_DIR), [], ini).ini == ini


@pytest.mark.parametrize(
    "arg,named",
    [
        ("tests", []),  # holds no skill
        ("tests/test_x.py::test_x", []),
        ("skills", ["skills"]),
        ("skills/pdf/SKILL.md::pdf[01-merge-these-pdf-documents]", ["skills/pdf"]),
        ("skills/group/csv", ["skills/group/csv"]),
        (".", ["."]),
    ],
)
def test_without_the_ini_key_a_path_given_to_pytest_that_holds_skills_is_collected(
    tree: Path, monkeypatch: pytest.MonkeyPatch, arg: str, named: list[str]
) -> None:
    """As the tutorial writes it: ``pytest skills --trigger-min-accuracy=0.9``."""
    monkeypatch.chdir(tree)
    chosen = select(config(tree, [arg]), [], [])
    assert chosen.named == [os.path.abspath(x) for x in named] and chosen.ini == []
    assert select(config(tree, [arg], Source.TESTPATHS), [], []).named == []  # not explicit


def test_a_start_inside_a_skill_takes_that_skill(tree: Path) -> None:
    """``cd skills/pdf && pytest``: pytest's argument is the folder it was started in."""
    inside = tree / "skills" / "pdf"
    cfg = config(tree, [str(inside)], Source.INVOCATION_DIR, inside)
    assert select(cfg, [], [p(tree, "skills")]).ini == [str(inside)]


def md(root: Path, folder: str) -> str:
    return p(root, f"{folder}/SKILL.md")


def test_adjust_args_without_explicit_paths_collects_only_the_given_skills_files(
    tree: Path,
) -> None:
    cfg = config(tree, [p(tree, "tests")], Source.TESTPATHS)
    args = cfg.args
    files = [md(tree, "vendor/skills/other")]
    adjust_args(cfg, Selection([p(tree, "vendor/skills/other")], []), files)
    assert cfg.args == files and cfg.args is args  # changed in place: pytest reads that list


def test_adjust_args_with_explicit_paths_adds_the_given_skills_not_covered(tree: Path) -> None:
    cfg = config(tree, [p(tree, "tests"), p(tree, "skills/group")])
    given = [p(tree, "skills/group/csv"), p(tree, "vendor/skills/other")]
    files = [md(tree, "skills/group/csv"), md(tree, "vendor/skills/other")]
    adjust_args(cfg, Selection(given, [p(tree, "skills/group")]), files)
    assert cfg.args == [p(tree, "tests"), p(tree, "skills/group"), files[1]]


def test_adjust_args_adds_the_ini_skills_to_a_run_without_explicit_paths(tree: Path) -> None:
    cfg = config(tree, [p(tree, "tests")], Source.TESTPATHS)
    adjust_args(cfg, Selection([], [p(tree, "skills")]), [md(tree, "skills/pdf")])
    assert cfg.args == [p(tree, "tests"), md(tree, "skills/pdf")]
    covered = config(tree, [str(tree)], Source.INVOCATION_DIR)
    adjust_args(covered, Selection([], [p(tree, "skills")]), [md(tree, "skills/pdf")])
    assert covered.args == [str(tree)]  # rootdir already holds them


@pytest.mark.parametrize("ini", [[], ["skills/pdf"]])
def test_adjust_args_leaves_explicit_paths_without_given_skills(tree: Path, ini: list[str]) -> None:
    cfg = config(tree, [p(tree, "skills/pdf/SKILL.md")])
    adjust_args(cfg, Selection([], [p(tree, x) for x in ini]), [md(tree, "skills/pdf")])
    assert cfg.args == [p(tree, "skills/pdf/SKILL.md")]


def test_adjust_args_leaves_a_run_without_skills(tree: Path) -> None:
    cfg = config(tree, [p(tree, "tests")], Source.TESTPATHS)
    adjust_args(cfg, Selection([], []), [])
    assert cfg.args == [p(tree, "tests")]


def test_open_paths_enter_hidden_folders_on_the_way_to_a_skill_and_nothing_else(
    tmp_path: Path,
) -> None:
    """``norecursedirs`` (``.*``) keeps pytest out of ``.claude``: the folders on the way to
    a skill in play are entered, and nothing else inside them is collected."""
    skill_md = tmp_path / "packages" / "foo" / ".claude" / "skills" / "bar" / "SKILL.md"
    opened = OpenPaths([str(skill_md)], [".*", "build", "node_modules"])
    claude = skill_md.parents[2]
    assert opened.ignored(str(claude)) is False
    assert opened.ignored(str(skill_md.parent)) is False
    assert opened.ignored(str(skill_md)) is False
    assert opened.ignored(str(skill_md.parent / "scripts")) is True
    assert opened.ignored(str(skill_md.parent / "test_stray.py")) is True
    assert opened.ignored(str(claude / "settings.json")) is True
    # outside what was opened, pytest decides (its --ignore included)
    assert opened.ignored(str(tmp_path / "packages" / "foo" / "test_foo.py")) is None
    assert opened.ignored(str(tmp_path / "packages")) is None


# --- through pytest: what a real command line collects ---------------------------------------


@pytest.fixture
def project(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> Path:
    """``tree``'s layout as a pytest project whose ini lists ``skills`` and ``tests``."""
    root = pytester.path
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nskill_paths = ["skills"]\ntestpaths = ["tests"]\n'
        'addopts = "-p no:cacheprovider"\ntrigger_cache = "off"\n'
    )
    skill(root / "skills" / "pdf")
    skill(root / "skills" / "group" / "csv")
    skill(root / "vendor" / "skills" / "other")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    return root


def collected(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The files of the items a run with ``args`` collects."""
    result = pytester.runpytest_subprocess("--collect-only", "-q", *args)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    return sorted({line.split("::")[0] for line in result.outlines if "::" in line})


PDF, CSV, OTHER, TESTS = (
    "skills/pdf/SKILL.md",
    "skills/group/csv/SKILL.md",
    "vendor/skills/other/SKILL.md",
    "tests/test_x.py",
)


@pytest.mark.parametrize(
    "args,files",
    [
        ((), [CSV, PDF, TESTS]),
        (("tests",), [TESTS]),
        (("skills/pdf",), [PDF]),
        (("skills/pdf/SKILL.md", "tests"), [PDF, TESTS]),
        (("skills",), [CSV, PDF]),
        (("--trigger-skill-path=vendor/skills/other",), [OTHER]),
        (("--trigger-skill-path=vendor/skills/other", "tests"), [TESTS, OTHER]),
        (("--trigger-skill-path=vendor/skills/other", "skills/group"), [CSV, OTHER]),
    ],
)
def test_a_command_line_collects_the_skills_it_selects(
    pytester: pytest.Pytester, project: Path, args: tuple[str, ...], files: list[str]
) -> None:
    assert collected(pytester, *args) == sorted(files)


def test_pytest_started_inside_a_skill_collects_that_skill(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "skills" / "group" / "csv")
    assert collected(pytester) == [CSV]  # (node ids stay relative to rootdir)
    monkeypatch.chdir(project / "skills")
    assert collected(pytester) == [CSV, PDF]


def test_a_broken_skill_outside_the_selection_is_never_read(
    pytester: pytest.Pytester, project: Path
) -> None:
    (project / "skills" / "pdf" / "evals" / "trigger-eval.json").write_text("[{")
    assert collected(pytester, "skills/group") == [CSV]
    assert collected(pytester, "tests") == [TESTS]
    result = pytester.runpytest_subprocess("--collect-only", "-q", "skills/pdf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert os.path.join("skills", "pdf", "evals", "trigger-eval.json") in result.stderr.str()


@pytest.mark.parametrize(
    "args,files",
    [
        ((), [TESTS]),  # a plain pytest collects no skill without the ini key
        (("tests",), [TESTS]),
        (("skills",), [CSV, PDF]),
        (("skills/pdf/SKILL.md",), [PDF]),
        (("skills/group/csv", "tests"), [CSV, TESTS]),
    ],
)
def test_without_the_ini_key_the_paths_given_to_pytest_collect_their_skills(
    pytester: pytest.Pytester, project: Path, args: tuple[str, ...], files: list[str]
) -> None:
    (project / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
        'addopts = "-p no:cacheprovider"\ntrigger_cache = "off"\n'
    )
    assert collected(pytester, *args) == sorted(files)
