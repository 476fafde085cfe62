"""Eval sets where and as public skill repositories keep them, each read as it is, every
entry collected: a folder-level set naming skills, ``should_trigger`` naming the skill, YAML
beside each skill, ``prompt`` in an ``evals`` wrapper, CSV per skill or per folder of the
root's ``evals/``, a file per skill in a root folder, JSON Lines with comments, routing sets
with ``expected`` or alone; and the one message when a skill has none.

The layouts are described after real repositories (see ``docs/reference/eval-sets.md``);
the texts are our own.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_skilltrigger.skills.catalog import Found, TargetOptions, find_targets
from pytest_skilltrigger.support.errors import InputError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(folder: Path, name: str | None = None, description: str | None = None) -> Path:
    name = name or folder.name
    text = description or f"Handle {folder.name.replace('-', ' ')} work for the team."
    write(folder / "SKILL.md", f"---\nname: {name}\ndescription: {text}\n---\nBody.\n")
    return folder


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def plugin(root: Path, name: str, skills: list[str]) -> Path:
    write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": name}))
    for folder in skills:
        skill(root / "skills" / folder)
    return root


def entries(found: Found) -> dict[str, list[tuple[str, bool]]]:
    return {
        t.name: [(e.query, e.should_trigger) for e in t.eval_set.entries] for t in found.targets
    }


def test_a_folder_level_set_of_cases_naming_skills(tmp_path: Path) -> None:
    """A marketplace keeps one set at its root for all its skills: ``cases`` with ``prompt``,
    ``should_trigger`` and ``expected_skill``, a ``targets`` object of rates. Each case goes
    to the skill it names; the accuracy target gates that skill; the case naming no skill
    and the rate with no gate here are one warning each."""
    root = git_repo(tmp_path / "repo")
    write(
        root / ".claude-plugin" / "marketplace.json",
        json.dumps(
            {
                "name": "m",
                "owner": {"name": "x"},
                "plugins": [
                    {"name": "docs", "source": "./plugins/docs"},
                    {"name": "ops", "source": "./plugins/ops"},
                ],
            }
        ),
    )
    plugin(root / "plugins" / "docs", "docs", ["pdf-fill", "slides"])
    plugin(root / "plugins" / "ops", "ops", ["deploy"])
    cases = [
        {
            "id": "c1",
            "prompt": "fill in this pdf form",
            "should_trigger": True,
            "expected_skill": "pdf-fill",
            "reason": "form",
        },
        {"id": "c2", "prompt": "make a deck", "should_trigger": True, "expected_skill": "slides"},
        {
            "id": "c3",
            "prompt": "ship it to prod",
            "should_trigger": True,
            "expected_skill": "ops:deploy",
        },
        {
            "id": "c4",
            "prompt": "what is a pdf",
            "should_trigger": False,
            "expected_skill": "pdf-fill",
        },
        {"id": "c5", "prompt": "hello there", "should_trigger": False, "expected_skill": None},
    ]
    data = {
        "schema_version": "1",
        "description": "triggers",
        "targets": {"accuracy": 0.9, "precision": 0.95},
        "cases": cases,
    }
    path = write(root / "evals" / "trigger-eval.json", json.dumps(data))
    found = find_targets([str(root)])
    assert entries(found) == {
        "docs:pdf-fill": [("fill in this pdf form", True), ("what is a pdf", False)],
        "docs:slides": [("make a deck", True)],
        "ops:deploy": [("ship it to prod", True)],
    }
    assert {t.eval_set.min_accuracy for t in found.targets} == {0.9}
    warnings = [n for n in found.notes if str(path) in n]
    assert len(warnings) == 2
    assert "1 entries name no skill (or several), and the folder holds 3 skills" in warnings[0]
    assert "targets precision have no gate here" in warnings[1]


def test_should_trigger_naming_the_skill_is_a_routing_set(tmp_path: Path) -> None:
    """A list of ``{query, should_trigger: "<skill>" | null, why}`` at the repository root
    for the skills of ``.claude/skills``: a routing item per entry, and a trigger item for
    the skill each names (their runs are shared)."""
    root = git_repo(tmp_path / "repo")
    for name in ("feedback", "screenshot", "snapshot"):
        skill(root / ".claude" / "skills" / name)
    rows = [
        {"query": "annotate this screenshot", "should_trigger": "screenshot", "why": "x"},
        {"query": "send feedback on the page", "should_trigger": "feedback"},
        {"query": "save a snapshot of the DOM", "should_trigger": "snapshot"},
        {"query": "what time is it", "should_trigger": None},
    ]
    write(root / "evals" / "trigger-eval-set.json", json.dumps(rows))
    found = find_targets([str(root)])
    assert entries(found) == {
        "feedback": [("send feedback on the page", True)],
        "screenshot": [("annotate this screenshot", True)],
        "snapshot": [("save a snapshot of the DOM", True)],
    }
    (routing,) = found.routing
    assert [(e.query, e.expected_skill) for e in routing.entries] == [
        ("annotate this screenshot", "screenshot"),
        ("send feedback on the page", "feedback"),
        ("save a snapshot of the DOM", "snapshot"),
        ("what time is it", None),
    ]
    assert routing.folder == str(root / ".claude" / "skills")


def test_yaml_beside_each_skill_with_its_model(tmp_path: Path) -> None:
    """``skill-tests.yaml`` beside each SKILL.md of a plugin (``skill: plugin:name``,
    ``model: haiku``, ``tests`` with ``prompt``), comment lines and extra keys included."""
    root = plugin(tmp_path / "plugins" / "toolkit", "toolkit", ["skill-development", "notes"])
    text = (
        "# what the action runs\n"
        "skill: toolkit:claude-code-skill-development\nmodel: haiku\ntests:\n"
        "  - id: t1\n    prompt: help me write a new skill\n    should_trigger: true\n"
        "  - id: t2\n    prompt: what is a monad\n    should_trigger: false\n"
        "    notes: unrelated\n"
    )
    write(root / "skills" / "skill-development" / "skill-tests.yaml", text)
    write(
        root / "skills" / "notes" / "skill-tests.yaml",
        "tests:\n  - {prompt: take notes, should_trigger: true}\n",
    )
    found = find_targets([str(root)])
    by_name = {t.name: t for t in found.targets}
    dev = by_name["toolkit:skill-development"]
    assert [(e.query, e.should_trigger) for e in dev.eval_set.entries] == [
        ("help me write a new skill", True),
        ("what is a monad", False),
    ]
    assert dev.eval_set.model == "claude-haiku-5-5"  # the alias as the pinned CLI reads it
    assert dev.eval_set.entries[1].extra == {"id": "t2", "notes": "unrelated"}
    assert by_name["toolkit:notes"].eval_set.model is None


def test_prompt_inside_an_evals_wrapper(tmp_path: Path) -> None:
    folder = skill(tmp_path / "skills" / "ci-score")
    data = {
        "_note": "x",
        "evals": [
            {"skills": ["ci-score"], "prompt": "score my CI", "should_trigger": True},
            {"skills": ["ci-score"], "prompt": "what is CI", "should_trigger": False},
        ],
    }
    write(folder / "evals" / "evals.json", json.dumps(data))
    (target,) = find_targets([str(folder)]).targets
    assert [(e.query, e.should_trigger) for e in target.eval_set.entries] == [
        ("score my CI", True),
        ("what is CI", False),
    ]


def test_a_single_skill_in_a_subfolder_with_its_set_at_the_root(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    skill(root / "skills" / "only")
    rows = [
        {"query": "do the only thing", "should_trigger": True},
        {"query": "do something else", "should_trigger": False},
    ]
    write(root / "evals" / "trigger-eval.json", json.dumps(rows))
    (target,) = find_targets([str(root)]).targets
    assert [e.query for e in target.eval_set.entries] == ["do the only thing", "do something else"]


def test_a_folder_whose_only_set_is_a_routing_set(tmp_path: Path) -> None:
    """``routing-eval.json`` alone beside ten skills: every entry collects (a routing item,
    and a trigger item for the skill it expects)."""
    folder = tmp_path / "skills"
    names = [f"s{i}" for i in range(10)]
    for name in names:
        skill(folder / name)
    rows = [{"query": f"please do s{i} work now", "expected_skill": f"s{i}"} for i in range(10)]
    rows.append({"query": "nothing to do here", "expected_skill": None})
    write(folder / "routing-eval.json", json.dumps(rows))
    found = find_targets([str(folder)])
    assert sorted(t.name for t in found.targets) == names
    assert len(found.routing[0].entries) == 11


CSV = (
    "id,should_trigger,prompt,expected_behaviors\n"
    '1,true,"Run the build for the shop",builds|tests\n'
    '2,false,"What is a build?",explains\n'
    '3,TRUE,"Build it, then\nship it",builds\n'
)


def test_csv_per_skill(tmp_path: Path) -> None:
    """``skills/<skill>/eval.csv``: an ``id,should_trigger,prompt`` header, a quoted prompt
    over two lines, TRUE as a spreadsheet writes it."""
    root = plugin(tmp_path / "solo", "solo", ["build", "plan"])
    write(root / "skills" / "build" / "eval.csv", CSV)
    write(root / "skills" / "plan" / "eval.csv", "should_trigger,prompt\ntrue,plan my week\n")
    found = find_targets([str(root)])
    assert entries(found) == {
        "solo:build": [
            ("Run the build for the shop", True),
            ("What is a build?", False),
            ("Build it, then\nship it", True),
        ],
        "solo:plan": [("plan my week", True)],
    }
    assert found.targets[0].eval_set.entries[0].extra == {
        "id": "1",
        "expected_behaviors": "builds|tests",
    }


def test_csv_in_a_folder_per_skill_of_the_roots_evals(tmp_path: Path) -> None:
    """``evals/<skill>/prompts.csv`` at the repository root beside ``skills/<skill>``; a
    ``_template`` folder there is named as passed over when a skill has no set."""
    root = git_repo(tmp_path / "repo")
    skill(root / "skills" / "openalex")
    skill(root / "skills" / "ipa")
    write(
        root / "evals" / "openalex" / "prompts.csv",
        "id,should_trigger,prompt\n1,true,find papers on bees\n",
    )
    write(root / "evals" / "_template" / "prompts.csv", "id,should_trigger,prompt\n1,true,x\n")
    found = find_targets([str(root)])
    assert entries(found) == {"openalex": [("find papers on bees", True)]}
    assert [s.id for s in found.missing] == ["ipa"]
    with pytest.raises(InputError) as info:
        find_targets([str(root / "skills" / "ipa")])
    assert "evals/_template (a folder of evals/ named after no skill here)" in str(info.value)


def test_a_file_per_skill_in_a_root_folder(tmp_path: Path) -> None:
    """``evals/triggers/<skill>.json`` at the root, named after ``skills/<skill>``."""
    root = git_repo(tmp_path / "repo")
    write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": "sdd"}))
    skill(root / "skills" / "adr")
    skill(root / "skills" / "spec")
    write(
        root / "evals" / "triggers" / "adr.json",
        json.dumps(
            [
                {"query": "/sdd:adr", "should_trigger": True},
                {"query": "record this decision", "should_trigger": True},
            ]
        ),
    )
    write(
        root / "evals" / "triggers" / "spec.json",
        json.dumps([{"query": "write a spec", "should_trigger": True}]),
    )
    found = find_targets([str(root)])
    assert entries(found) == {
        "sdd:adr": [("/sdd:adr", True), ("record this decision", True)],
        "sdd:spec": [("write a spec", True)],
    }


def test_json_lines_with_comments_beside_each_skill(tmp_path: Path) -> None:
    """``routing-eval.jsonl`` beside a skill: ``intent`` and ``expected_skill`` (this skill,
    another, or null) a line, ``//`` comment lines between them."""
    folder = tmp_path / "skills"
    skill(folder / "brain")
    skill(folder / "query")
    text = (
        "// the brain skill's intents\n"
        '{"intent": "remember that I like tea", "expected_skill": "brain"}\n'
        "\n"
        '{"intent":"search my notes","expected_skill":"query","ambiguous_with":["brain"]}\n'
        '{"intent": "what is 2+2", "expected_skill": null}\n'
    )
    write(folder / "brain" / "routing-eval.jsonl", text)
    found = find_targets([str(folder / "brain")])
    (target,) = found.targets
    assert [(e.query, e.should_trigger) for e in target.eval_set.entries] == [
        ("remember that I like tea", True),
        ("search my notes", False),
        ("what is 2+2", False),
    ]


