"""Commands are listed as the pinned CLI lists them: a project's ``.claude/commands`` after its
skills, merged and sorted; a plugin's ``commands/`` first in the plugin's block; names from
paths; the text read as a skill's is; the claude-code backend's copy holds them too.

The expected lines are those Claude Code 2.1.328 sent for these files (the slow tests send
them again); the built-in context must send the same ones in the same order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.claude_code.workspace import install_skills
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.skills.catalog import find_targets
from pytest_skilltrigger.skills.commands import command_files, read_commands
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_request, listing_lines
from tests.fake_messages_api import FakeMessagesAPI

EVALS = json.dumps([{"query": "tidy this", "should_trigger": True}])

PROJECT_FILES = {
    ".claude/skills/abc/SKILL.md": "---\nname: abc\ndescription: Project skill abc.\n---\nBody\n",
    ".claude/skills/abc/evals/trigger-eval.json": EVALS,
    ".claude/skills/mid/SKILL.md": "---\nname: mid\ndescription: Project skill mid.\n---\nBody\n",
    ".claude/commands/build.md": "---\ndescription: Build the project.\n---\nBuild it.\n",
    ".claude/commands/plain.md": "Plain project command first line.\nSecond line.\n",
    ".claude/commands/sub/deep.md": "---\ndescription: Nested project command.\n---\nx\n",
    ".claude/commands/hidden.md": (
        "---\ndescription: Hidden.\ndisable-model-invocation: true\n---\nx\n"
    ),
    ".claude/commands/empty.md": "",
    ".claude/commands/Upper.md": "---\ndescription: Upper case file name.\n---\nx\n",
    ".claude/commands/aaa.md": (
        "---\nname: renamed\ndescription: Project command aaa.\nwhen_to_use: wtu aaa.\n---\nx\n"
    ),
    ".claude/commands/colon.md": "---\ndescription: Fixed t: colon project cmd\n---\nx\n",
    ".claude/commands/notes.txt": "not a command\n",
}
PROJECT_LINES = [
    "- abc: Project skill abc.",
    "- mid: Project skill mid.",
    "- aaa: Project command aaa. - wtu aaa.",
    "- build: Build the project.",
    "- colon: Fixed t: colon project cmd",
    "- empty: Custom command",
    "- plain: Plain project command first line.",
    "- sub:deep: Nested project command.",
    "- Upper: Upper case file name.",
]

PLUGIN_FILES = {
    "acme/.claude-plugin/plugin.json": '{"name": "acme"}',
    "acme/skills/bravo/SKILL.md": "---\ndescription: Plugin skill bravo.\n---\nx\n",
    "acme/skills/bravo/evals/trigger-eval.json": EVALS,
    "acme/skills/aardvark/SKILL.md": "---\ndescription: Plugin skill aardvark.\n---\nx\n",
    "acme/commands/deploy.md": (
        "---\ndescription: Deploy the app.\nargument-hint: <env>\n---\nDeploy to $ARGUMENTS.\n"
    ),
    "acme/commands/alpha.md": "Run alpha checks (no frontmatter: not listed).\n",
    "acme/commands/wtu.md": "---\ndescription: Command with wtu.\nwhen_to_use: When asked.\n---\n",
    "acme/commands/zed.md": "---\nname: renamed-zed\ndescription: Zed command.\n---\nx\n",
    "acme/commands/Bravo.md": "---\ndescription: Plugin cmd Bravo.\n---\nx\n",
    "acme/commands/_under.md": "---\ndescription: Plugin cmd _under.\n---\nx\n",
    "acme/commands/onlywtu.md": "# Heading onlywtu\n",
    "acme/commands/paths.md": "---\ndescription: paths cmd.\npaths: src/**\n---\nx\n",
    "acme/commands/zz/inner.md": "---\ndescription: Nested plugin command.\n---\nx\n",
}
PLUGIN_LINES = [
    "- acme:_under: Plugin cmd _under.",
    "- acme:Bravo: Plugin cmd Bravo.",
    "- acme:deploy: Deploy the app.",
    "- acme:paths: paths cmd.",
    "- acme:wtu: Command with wtu. - When asked.",
    "- acme:zed (acme:renamed-zed): Zed command.",
    "- acme:zz:inner: Nested plugin command.",
    "- acme:aardvark: Plugin skill aardvark.",
    "- acme:bravo: Plugin skill bravo.",
]


def lay_out(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def context(root: Path, skills: str) -> TriggerContext:
    (target,) = find_targets([str(root / skills)]).targets
    return target.context()


def own_lines(context: TriggerContext) -> list[str]:
    return [s.line for s in context.own_listing()]


def test_a_projects_commands_follow_its_skills(tmp_path: Path) -> None:
    lay_out(tmp_path, PROJECT_FILES)
    assert own_lines(context(tmp_path, ".claude/skills/abc")) == PROJECT_LINES


def test_a_plugins_commands_come_first_in_its_block(tmp_path: Path) -> None:
    lay_out(tmp_path, PLUGIN_FILES)
    assert own_lines(context(tmp_path, "acme/skills/bravo")) == PLUGIN_LINES


def test_names_come_from_paths(tmp_path: Path) -> None:
    lay_out(
        tmp_path,
        {
            "c/sub/inner/deeper.md": "x",
            "c/nested/SKILL.md": "x",
            "c/dot.name.md": "x",
            "c/skip.txt": "x",
        },
    )
    names = sorted(name for _, name in command_files(str(tmp_path / "c")))
    assert names == ["dot.name", "nested", "sub:inner:deeper"]


def test_a_project_skill_beats_a_command_of_its_name(tmp_path: Path) -> None:
    lay_out(tmp_path, PROJECT_FILES)
    lay_out(tmp_path, {".claude/commands/mid.md": "---\ndescription: A command.\n---\n"})
    lines = own_lines(context(tmp_path, ".claude/skills/abc"))
    assert "- mid: Project skill mid." in lines
    assert "- mid: A command." not in lines


def test_a_plugins_command_beats_its_skill_of_the_same_name(tmp_path: Path) -> None:
    lay_out(tmp_path, PLUGIN_FILES)
    lay_out(tmp_path, {"acme/commands/aardvark.md": "---\ndescription: The command.\n---\n"})
    lines = own_lines(context(tmp_path, "acme/skills/bravo"))
    assert "- acme:aardvark: The command." in lines
    assert "- acme:aardvark: Plugin skill aardvark." not in lines


def test_an_unreadable_command_file_is_one_line_naming_it(tmp_path: Path) -> None:
    from pytest_skilltrigger.support.errors import InputError

    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "bad.md").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError) as raised:
        read_commands(str(tmp_path / "c"))
    assert "bad.md" in str(raised.value)


def test_the_claude_code_backends_copy_holds_the_commands(tmp_path: Path) -> None:
    """The CLI lists what the workspace holds: the commands are written as files, the
    project's in the project, a plugin's in its copy of the plugin."""
    lay_out(tmp_path / "src", PLUGIN_FILES)
    lay_out(tmp_path / "src", PROJECT_FILES)
    run_dir = tmp_path / "run"
    for part in ("project", "config", "plugins"):
        (run_dir / part).mkdir(parents=True)
    plugins = install_skills(run_dir, context(tmp_path / "src", "acme/skills/bravo"))
    (root,) = plugins
    # each in a folder the manifest declares, in the listing's order
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    written = {
        str(path.relative_to(root / folder)): path.read_text()
        for folder in manifest["commands"]
        for path in sorted((root / folder).rglob("*.md"))
    }
    assert written["deploy.md"] == PLUGIN_FILES["acme/commands/deploy.md"]
    assert "zz/inner.md" in written
    assert "alpha.md" not in written  # not listed, so not needed


@pytest.mark.slow
@pytest.mark.parametrize(
    "files,skills,plugin_dir,expected",
    [
        (PROJECT_FILES, ".claude/skills/abc", None, PROJECT_LINES),
        (PLUGIN_FILES, "acme/skills/bravo", "acme", PLUGIN_LINES),
    ],
    ids=["project", "plugin"],
)
def test_the_lines_are_what_the_pinned_cli_lists(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    files: dict[str, str],
    skills: str,
    plugin_dir: str | None,
    expected: list[str],
) -> None:
    project = tmp_path / "project"
    lay_out(project, files)
    args = ["--plugin-dir", str(project / plugin_dir)] if plugin_dir else []
    body = cli_request(claude_bin, fake_api, project, tmp_path / "home", args=args)
    assert listing_lines(body)[: len(expected)] == expected
    assert own_lines(context(project, skills)) == expected


SHADOW_FILES = {
    "acme/.claude-plugin/plugin.json": '{"name": "acme"}',
    "acme/skills/alpha/SKILL.md": "---\nname: alpha-tutor\ndescription: The skill alpha.\n---\nx\n",
    "acme/skills/alpha/evals/trigger-eval.json": EVALS,
    "acme/commands/alpha.md": "---\ndescription: The command alpha.\n---\nx\n",
}


def test_a_command_of_the_tested_skills_name_shadows_it(tmp_path: Path) -> None:
    """As in a public plugin (a ``jp`` command beside a ``jp`` skill): the CLI lists the
    command in the skill's place, so the skill never triggers; said before any call."""
    lay_out(tmp_path, SHADOW_FILES)
    (target,) = find_targets([str(tmp_path / "acme/skills/alpha")]).targets
    context = target.context()
    assert not context.model_invocable
    assert "the command acme:alpha has this skill's name" in (context.unlisted_reason or "")
    assert any("acme:alpha has this skill's name" in w for w in target.warnings)
    assert own_lines(context) == ["- acme:alpha: The command alpha."]


@pytest.mark.slow
def test_the_pinned_cli_lists_the_command_in_the_shadowed_skills_place(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    lay_out(project, SHADOW_FILES)
    body = cli_request(
        claude_bin,
        fake_api,
        project,
        tmp_path / "home",
        args=["--plugin-dir", str(project / "acme")],
    )
    lines = [line for line in listing_lines(body) if line.startswith("- acme:")]
    assert lines == ["- acme:alpha: The command alpha."]
