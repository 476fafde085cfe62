"""Plugins as public repositories lay them out, held against the pinned CLI's own request:
commands a manifest declares in subfolders, a plugin whose root is its skill, a root
``SKILL.md`` that is a symlink, a marketplace root (installed as a user installs it, plugin
after plugin as it lists them) with a plugin that has commands only, and the listing budget
of a marketplace-scale install.

Each test lays the repository out once, reads it as the plugin does (``find_targets`` on the
path a user gives ``--trigger-skill-path``) and compares the plugin lines of the builtin
listing with the lines the CLI sent, in order, bare names included.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_skilltrigger.model.listing_budget import fit_of
from pytest_skilltrigger.skills.catalog import Target, find_targets
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_command, cli_request, listing_lines
from tests.fake_messages_api import FakeMessagesAPI

pytestmark = pytest.mark.slow

HAIKU = "claude-haiku-4-5"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def skill(folder: Path, description: str, name: str | None = None, evals: bool = True) -> None:
    write(
        folder / "SKILL.md",
        f"---\nname: {name or folder.name}\ndescription: {description}\n---\nBody.\n",
    )
    if evals:
        rows = [{"query": f"please {description.lower()}", "should_trigger": True}]
        write(folder / "evals" / "trigger-eval.json", json.dumps(rows))


def command(path: Path, description: str) -> None:
    write(path, f"---\ndescription: {description}\n---\nDo it.\n")


def manifest(root: Path, **data: object) -> None:
    write(root / ".claude-plugin" / "plugin.json", json.dumps(data))


def plugin_lines(lines: list[str], plugins: tuple[str, ...]) -> list[str]:
    """The lines of these plugins' skills and commands, in the listing's order."""
    return [line for line in lines if line[2:].split(":", 1)[0] in plugins and ":" in line[2:]]


def builtin_lines(target: Target, model: str | None = None) -> list[str]:
    """The builtin listing's lines for a target on ``model``, bare where its budget says."""
    context = target.start_context.on_model(model)
    fit = fit_of(context, model, environ={})
    return [fit.line(skill) for skill in context.listing()]


def cli_lines(
    cli: str, api: FakeMessagesAPI, tmp_path: Path, *args: str, model: str | None = None
) -> list[str]:
    project = tmp_path / "cli-project"
    project.mkdir(exist_ok=True)
    home = tmp_path / "cli-home"
    return listing_lines(cli_request(cli, api, project, home, args=args, model=model))