def test_a_routing_set_with_expected_under_cases(tmp_path: Path) -> None:
    """``evals/routing-eval.json`` = ``{"eval", "cases": [{id, expected, prompt}]}``."""
    root = git_repo(tmp_path / "repo")
    for name in ("docs", "copy", "critic"):
        skill(root / "skills" / name)
    cases = [
        {"id": 1, "expected": "docs", "prompt": "write the API docs"},
        {"id": 7, "expected": "copy", "seam": "vs docs", "prompt": "punch up this tagline"},
        {"id": 13, "expected": "critic", "prompt": "tear this draft apart"},
    ]
    write(root / "evals" / "routing-eval.json", json.dumps({"eval": "routing", "cases": cases}))
    found = find_targets([str(root)])
    assert sorted(entries(found)) == ["copy", "critic", "docs"]
    assert [e.expected_skill for e in found.routing[0].entries] == ["docs", "copy", "critic"]


def test_commands_named_by_a_set_are_left_out_with_a_warning(tmp_path: Path) -> None:
    """A set of a plugin's commands (``target`` naming each): no skill to test, said once."""
    root = git_repo(tmp_path / "repo")
    write(root / ".claude-plugin" / "plugin.json", json.dumps({"name": "shinsa"}))
    skill(root / "skills" / "control-mapping")
    write(root / "commands" / "compliance-scan.md", "---\ndescription: Scan.\n---\n")
    cases = [
        {
            "id": "a",
            "query": "scan for compliance",
            "should_trigger": True,
            "target": "compliance-scan",
        },
        {"id": "b", "query": "map controls", "should_trigger": True, "target": "control-mapping"},
    ]
    path = write(root / "evals" / "trigger_evals.json", json.dumps({"version": 1, "cases": cases}))
    found = find_targets([str(root)])
    assert entries(found) == {"shinsa:control-mapping": [("map controls", True)]}
    (warning,) = [n for n in found.notes if str(path) in n]
    assert "entries name commands (compliance-scan), which are not tested here" in warning


