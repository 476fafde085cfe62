"""Skills inside Claude Code plugins, folder-name ids, and folders where some skills have no
eval set: what the catalog makes of them before any call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.model.context import FIRST_PLUGIN, USER
from pytest_skilltrigger.skills.catalog import (
    TargetOptions,
    find_targets,
    load_context,
    load_targets,
)
from pytest_skilltrigger.skills.neighbours import load_installed
from pytest_skilltrigger.support.errors import InputError


def write_skill(
    folder: Path, description: str, name: str | None = None, evals: bool = True
) -> None:
    folder.mkdir(parents=True)
    name_line = f"name: {name or folder.name}\n"
    (folder / "SKILL.md").write_text(f"---\n{name_line}description: {description}\n---\nBody.\n")
    if evals:
        (folder / "evals").mkdir()
        data = [{"query": f"{description} please", "should_trigger": True}]
        (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))


def make_plugin(root: Path, name: str = "acme", manifest: str | None = None) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    text = manifest if manifest is not None else json.dumps({"name": name, "version": "0.1.0"})
    (root / ".claude-plugin" / "plugin.json").write_text(text)
    write_skill(root / "skills" / "alpha", "Convert zebra spreadsheets into llama reports.")
    write_skill(root / "skills" / "beta", "Polish walrus invoices.")
    write_skill(root / "skills" / "gamma", "Tune kazoo orchestras.", name="delta")
    return root


def make_project(root: Path) -> Path:
    skills = root / ".claude" / "skills"
    write_skill(skills / "proj", "Feed the office cactus.")
    return skills


def test_a_plugins_skills_are_named_and_placed_as_the_cli_lists_them(tmp_path: Path) -> None:
    plugin = make_plugin(tmp_path / "renamed")  # the manifest names it, not the folder
    targets = load_targets([str(plugin)])
    assert [t.name for t in targets] == ["acme:alpha", "acme:beta", "acme:gamma"]
    alpha = targets[0].start_context
    assert alpha.group == FIRST_PLUGIN
    listed = [s.line for s in alpha.listing()][:3]
    assert listed == [
        "- acme:alpha: Convert zebra spreadsheets into llama reports.",
        "- acme:beta: Polish walrus invoices.",
        "- acme:gamma (acme:delta): Tune kazoo orchestras.",
    ]


def test_a_skill_of_a_plugin_given_alone_is_still_the_plugins(tmp_path: Path) -> None:
    plugin = make_plugin(tmp_path / "acme")
    (target,) = load_targets([str(plugin / "skills" / "beta")])
    assert target.name == "acme:beta"
    assert [s.name for s in target.siblings] == ["acme:alpha", "acme:gamma"]


def test_project_skills_come_before_the_plugins_in_every_listing(tmp_path: Path) -> None:
    project = make_project(tmp_path / "work")
    plugin = make_plugin(tmp_path / "acme")
    found = find_targets([str(project), str(plugin)])
    by_name = {t.name: t for t in found.targets}
    expected = [
        "- proj: Feed the office cactus.",
        "- acme:alpha: Convert zebra spreadsheets into llama reports.",
        "- acme:beta: Polish walrus invoices.",
        "- acme:gamma (acme:delta): Tune kazoo orchestras.",
    ]
    for name in ("proj", "acme:alpha", "acme:gamma"):
        assert [s.line for s in by_name[name].start_context.listing()][:4] == expected


def test_two_plugins_are_listed_in_the_order_given(tmp_path: Path) -> None:
    first = make_plugin(tmp_path / "b", name="bolt")
    second = make_plugin(tmp_path / "a", name="acme")
    (target, *_rest) = load_targets([str(first), str(second)])
    names = [s.name for s in target.start_context.listing()][:6]
    assert names == [
        "bolt:alpha",
        "bolt:beta",
        "bolt:gamma",
        "acme:alpha",
        "acme:beta",
        "acme:gamma",
    ]


def test_a_name_that_differs_from_the_folder_is_an_alias_with_a_warning(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills / "foo", "Count ocelots in the barn.", name="bar")
    (target,) = load_targets([str(skills)])
    assert target.name == "foo"
    assert target.start_context.listing()[0].line == "- foo (bar): Count ocelots in the barn."
    (warning,) = [w for w in target.warnings if "differs from the folder" in w]
    assert "'foo (bar)'" in warning and str(skills / "foo" / "SKILL.md") in warning


@pytest.mark.parametrize(
    "manifest,problem",
    [
        ("{not json", "is not valid JSON"),
        ("{}", "has no 'name'"),
        ('{"name": "a b"}', "is not a plugin name"),
        ("[1]", "must be a JSON object"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_broken_manifest_is_a_one_line_error(tmp_path: Path, manifest: str, problem: str) -> None:
    plugin = make_plugin(tmp_path / "acme", manifest=manifest)
    with pytest.raises(InputError) as caught:
        load_targets([str(plugin)])
    message = str(caught.value)
    assert "\n" not in message and problem in message
    assert message.startswith(str(plugin / ".claude-plugin" / "plugin.json"))


def test_a_folder_runs_the_skills_that_have_an_eval_set(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills / "pdf", "Merge and split PDF files.")
    write_skill(skills / "sheets", "Clean spreadsheet tables.", evals=False)
    found = find_targets([str(skills)])
    assert [t.name for t in found.targets] == ["pdf"]
    assert [s.id for s in found.missing] == ["sheets"]
    # the one without an eval set still competes
    assert "- sheets: Clean spreadsheet tables." in [
        s.line for s in found.targets[0].start_context.listing()
    ]


def test_a_single_skill_without_an_eval_set_stays_an_error(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills / "pdf", "Merge and split PDF files.")
    write_skill(skills / "sheets", "Clean spreadsheet tables.", evals=False)
    with pytest.raises(InputError, match="no eval set found"):
        find_targets([str(skills / "sheets")])
    assert find_targets([str(skills / "sheets")], TargetOptions(draft_missing=True)).missing


def test_a_folder_where_no_skill_has_an_eval_set_is_an_error(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skill(skills / "sheets", "Clean spreadsheet tables.", evals=False)
    write_skill(skills / "notes", "Tidy meeting notes.", evals=False)
    with pytest.raises(
        InputError, match=r"none of the 2 skills here has an eval set .notes, sheets"
    ):
        find_targets([str(skills)])


def test_extra_skills_are_the_users_or_a_plugins(tmp_path: Path) -> None:
    user = tmp_path / "user-skills"
    write_skill(user / "zed", "Sharpen pencils.", evals=False)
    plugin = make_plugin(tmp_path / "team", name="team")
    installed = load_installed([str(plugin), str(user)])
    groups = {s.name: s.group for s in installed}
    assert groups["zed"] == USER
    assert groups["team:alpha"] > FIRST_PLUGIN
    skills = tmp_path / "skills"
    write_skill(skills / "pdf", "Merge and split PDF files.")
    (target,) = find_targets([str(skills)], TargetOptions(installed=installed)).targets
    names = [s.name for s in target.start_context.listing()][:5]
    assert names == ["zed", "pdf", "team:alpha", "team:beta", "team:gamma"]


def test_an_ad_hoc_context_of_a_plugin_skill_has_its_place(tmp_path: Path) -> None:
    plugin = make_plugin(tmp_path / "acme")
    context = load_context(str(plugin / "skills" / "gamma"))
    assert (context.skill_name, context.alias, context.group) == (
        "acme:gamma",
        "acme:delta",
        FIRST_PLUGIN,
    )


def test_two_plugins_of_one_name_are_a_one_line_error(tmp_path: Path) -> None:
    first = make_plugin(tmp_path / "one", name="acme")
    second = make_plugin(tmp_path / "two", name="acme")
    with pytest.raises(InputError, match="their skills would have the same ids") as caught:
        load_targets([str(first), str(second)])
    assert "\n" not in str(caught.value)


def test_a_users_skill_shadows_a_project_skill_of_its_id_in_every_listing(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user-skills"
    write_skill(user / "foo", "The user's own foo.", evals=False)
    project = make_project(tmp_path / "work")
    write_skill(project / "foo", "The project's foo.", name="bar", evals=False)
    plugin = make_plugin(tmp_path / "acme")
    options = TargetOptions(installed=load_installed([str(user)]))
    found = find_targets([str(project), str(plugin)], options)
    lines = {t.name: [s.line for s in t.start_context.listing()] for t in found.targets}
    assert all("- foo: The user's own foo." in listed for listed in lines.values())
    assert not any("- foo (bar): The project's foo." in listed for listed in lines.values())


def test_a_case_that_names_an_alias_checks_the_skill_it_loads(tmp_path: Path) -> None:
    plugin = make_plugin(tmp_path / "acme")
    for name, match in (("by-alias", "acme:delta"), ("bare-name", "delta")):
        folder = plugin / "evals" / name
        folder.mkdir(parents=True)
        (folder / "case.yaml").write_text(
            f'schema_version: "1.0"\nname: {name}\nexecution:\n  prompt: "tune the kazoos {name}"\n'
            f"graders:\n  - {{name: g, type: tool_used, tool: Skill, "
            f'input_match: \'"skill":"{match}"\'}}\n'
        )
    found = find_targets([str(plugin)])
    gamma = next(t for t in found.targets if t.name == "acme:gamma")
    queries = [e.query for e in gamma.eval_set.entries]
    assert "tune the kazoos by-alias" in queries and "tune the kazoos bare-name" in queries
    assert found.not_collected == []


def test_a_manifest_saved_with_a_bom_is_read(tmp_path: Path) -> None:
    """Windows editors add a BOM; Claude Code reads such a manifest, and so do we."""
    plugin = make_plugin(tmp_path / "acme", manifest='\ufeff{"name": "acme"}')
    (target, *_rest) = load_targets([str(plugin)])
    assert target.name.startswith("acme:")