def test_commands_a_manifest_declares_in_subfolders(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Declared command files are named by their file name, in the manifest's order, and
    the files it does not declare are left out (a public plugin's layout)."""
    root = tmp_path / "checkout-dir"
    manifest(
        root,
        name="acme-tools",
        commands=["./commands/review/code-review.md", "./commands/ship.md", "./commands/gone.md"],
    )
    command(root / "commands" / "review" / "code-review.md", "Review the code change.")
    command(root / "commands" / "review" / "deep" / "audit.md", "Audit deeply.")
    command(root / "commands" / "ship.md", "Ship the release.")
    command(root / "commands" / "zz-draft.md", "A draft command.")
    skill(root / "skills" / "alpha", "Convert zebra spreadsheets into llama reports.")
    (target,) = find_targets([str(root)]).targets
    ours = plugin_lines(builtin_lines(target), ("acme-tools",))
    assert ours == [
        "- acme-tools:code-review: Review the code change.",
        "- acme-tools:ship: Ship the release.",
        "- acme-tools:alpha: Convert zebra spreadsheets into llama reports.",
    ]
    cli = cli_lines(claude_bin, fake_api, tmp_path, "--plugin-dir", str(root))
    assert plugin_lines(cli, ("acme-tools",)) == ours


def test_a_plugin_whose_root_is_its_skill(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """``"skills": ["./"]`` and a root SKILL.md, in a checkout folder named otherwise: the
    CLI lists ``plugin:plugin`` (the frontmatter's name), after ``skills/``, with the
    commands walked from ``commands/`` (files, then folders), and no alias."""
    root = tmp_path / "some-checkout"
    manifest(root, name="acme-tools", skills=["./"])
    skill(root, "Tidy acme tool configs.", name="acme-tools")
    skill(root / "skills" / "helper", "Help with acme helpers.", evals=False)
    command(root / "commands" / "zz-last.md", "The last command.")
    command(root / "commands" / "review" / "code-review.md", "Review the code change.")
    command(root / "commands" / "aa-first.md", "The first command.")
    found = find_targets([str(root)])
    assert [t.name for t in found.targets] == ["acme-tools:acme-tools"]
    (target,) = found.targets
    assert not [w for w in target.warnings if "differs from the folder name" in w]
    ours = plugin_lines(builtin_lines(target), ("acme-tools",))
    assert ours == [
        "- acme-tools:aa-first: The first command.",
        "- acme-tools:zz-last: The last command.",
        "- acme-tools:review:code-review: Review the code change.",
        "- acme-tools:helper: Help with acme helpers.",
        "- acme-tools:acme-tools: Tidy acme tool configs.",
    ]
    cli = cli_lines(claude_bin, fake_api, tmp_path, "--plugin-dir", str(root))
    assert plugin_lines(cli, ("acme-tools",)) == ours


def test_a_root_skill_md_that_is_a_symlink(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """A root SKILL.md linked to one of ``skills/`` (as a public repository has it) is that
    skill, listed once where ``skills/`` lists it; the plugin's commands stay."""
    root = tmp_path / "checkout"
    manifest(root, name="acme-tools", skills=["./"], commands=["./commands/ship.md"])
    skill(root / "skills" / "main", "Run the main acme job.", name="tapir-helper")
    skill(root / "skills" / "other", "Run the other acme job.", evals=False)
    command(root / "commands" / "ship.md", "Ship the release.")
    os.symlink(os.path.join("skills", "main", "SKILL.md"), root / "SKILL.md")
    (target,) = find_targets([str(root)]).targets
    assert target.name == "acme-tools:main"
    ours = plugin_lines(builtin_lines(target), ("acme-tools",))
    assert ours == [
        "- acme-tools:ship: Ship the release.",
        "- acme-tools:main (acme-tools:tapir-helper): Run the main acme job.",
        "- acme-tools:other: Run the other acme job.",
    ]
    cli = cli_lines(claude_bin, fake_api, tmp_path, "--plugin-dir", str(root))
    assert plugin_lines(cli, ("acme-tools",)) == ours


def marketplace(root: Path, names: list[str], text: str = "{} job number {}.") -> None:
    """A marketplace listing ``names`` in that order (``cmdonly`` has commands alone, the
    others two skills and a command)."""
    entries = [{"name": n, "source": f"./plugins/{n}"} for n in names]
    write(
        root / ".claude-plugin" / "marketplace.json",
        json.dumps({"name": "mkt", "owner": {"name": "x"}, "plugins": entries}),
    )
    for name in names:
        plugin = root / "plugins" / name
        manifest(plugin, name=name, version="1.0.0")
        if name == "cmdonly":
            command(plugin / "commands" / "deploy.md", text.format("Deploy", 1))
            command(plugin / "commands" / "audit.md", text.format("Audit", 2))
            continue
        skill(plugin / "skills" / f"{name}-s2", text.format(name.title(), 2))
        skill(plugin / "skills" / f"{name}-s1", text.format(name.title(), 1))
        command(plugin / "commands" / f"{name}-cmd.md", text.format(name.title(), 3))


def install(cli: str, api: FakeMessagesAPI, home: Path, root: Path, names: list[str]) -> None:
    """The marketplace installed as a user installs it whole: plugin after plugin, in its
    order."""
    cli_command(cli, api, home, "plugin", "marketplace", "add", str(root))
    for name in names:
        cli_command(cli, api, home, "plugin", "install", f"{name}@mkt")


def test_a_marketplace_root_in_its_order_with_a_command_only_plugin(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    names = ["zeta", "alpha", "cmdonly"]
    root = tmp_path / "mkt-repo"
    marketplace(root, names)
    found = find_targets([str(root)])
    assert [t.name for t in found.targets] == [
        "zeta:zeta-s1",
        "zeta:zeta-s2",
        "alpha:alpha-s1",
        "alpha:alpha-s2",
    ]
    ours = plugin_lines(builtin_lines(found.targets[0]), tuple(names))
    assert ours[:4] == [
        "- zeta:zeta-cmd: Zeta job number 3.",
        "- alpha:alpha-cmd: Alpha job number 3.",
        "- cmdonly:audit: Audit job number 2.",
        "- cmdonly:deploy: Deploy job number 1.",
    ]
    home = tmp_path / "cli-home"
    install(claude_bin, fake_api, home, root, names)
    cli = cli_lines(claude_bin, fake_api, tmp_path)
    assert plugin_lines(cli, tuple(names)) == ours


def test_the_budget_of_a_marketplace_scale_install(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Six plugins of long descriptions on a small budget: the lines the CLI shows bare are
    the ones the builtin listing shows bare, the skill under test among them."""
    names = ["pf", "pa", "pe", "pb", "pd", "pc"]
    root = tmp_path / "big-mkt"
    marketplace(root, names, text="{} job number {}: " + "lorem ipsum dolor sit amet " * 10)
    found = find_targets([str(root)])
    last = found.targets[-1]  # the last plugin's last skill: bare in the real install
    ours = plugin_lines(builtin_lines(last, HAIKU), tuple(names))
    assert f"- {last.name}" in ours
    home = tmp_path / "cli-home"
    install(claude_bin, fake_api, home, root, names)
    cli = cli_lines(claude_bin, fake_api, tmp_path, model=HAIKU)
    assert plugin_lines(cli, tuple(names)) == ours