def test_a_set_of_one_skills_sub_commands_is_that_skills(tmp_path: Path) -> None:
    """A root skill's own set whose entries name the command each should run
    (``expected_command``) with ``should_trigger``: the skill's entries, as written."""
    root = git_repo(tmp_path / "qa")
    skill(root, name="qa-team")
    rows = {
        "skill_name": "qa-team",
        "evals": [
            {
                "query": "write test cases for this PRD",
                "expected_command": "/qa-case",
                "should_trigger": True,
                "split": "train",
            },
            {"query": "what's the weather", "expected_command": None, "should_trigger": False},
        ],
    }
    write(root / "evals" / "trigger-eval.json", json.dumps(rows))
    (target,) = find_targets([str(root)]).targets
    assert [(e.query, e.should_trigger) for e in target.eval_set.entries] == [
        ("write test cases for this PRD", True),
        ("what's the weather", False),
    ]


# -- the one message when no set is found ------------------------------------------------------

LAYOUTS = ["one-skill", "folder", "plugin", "subfolder-repo"]


def layout(tmp_path: Path, kind: str) -> Path:
    """A layout with no set, and a file that looks like one passed over."""
    if kind == "one-skill":
        path = skill(tmp_path / "pdf")
        write(path / "evals" / "my-triggers.json", "[]")
        return path
    if kind == "folder":
        skill(tmp_path / "skills" / "pdf")
        skill(tmp_path / "skills" / "docx")
        write(tmp_path / "skills" / "pdf" / "evals" / "my-triggers.json", "[]")
        return tmp_path / "skills"
    if kind == "plugin":
        root = plugin(tmp_path / "acme", "acme", ["pdf"])
        write(root / "skills" / "pdf" / "evals" / "my-triggers.json", "[]")
        return root
    root = git_repo(tmp_path / "repo")
    skill(root / "packages" / "a" / "skills" / "pdf")
    write(root / "packages" / "a" / "skills" / "pdf" / "evals" / "my-triggers.json", "[]")
    return root


@pytest.mark.parametrize("kind", LAYOUTS)
def test_the_no_set_message_is_the_same_for_every_layout(tmp_path: Path, kind: str) -> None:
    with pytest.raises(InputError) as info:
        find_targets([str(layout(tmp_path, kind))])
    message = str(info.value)
    assert "\n" not in message
    assert (
        "looked for trigger-eval.json (and .yaml, .csv, skill-tests.yaml, the other usual "
        "names) in " in message
    )
    assert "evals/my-triggers.json (not a name this plugin reads a set from)" in message
    assert message.endswith(
        "name one with --trigger-eval-set=FILE (one skill), or draft them with --trigger-draft"
    )


def test_a_set_named_with_eval_set_may_be_yaml_or_csv(tmp_path: Path) -> None:
    folder = skill(tmp_path / "pdf")
    named = write(
        tmp_path / "sets" / "pdf.yaml",
        yaml.safe_dump({"tests": [{"prompt": "merge two pdfs", "should_trigger": True}]}),
    )
    (target,) = find_targets([str(folder)], TargetOptions(eval_set=str(named))).targets
    assert [e.query for e in target.eval_set.entries] == ["merge two pdfs"]
    csv_file = write(tmp_path / "sets" / "pdf.csv", "should_trigger,prompt\nfalse,hello\n")
    (target,) = find_targets([str(folder)], TargetOptions(eval_set=str(csv_file))).targets
    assert [(e.query, e.should_trigger) for e in target.eval_set.entries] == [("hello", False)]
