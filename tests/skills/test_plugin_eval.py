"""Tests for the official runner's cases: read as trigger items, written from an eval set.

The case files here follow what the pinned ``claude plugin eval`` loads and refuses (see
``plugin-eval.md``); the end-to-end check against the CLI itself is
``tests/backends/test_plugin_eval_cli.py``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from pytest_skilltrigger.skills.catalog import find_targets
from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet
from pytest_skilltrigger.skills.plugin_eval.classify import NotCollected, TriggerCase, skill_of
from pytest_skilltrigger.skills.plugin_eval.read import eval_set_of, read_plugin_eval
from pytest_skilltrigger.skills.plugin_eval.write import (
    MARKER,
    CaseSkill,
    input_match_for,
    write_plugin_eval,
)
from pytest_skilltrigger.support.errors import InputError

ALPHA = '"skill":"acme:alpha"'


def case_yaml(
    root: Path,
    folder: str,
    prompt: str = "convert my zebra spreadsheets",
    graders: list[dict[str, object]] | None = None,
    **top: object,
) -> Path:
    """A ``case.yaml`` under ``root/evals/folder``, valid unless the test says otherwise."""
    data: dict[str, object] = {"schema_version": "1.0", "name": folder.rsplit("/", 1)[-1]}
    data.update(top)
    data.setdefault("execution", {"prompt": prompt, "max_turns": 1})
    data.setdefault("graders", graders or [trigger()])
    data = {k: v for k, v in data.items() if v is not None}
    return write(root / "evals" / folder / "case.yaml", yaml.safe_dump(data, sort_keys=False))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def trigger(match: str = ALPHA, name: str = "used-alpha", **more: object) -> dict[str, object]:
    return {"name": name, "type": "tool_used", "tool": "Skill", "input_match": match, **more}


def no_trigger(match: str = ALPHA, name: str = "no-alpha") -> dict[str, object]:
    return trigger(match, name, min=0, max=0, arm="both")


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under ``root`` with its mtime and (for files) content."""
    found = {}
    for path in sorted(root.rglob("*")):
        content = path.read_bytes() if path.is_file() else None
        found[str(path.relative_to(root))] = (path.stat().st_mtime_ns, content)
    return found


REFUSED = "the official runner refuses it: "


def read_error(root: Path, where: Path) -> str:
    """Read a case the runner refuses and return the problem, checking what every refusal
    shares: the case is not collected (the others would run), its reason is one line, names
    the case's file it is about, and says the runner refuses it."""
    found = read_plugin_eval(str(root))
    assert found.cases == ()
    (refused,) = found.not_collected
    case = root / refused.folder
    assert refused.reason.startswith(REFUSED), refused.reason
    assert "\n" not in refused.reason
    problem = refused.reason.removeprefix(REFUSED)
    if where != case:
        problem = problem.removeprefix(f"{where.relative_to(case)}: ")
    return problem


def eval_set(tmp_path: Path, *entries: tuple[str, bool]) -> EvalSet:
    return EvalSet(
        str(tmp_path / "alpha" / "evals" / "trigger-eval.json"),
        tuple(EvalEntry(i, query, expected) for i, (query, expected) in enumerate(entries)),
    )


# --- reading -------------------------------------------------------------------------------


def test_case_yaml_trigger_and_no_trigger_cases(tmp_path: Path) -> None:
    case_yaml(tmp_path, "alpha-triggers", "Convert my zebra spreadsheets", runs=2)
    case_yaml(
        tmp_path,
        "no-trigger",
        graders=[no_trigger()],
        execution={"prompt": "What is the capital of France?", "model": "claude-haiku-4-5"},
    )
    found = read_plugin_eval(str(tmp_path))
    assert found.root == str(tmp_path)
    assert found.eval_dir == "evals"
    assert found.cases == (
        TriggerCase(
            "alpha-triggers",
            "evals/alpha-triggers",
            "Convert my zebra spreadsheets",
            "acme:alpha",
            True,
            runs=2,
        ),
        TriggerCase(
            "no-trigger",
            "evals/no-trigger",
            "What is the capital of France?",
            "acme:alpha",
            False,
            model="claude-haiku-4-5",
        ),
    )
    assert found.not_collected == ()


def test_a_pinned_model_is_warned_of_and_an_eval_set_key_named_model_is_not(
    tmp_path: Path,
) -> None:
    """A case's ``execution.model`` is not followed, so the target warns of it; an eval-set
    entry's own "model" key is an extra like any other, neither read nor warned of."""
    write(tmp_path / ".claude-plugin" / "plugin.json", json.dumps({"name": "acme"}))
    write(
        tmp_path / "skills" / "alpha" / "SKILL.md", "---\nname: alpha\ndescription: Zebras.\n---\n"
    )
    rows = [{"query": "convert my zebra spreadsheets", "should_trigger": True, "model": "x"}]
    write(tmp_path / "skills" / "alpha" / "evals" / "trigger-eval.json", json.dumps(rows))
    case_yaml(tmp_path, "haiku", "zebra llamas", execution={"prompt": "zebra llamas", "model": "h"})
    case_yaml(tmp_path, "plain", "plain zebras")
    (target,) = find_targets([str(tmp_path)]).targets
    assert len(target.eval_set.entries) == 3
    pinned = [w for w in target.warnings if "pins execution.model" in w]
    assert pinned == [
        f"case {tmp_path / 'evals' / 'haiku'} pins execution.model h; its trigger item runs on"
        " the session's model (--trigger-model)"
    ]


def test_prompt_md_with_grader_files(tmp_path: Path) -> None:
    folder = tmp_path / "evals" / "group" / "alpha-md"
    write(folder / "prompt.md", "---\nruns: 1\nmax_turns: 1\n---\n\n  Convert my zebras.  \n")
    write(
        folder / "graders" / "used-alpha.md",
        '---\ntype: tool_used\ntool: Skill\ninput_match: \'"skill":"(acme:)?alpha"\'\n---\n',
    )
    write(folder / "graders" / "notes.md", "no frontmatter: skipped, as the runner skips it\n")
    bare = tmp_path / "evals" / "plain"
    write(bare / "prompt.md", "What is the capital of France?\n")
    write(
        bare / "graders" / "no-alpha.md",
        f"---\ntype: tool_used\ntool: Skill\ninput_match: '{ALPHA}'\nmin: 0\nmax: 0\n---\n",
    )
    found = read_plugin_eval(str(tmp_path))
    assert found.cases == (
        TriggerCase(
            "alpha-md", "evals/group/alpha-md", "Convert my zebras.", "acme:alpha", True, 1
        ),
        TriggerCase("plain", "evals/plain", "What is the capital of France?", "acme:alpha", False),
    )


def test_prompt_md_laid_over_case_yaml(tmp_path: Path) -> None:
    """Both in one folder: the runner takes prompt.md's body and frontmatter over case.yaml,
    and adds the grader files to its graders."""
    path = case_yaml(tmp_path, "mixed", "from case.yaml", name="mixed-case")
    write(path.parent / "prompt.md", "---\nname: from-prompt-md\n---\nfrom prompt.md\n")
    write(
        path.parent / "graders" / "second.md",
        f"---\ntype: tool_used\ntool: Skill\ninput_match: '{ALPHA}'\n---\n",
    )
    (case,) = read_plugin_eval(str(tmp_path)).cases
    assert (case.name, case.prompt, case.skill) == (
        "from-prompt-md",
        "from prompt.md",
        "acme:alpha",
    )


def test_results_and_reserved_folders_are_not_cases(tmp_path: Path) -> None:
    case_yaml(tmp_path, "real")
    for reserved in ("results/2026-01-01T00-00-00", "mocks/x", "node_modules/y", ".claude/z"):
        case_yaml(tmp_path, reserved)
    case_yaml(tmp_path, "real/nested-below-a-case")  # a case folder is not searched further
    assert [c.folder for c in read_plugin_eval(str(tmp_path)).cases] == ["evals/real"]


def test_no_eval_dir_means_no_cases_and_another_eval_dir(tmp_path: Path) -> None:
    assert read_plugin_eval(str(tmp_path)).cases == ()
    case_yaml(tmp_path, "x")
    (tmp_path / "evals").rename(tmp_path / "cases")
    assert [c.folder for c in read_plugin_eval(str(tmp_path), "cases").cases] == ["cases/x"]


def test_eval_dir_outside_the_plugin_or_a_file_is_refused(tmp_path: Path) -> None:
    for outside in ("../evals", str(tmp_path / "evals")):
        with pytest.raises(InputError, match="relative path inside the plugin"):
            read_plugin_eval(str(tmp_path), outside)
    write(tmp_path / "evals", "not a folder")
    with pytest.raises(InputError, match="is a file"):
        read_plugin_eval(str(tmp_path))


def test_reading_writes_nothing(tmp_path: Path) -> None:
    case_yaml(tmp_path, "a")
    case_yaml(tmp_path, "b", graders=[{"name": "r", "type": "regex", "pattern": "x"}])
    before = snapshot(tmp_path)
    read_plugin_eval(str(tmp_path))
    assert snapshot(tmp_path) == before


def test_a_pattern_resolved_by_the_names_and_whole_numbers_written_as_floats(
    tmp_path: Path,
) -> None:
    case_yaml(tmp_path, "beta", graders=[trigger(r'"skill":"acme:b[e]ta"', min=1.0)], runs=2.0)
    assert (
        read_plugin_eval(str(tmp_path)).not_collected[0].reason.endswith("does not name one skill")
    )
    (case,) = read_plugin_eval(str(tmp_path), names=["acme:alpha", "acme:beta"]).cases
    assert (case.skill, case.should_trigger, case.runs) == ("acme:beta", True, 2)


# --- what is not collected, and why --------------------------------------------------------

NOT_COLLECTED = {
    "regex": ([{"name": "r", "type": "regex", "pattern": "zebra"}], "no tool_used grader on Skill"),
    "llm": ([{"name": "j", "type": "llm", "criteria": "good"}], "(its graders: j (llm on"),
    "file": ([{"name": "f", "type": "file_exists", "path": "out.md"}], "f (file_exists)"),
    "other-tool": ([trigger(name="t") | {"tool": "Read"}], "t (tool_used on Read)"),
    "any-skill": ([{"name": "t", "type": "tool_used", "tool": "Skill"}], "no input_match"),
    "twice": ([trigger(min=2)], "expects at least 2 calls"),
    "min-0": ([trigger(min=0)], "passes whether or not"),
    "never": ([trigger(min=1, max=0)], 'can never pass: the official runner scores it "expected'),
    "two-skills": (
        [trigger(), trigger('"skill":"acme:beta"', name="b")],
        "different skills (acme:alpha, acme:beta)",
    ),
    "disagree": ([trigger(), no_trigger()], "disagree"),
    "vague": ([trigger("alpha")], 'input_match "alpha" does not name one skill'),
    "skill-named-tool": (
        [trigger(name="t") | {"tool": "acme:alpha"}],
        'write tool: Skill with input_match: \'"skill":"(?:acme:)?alpha"\'',
    ),
}


@pytest.mark.parametrize("folder", sorted(NOT_COLLECTED))
def test_cases_that_are_not_trigger_checks_say_why(tmp_path: Path, folder: str) -> None:
    graders, why = NOT_COLLECTED[folder]
    case_yaml(tmp_path, folder, graders=graders)
    found = read_plugin_eval(str(tmp_path), names=["acme:alpha", "alpha", "acme:beta"])
    assert found.cases == ()
    (skipped,) = found.not_collected
    assert skipped.folder == f"evals/{folder}"
    assert why in skipped.reason
    assert "\n" not in skipped.reason


# Graders as public cases put them beside their Skill grader (a plugin's inline graders: the
# Skill call, commands never run, what the answer and the trace show, a judge).
BESIDE = [
    trigger('"skill"\\s*:\\s*"(?:[\\w-]+:)?alpha"', name="alpha-skill-fired", arm="both"),
    {"name": "nothing-committed", "type": "tool_used", "tool": "Bash", "min": 0, "max": 0},
    {"name": "says-score", "type": "regex", "pattern": "Score ▕", "target": "last_message"},
    {
        "name": "no-secrets",
        "type": "regex",
        "pattern": "ghp_",
        "target": "trace",
        "match": "not_contains",
    },
    {"name": "judge", "type": "llm", "criteria": "Names every finding", "focus": "trace"},
]


def test_a_case_with_graders_beside_its_skill_grader_is_collected_for_that_grader(
    tmp_path: Path,
) -> None:
    """Regex, llm and other tools' graders are outside a trigger test: the case is collected
    for its Skill grader, and the others are listed as not measured here."""
    case_yaml(tmp_path, "mixed", graders=BESIDE)
    names = {"acme:alpha": "acme:alpha", "alpha": "acme:alpha", "acme:beta": "acme:beta"}
    found = read_plugin_eval(str(tmp_path), names=names)
    (case,) = found.cases
    assert (case.skill, case.should_trigger, found.not_collected) == ("acme:alpha", True, ())
    assert case.unmeasured == (
        "nothing-committed (tool_used on Bash)",
        "says-score (regex on last_message)",
        "no-secrets (regex on trace)",
        "judge (llm on trace)",
    )


def test_the_same_graders_as_files_beside_a_prompt_md(tmp_path: Path) -> None:
    """The prose form (``prompt.md`` and ``graders/*.md``, as a security plugin writes its
    cases): the Skill grader's file and the judge's, whose body is its criteria."""
    folder = tmp_path / "evals" / "03-finds-the-variant"
    write(folder / "prompt.md", "---\nmax_turns: 20\nruns: 2\n---\nFind variants of this bug.\n")
    write(
        folder / "graders" / "skill-fired.md",
        '---\ntype: tool_used\ntool: Skill\ninput_match: \'"skill":"(acme:)?alpha"\'\n---\n',
    )
    write(folder / "graders" / "judge.md", "---\ntype: llm\nweight: 2\n---\nFinds all three.\n")
    write(folder / "graders" / "mentions.md", "---\ntype: regex\nflags: im\n---\nvariant\n")
    (case,) = read_plugin_eval(str(tmp_path), names=["acme:alpha", "alpha"]).cases
    assert (case.folder, case.skill, case.runs) == ("evals/03-finds-the-variant", "acme:alpha", 2)
    assert case.unmeasured == ("judge (llm on last_message)", "mentions (regex on last_message)")


def test_an_impossible_grader_is_left_out_and_the_valid_one_kept(tmp_path: Path) -> None:
    """``max: 0`` with the default ``min: 1`` can never pass (the official runner scores it
    "expected 1..0" whatever the model does): named and left out; the case's tool_used on
    Skill is still its trigger check."""
    never = {
        "name": "never-read",
        "type": "tool_used",
        "tool": "Skill",
        "input_match": ALPHA,
        "max": 0,
    }
    case_yaml(tmp_path, "impossible", graders=[trigger(), never])
    (case,) = read_plugin_eval(str(tmp_path), names=["acme:alpha", "alpha"]).cases
    assert case.should_trigger is True
    (note,) = case.notes
    assert note == (
        'grader "never-read" (min 1, max 0) can never pass: the official runner scores it '
        '"expected 1..0"; left out here'
    )


def test_a_skill_grader_without_input_match_in_a_plugin_of_one_skill(tmp_path: Path) -> None:
    """``{tool: Skill, min: 1}`` with no input_match counts any skill's call; in a plugin that
    lists one skill its author means that skill (a security plugin's cases do this): the
    case is that skill's, with a note of the difference; with two skills it names none."""
    case_yaml(
        tmp_path, "fired", graders=[{"name": "skill-fired", "type": "tool_used", "tool": "Skill"}]
    )
    case_yaml(
        tmp_path,
        "not-fired",
        "hello",
        graders=[{"name": "no-skill", "type": "tool_used", "tool": "Skill", "min": 0, "max": 0}],
    )
    found = read_plugin_eval(
        str(tmp_path), names={"acme:alpha": "acme:alpha", "alpha": "acme:alpha"}
    )
    assert [(c.skill, c.should_trigger) for c in found.cases] == [
        ("acme:alpha", True),
        ("acme:alpha", False),
    ]
    assert "the only skill the plugin lists" in found.cases[0].notes[0]
    two = read_plugin_eval(str(tmp_path), names=["acme:alpha", "acme:beta"])
    assert two.cases == () and "no input_match" in two.not_collected[0].reason


def test_a_tool_named_like_a_skill_beside_a_skill_grader_gets_a_hint(tmp_path: Path) -> None:
    named = {"name": "used-alpha-tool", "type": "tool_used", "tool": "alpha"}
    case_yaml(tmp_path, "named", graders=[trigger(), named])
    (case,) = read_plugin_eval(str(tmp_path), names=["acme:alpha", "alpha"]).cases
    (hint,) = case.notes
    assert hint.startswith('grader "used-alpha-tool" checks tool "alpha", a skill\'s name: ')
    assert "which Claude Code does not have, so it never passes" in hint
    assert case.unmeasured == ("used-alpha-tool (tool_used on alpha)",)


def test_settings_a_trigger_item_does_not_reproduce(tmp_path: Path) -> None:
    case_yaml(tmp_path, "history", context={"history_file": "h.jsonl"})
    case_yaml(tmp_path, "system", execution={"prompt": "p", "append_system_prompt": "Be brief"})
    case_yaml(tmp_path, "plugins", plugins=["../other"])
    (tmp_path / "evals" / "other").mkdir()
    reasons = {s.folder: s.reason for s in read_plugin_eval(str(tmp_path)).not_collected}
    assert "history_file" in reasons["evals/history"]  # h.jsonl is not there
    assert "append_system_prompt" in reasons["evals/system"]
    assert "other plugins" in reasons["evals/plugins"]


@pytest.mark.parametrize("entries", [["../.."], "absolute", []], ids=["../..", "absolute", "[]"])
def test_a_plugins_entry_that_is_the_plugin_itself_is_that_plugin(
    tmp_path: Path, entries: list[str] | str
) -> None:
    """The usual form in a plugin's evals/ names the plugin by a path from the case folder;
    the runner loads just that plugin, as with no entry: the case is a trigger check."""
    plugins = [str(tmp_path)] if entries == "absolute" else entries
    case_yaml(tmp_path, "own", plugins=plugins)
    found = read_plugin_eval(str(tmp_path))
    assert [c.folder for c in found.cases] == ["evals/own"]
    assert found.not_collected == ()


def test_a_plugins_entry_the_runner_refuses_is_named(tmp_path: Path) -> None:
    (tmp_path / "plugin").mkdir()
    case_yaml(tmp_path / "plugin", "outside", plugins=[str(tmp_path)])
    case_yaml(tmp_path / "plugin", "missing", plugins=["acme"])
    case_yaml(tmp_path / "plugin", "fine")
    found = read_plugin_eval(str(tmp_path / "plugin"))
    assert [c.folder for c in found.cases] == ["evals/fine"]
    reasons = {s.folder: s.reason for s in found.not_collected}
    assert "outside the plugin" in reasons["evals/outside"]
    assert 'plugins entry "acme" does not exist' in reasons["evals/missing"]


def test_one_refused_case_leaves_the_others_to_run(tmp_path: Path) -> None:
    """Twelve cases, three the runner refuses: nine are read, three named with why."""
    for i in range(9):
        case_yaml(tmp_path, f"good-{i}", prompt=f"make chart number {i}")
    case_yaml(tmp_path, "bad-runs", runs=0)
    case_yaml(tmp_path, "bad-graders", graders=[trigger(), trigger()])  # a name twice
    write(tmp_path / "evals" / "bad-yaml" / "case.yaml", "name: [unclosed\n")
    found = read_plugin_eval(str(tmp_path))
    assert len(found.cases) == 9
    refused = {s.folder: s.reason for s in found.not_collected}
    assert set(refused) == {"evals/bad-runs", "evals/bad-graders", "evals/bad-yaml"}
    assert all(reason.startswith(REFUSED) for reason in refused.values())


def test_the_optional_plugin_prefix_names_the_skill_both_spellings_load() -> None:
    """``"skill":\\s*"(?:[\\w-]+:)?alpha"`` matches acme:alpha and alpha; both load
    acme:alpha, so it names that skill; with two skills behind the names it names none."""
    pattern = '"skill":\\s*"(?:[\\w-]+:)?alpha"'
    names = {"acme:alpha": "acme:alpha", "alpha": "acme:alpha", "acme:beta": "acme:beta"}
    assert skill_of(pattern, names) == "acme:alpha"
    assert skill_of(pattern, {**names, "other:alpha": "other:alpha"}) is None


def test_a_case_for_a_skill_not_found_is_not_collected_when_names_are_given(
    tmp_path: Path,
) -> None:
    case_yaml(tmp_path, "gamma", graders=[trigger('"skill":"acme:gamma"')])
    assert read_plugin_eval(str(tmp_path)).cases[0].skill == "acme:gamma"
    found = read_plugin_eval(str(tmp_path), names=["acme:alpha", "acme:beta"])
    assert found.not_collected == (
        NotCollected(
            "evals/gamma",
            'names skill "acme:gamma", which is not one found (acme:alpha, acme:beta)',
        ),
    )


def test_a_repeated_prompt_keeps_the_first_case(tmp_path: Path) -> None:
    case_yaml(tmp_path, "a-first", "convert my zebras")
    case_yaml(tmp_path, "b-again", " convert my zebras\n", graders=[no_trigger()])
    case_yaml(tmp_path, "c-other-skill", "convert my zebras", graders=[trigger('"skill":"beta"')])
    found = read_plugin_eval(str(tmp_path))
    assert [c.folder for c in found.cases] == ["evals/a-first", "evals/c-other-skill"]
    assert found.not_collected == (
        NotCollected(
            "evals/b-again", 'same prompt as case "a-first" (evals/a-first); kept that one'
        ),
    )


# --- files the runner refuses ----------------------------------------------------------------

VERSION = "schema_version: '1.0'\n"
NAME = "name: x\n"
PROMPT = "execution: {prompt: p}\n"
GRADER = "{name: g, type: tool_used, tool: Skill}"
GRADERS = f"graders: [{GRADER}]\n"
BAD_CASES = {
    "bad YAML": (VERSION + "name: [unclosed\n", "not valid YAML"),
    "no schema": (NAME + PROMPT + GRADERS, "missing required field schema_version"),
    "number schema": ("schema_version: 1.0\n" + NAME, "missing required field schema_version"),
    "newer schema": (
        "schema_version: '2.0'\n" + NAME,
        'schema_version "2.0" requires a newer Claude Code',
    ),
    "no name": (VERSION + PROMPT + GRADERS, "name: Required"),
    "no execution": (VERSION + NAME + GRADERS, "execution: Required"),
    "no prompt": (VERSION + NAME + "execution: {max_turns: 1}\n" + GRADERS, "prompt is required"),
    "blank prompt": (VERSION + NAME + "execution: {prompt: ' '}\n" + GRADERS, "prompt is required"),
    "no graders": (VERSION + NAME + PROMPT + "graders: []\n", "at least 1 element"),
    "same grader twice": (
        VERSION + NAME + PROMPT + f"graders: [{GRADER}, {GRADER}]\n",
        'duplicate grader name "g"',
    ),
    "skill key": (
        VERSION + NAME + PROMPT + "graders: [{name: g, type: tool_used, tool: S, skill: a}]\n",
        "graders.0: Unrecognized key(s) in object: 'skill'",
    ),
    "no tool": (
        VERSION + NAME + PROMPT + "graders: [{name: g, type: tool_used}]\n",
        "graders.0.tool: Required",
    ),
    "bad min": (
        VERSION + NAME + PROMPT + "graders: [{name: g, type: tool_used, tool: S, min: -1}]\n",
        "graders.0.min",
    ),
    "unknown type": (
        VERSION + NAME + PROMPT + "graders: [{name: g, type: vibes}]\n",
        "graders.0.type",
    ),
    "type a list": (
        VERSION + NAME + PROMPT + "graders: [{name: g, type: [tool_used]}]\n",
        "graders.0.type",
    ),
    "too many runs": (
        VERSION + NAME + "runs: 51\n" + PROMPT + GRADERS,
        "runs: Number must be at least 1 and at most 50",
    ),
    "not an object": ("- a list\n", "must be a YAML object"),
    "init template": (
        VERSION
        + NAME
        + "execution: {prompt: 'TODO: describe what the agent should do'}\n"
        + GRADERS,
        "blank `init` template",
    ),
}


def test_a_refused_case_gives_every_reason_and_names_its_grader_files(tmp_path: Path) -> None:
    """The runner lists every schema issue of a case, naming graders by index: all of them
    here, each grader file named."""
    folder = tmp_path / "evals" / "refused"
    write(folder / "prompt.md", "Find the bug.\n")
    write(folder / "graders" / "a-judge.md", "---\ntype: llm\nfocus: answer\n---\nGood.\n")
    write(
        folder / "graders" / "b-regex.md", "---\ntype: regex\ntarget: response\nflags: x\n---\nok\n"
    )
    write(
        folder / "graders" / "c-skill.md",
        f"---\ntype: tool_used\ntool: Skill\ninput_match: '{ALPHA}'\nskill: alpha\n---\n",
    )
    problem = read_error(tmp_path, folder / "prompt.md")
    assert problem == (
        "invalid case.yaml: graders.0.focus: Invalid input (in graders/a-judge.md); "
        "graders.1.target: Invalid input (in graders/b-regex.md); "
        "graders.1.flags: must be JS RegExp flags (d g i m s u v y) (in graders/b-regex.md); "
        "graders.2: Unrecognized key(s) in object: 'skill' (in graders/c-skill.md)"
    )


@pytest.mark.parametrize("label", sorted(BAD_CASES))
def test_a_case_yaml_the_runner_refuses_is_one_line_naming_the_file(
    tmp_path: Path, label: str
) -> None:
    text, problem = BAD_CASES[label]
    path = write(tmp_path / "evals" / "bad" / "case.yaml", text)
    assert problem in read_error(tmp_path, path)


def test_prompt_md_problems(tmp_path: Path) -> None:
    folder = tmp_path / "evals" / "bad"
    prompt = write(folder / "prompt.md", "---\nfoo: 1\n---\nconvert my zebras\n")
    assert 'unknown frontmatter key "foo"' in read_error(tmp_path, prompt)
    write(prompt, "---\nruns: 1\n---\n\n")
    write(
        folder / "graders" / "g.md",
        f"---\ntype: tool_used\ntool: Skill\ninput_match: '{ALPHA}'\n---\n",
    )
    assert "execution.prompt is required" in read_error(tmp_path, prompt)
    write(prompt, "convert my zebras\n")
    grader = write(folder / "graders" / "g.md", "---\ntool: Skill\n---\n")
    assert 'must include "type:"' in read_error(tmp_path, grader)
    write(grader, "---\ntype: tool_used\ntool: [unclosed\n---\n")
    assert "not valid YAML" in read_error(tmp_path, grader)
    write(grader, "---\ntype: tool_used\ntool: Skill\nmax: [1\n---\n")
    assert "at line 5" in read_error(tmp_path, grader)  # counted in the whole file
    write(grader, "---\ntype: tool_used\ntool: Skill\n")
    assert "not closed" in read_error(tmp_path, grader)


def test_an_empty_case_folder_file_is_no_case_definition(tmp_path: Path) -> None:
    path = write(tmp_path / "evals" / "empty" / "case.yaml", "")
    assert "no case definition" in read_error(tmp_path, path.parent)


# --- input_match -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ('"skill":"acme:alpha"', "acme:alpha"),
        ('"skill":"alpha"', "alpha"),
        (r"\"skill\":\"acme:alpha\"", "acme:alpha"),
        (r'"skill"\s*:\s*"acme:alpha"', "acme:alpha"),
        ('"skill":"(acme:)?alpha"', "acme:alpha"),
        ('"skill":"(?:acme:)?alpha"', "acme:alpha"),
        (r'"skill":"acme\:pdf\-tools"', "acme:pdf-tools"),
        ('"skill":"my_skill-2"', "my_skill-2"),
    ],
)
def test_skill_of_reads_the_literal_forms(pattern: str, expected: str) -> None:
    assert skill_of(pattern) == expected
    assert re.search(pattern, json.dumps({"skill": expected}, separators=(",", ":")))


def test_skill_of_an_optional_prefix_prefers_the_listed_spelling() -> None:
    assert skill_of('"skill":"(acme:)?alpha"', ["alpha", "beta"]) == "alpha"
    assert skill_of('"skill":"(acme:)?alpha"', ["acme:alpha", "alpha"]) == "acme:alpha"


@pytest.mark.parametrize(
    "pattern,expected",
    [
        ("acme:beta", "acme:beta"),  # a plain substring: only acme:beta holds it
        ('"skill":"acme:al', None),  # no closing quote: a prefix of two names
        ("alpha", None),  # in acme:alpha and in acme:alphabet
        (r'"skill":"acme:b[e]ta"', "acme:beta"),
        ('"skill":"acme:(alpha|beta)"', None),
        ('"skill":"acme:gamma"', "acme:gamma"),  # a literal names its skill, listed or not
        (".*", None),
        ("(?<name>x)", None),  # JavaScript syntax Python cannot read
    ],
)
def test_skill_of_other_patterns_are_tested_against_the_names(
    pattern: str, expected: str | None
) -> None:
    names = ["acme:alpha", "acme:alphabet", "acme:beta"]
    assert skill_of(pattern, names) == expected


@pytest.mark.parametrize("name", ["acme:alpha", "alpha", "a.b+c", 'we"ird\\name', "x(y)"])
def test_input_match_for_matches_exactly_the_listed_name(name: str) -> None:
    pattern = input_match_for(name)
    call = json.dumps({"skill": name}, separators=(",", ":"))
    assert re.search(pattern, call)
    for other in (name + "x", "x" + name, name[:-1]):
        assert not re.search(pattern, json.dumps({"skill": other}, separators=(",", ":")))
    assert skill_of(pattern) == name or skill_of(pattern, [name]) == name


def test_input_match_for_a_plain_name_is_the_runners_own_form() -> None:
    assert input_match_for("acme:alpha") == ALPHA


# --- as an eval set ---------------------------------------------------------------------------


def test_eval_set_of_cases_in_folder_order(tmp_path: Path) -> None:
    cases = [
        TriggerCase("b", "evals/b", "polish walruses", "acme:alpha", False),
        TriggerCase("a", "evals/a", "convert zebras", "acme:alpha", True, runs=3),
    ]
    made = eval_set_of(cases, str(tmp_path / "evals"))
    assert made.path == str(tmp_path / "evals")
    assert made.entries == (
        EvalEntry(0, "convert zebras", True, {"case": "a", "case_dir": "evals/a"}),
        EvalEntry(1, "polish walruses", False, {"case": "b", "case_dir": "evals/b"}),
    )
    assert made.entries[0].extra == {"case": "a", "case_dir": "evals/a"}
    assert made.meta["skill_name"] == "acme:alpha"


def test_eval_set_of_refuses_mixed_skills_repeats_and_nothing(tmp_path: Path) -> None:
    a = TriggerCase("a", "evals/a", "convert zebras", "acme:alpha", True)
    with pytest.raises(InputError, match="several skills"):
        eval_set_of([a, TriggerCase("b", "evals/b", "x", "acme:beta", True)], "evals")
    with pytest.raises(InputError, match="evals/b repeats the prompt of evals/a"):
        eval_set_of([a, TriggerCase("b", "evals/b", "convert zebras ", "acme:alpha", False)], "e")
    with pytest.raises(InputError, match="no trigger cases"):
        eval_set_of([], "evals")
    lone = TriggerCase("c", "evals/c", "convert \ud800 zebras", "acme:alpha", True)
    with pytest.raises(InputError, match="evals/c: prompt: query is not valid Unicode"):
        eval_set_of([a, lone], "evals")


# --- writing ---------------------------------------------------------------------------------

ODD_QUERIES = (
    ("Convert my zebra spreadsheets into llama reports", True),
    ('it\'s a "quote"\nand a line\ttab  ', False),
    ("  café ☃ 😀 0o17 ", True),
    ("yes", False),
    ("- [x]: {a: b} # not a comment & *alias !tag %", False),
    ("\u2028line separator, \x85 next line, \ufeff BOM", False),
    ("2024-01-01", True),
)


def test_write_then_read_gives_the_same_queries_and_expectations(tmp_path: Path) -> None:
    plugin = tmp_path / "acme"
    source = eval_set(tmp_path, *ODD_QUERIES)
    paths = write_plugin_eval(str(plugin / "evals"), "acme:alpha", source)
    assert [Path(p).parent.name for p in paths] == [
        "acme-alpha-01-trigger",
        "acme-alpha-02-no-trigger",
        "acme-alpha-03-trigger",
        "acme-alpha-04-no-trigger",
        "acme-alpha-05-no-trigger",
        "acme-alpha-06-no-trigger",
        "acme-alpha-07-trigger",
    ]
    found = read_plugin_eval(str(plugin))
    assert found.not_collected == ()
    assert [(c.prompt, c.should_trigger) for c in found.cases] == list(ODD_QUERIES)
    assert {c.skill for c in found.cases} == {"acme:alpha"}
    assert [c.name for c in found.cases] == [Path(p).parent.name for p in paths]
    again = eval_set_of(found.cases, str(plugin / "evals"))
    assert [(e.query, e.should_trigger) for e in again.entries] == list(ODD_QUERIES)


def test_an_exported_case_is_what_the_runner_expects(tmp_path: Path) -> None:
    source = eval_set(tmp_path, ("convert zebras", True), ("polish walruses", False))
    yes, no = write_plugin_eval(str(tmp_path / "evals"), "acme:alpha", source, runs=2)
    text = Path(yes).read_text(encoding="utf-8")
    first = text.splitlines()[0]
    assert first.startswith(MARKER)
    assert "for skill acme:alpha" in first
    assert "from ../../alpha/evals/trigger-eval.json (entry 1)" in first
    assert yaml.safe_load(text) == {
        "schema_version": "1.0",
        "name": "acme-alpha-01-trigger",
        "runs": 2,
        "execution": {"prompt": "convert zebras"},
        "graders": [
            {
                "name": "triggers",
                "type": "tool_used",
                "tool": "Skill",
                "input_match": ALPHA,
                "min": 1,
            }
        ],
    }
    assert "schema_version: '1.0'" in text  # a string, also to a YAML 1.2 reader
    assert "as pytest-skilltrigger --trigger-within=turn reads a run" in text.splitlines()[1]
    assert yaml.safe_load(Path(no).read_text(encoding="utf-8"))["graders"] == [
        {
            "name": "does-not-trigger",
            "type": "tool_used",
            "tool": "Skill",
            "input_match": ALPHA,
            "min": 0,
            "max": 0,
            "arm": "both",
        }
    ]
    assert "runs" not in yaml.safe_load(
        Path(write_plugin_eval(str(tmp_path / "other"), "b", source)[0]).read_text()
    )


def test_a_case_inside_its_plugin_ends_the_run_at_the_skill(tmp_path: Path) -> None:
    """In its plugin's evals/, a case loads the plugin under test and its own small plugin,
    whose hook ends the run once a Skill call names the skill (by any name it loads by); a
    new export replaces both, and the case reads back as the same trigger item."""
    plugin = tmp_path / "acme"
    source = eval_set(tmp_path, ("convert zebras", True), ("polish walruses", False))
    skill = CaseSkill(("alpha",), str(plugin))
    yes, _ = write_plugin_eval(str(plugin / "evals"), "acme:alpha", source, skill=skill)
    case = yaml.safe_load(Path(yes).read_text(encoding="utf-8"))
    assert case["plugins"] == ["../..", "./skilltrigger-stop"]
    stop = Path(yes).parent / "skilltrigger-stop"
    manifest = json.loads((stop / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "skilltrigger-stop"
    hooks = json.loads((stop / "hooks" / "hooks.json").read_text())
    (hook,) = hooks["hooks"]["PostToolUse"]
    assert hook["matcher"] == "Skill"
    command = hook["hooks"][0]["command"]
    assert command.startswith('grep -Eq \'"skill":"/?(acme:alpha|alpha)"\' && echo \'')
    assert '"continue": false' in command
    write_plugin_eval(str(plugin / "evals"), "acme:alpha", source, skill=skill)  # again
    write(plugin / ".claude-plugin" / "plugin.json", json.dumps({"name": "acme"}))
    found = read_plugin_eval(str(plugin), names={"acme:alpha": "acme:alpha"})
    assert found.not_collected == ()
    assert [(c.prompt, c.should_trigger) for c in found.cases] == [
        ("convert zebras", True),
        ("polish walruses", False),
    ]


def test_a_new_export_replaces_ours_and_removes_its_stale_cases(tmp_path: Path) -> None:
    out = tmp_path / "evals"
    first = eval_set(tmp_path, ("one", True), ("two", False), ("three", True))
    write_plugin_eval(str(out), "acme:alpha", first)
    write_plugin_eval(str(out), "acme:beta", eval_set(tmp_path, ("walrus", True)))
    (out / "acme-alpha-03-trigger" / "notes.txt").write_text("the user's own file")
    write_plugin_eval(str(out), "acme:alpha", eval_set(tmp_path, ("uno", False), ("dos", True)))
    assert sorted(p.name for p in out.iterdir()) == [
        "acme-alpha-01-no-trigger",
        "acme-alpha-02-trigger",
        "acme-alpha-03-trigger",
        "acme-beta-01-trigger",
    ]
    assert sorted(p.name for p in (out / "acme-alpha-03-trigger").iterdir()) == ["notes.txt"]
    found = read_plugin_eval(str(tmp_path))
    assert [(c.skill, c.prompt) for c in found.cases] == [
        ("acme:alpha", "uno"),
        ("acme:alpha", "dos"),
        ("acme:beta", "walrus"),
    ]


@pytest.mark.parametrize(
    "existing,problem",
    [
        ("foreign", "not written by pytest-skilltrigger"),
        ("prompt-md", "not written by pytest-skilltrigger"),
        ("other-skill", "holds the export of skill other:alpha"),
        ("file", "exists and is not a case folder"),
        ("group", "not written by pytest-skilltrigger"),
    ],
)
def test_refuses_to_replace_what_is_not_its_own_and_writes_nothing(
    tmp_path: Path, existing: str, problem: str
) -> None:
    out = tmp_path / "evals"
    target = out / "acme-alpha-02-no-trigger"
    if existing == "foreign":
        case_yaml(tmp_path, target.name)
    elif existing == "prompt-md":
        write_plugin_eval(str(out), "acme:alpha", eval_set(tmp_path, ("a", True), ("b", False)))
        write(target / "prompt.md", "convert my zebras\n")
        (out / "acme-alpha-01-trigger" / "case.yaml").unlink()
    elif existing == "other-skill":
        write_plugin_eval(str(out), "other:alpha", eval_set(tmp_path, ("a", True), ("b", True)))
        (out / "other-alpha-02-trigger").rename(target)  # another skill's export, renamed
        (out / "other-alpha-01-trigger" / "case.yaml").unlink()
    elif existing == "file":
        write(target, "a file where a case folder would go")
    else:
        case_yaml(tmp_path, f"{target.name}/nested")
    before = snapshot(tmp_path)
    source = eval_set(tmp_path, ("convert zebras", True), ("polish walruses", False))
    with pytest.raises(InputError) as info:
        write_plugin_eval(str(out), "acme:alpha", source)
    assert problem in info.value.problem
    assert "\n" not in str(info.value)
    assert snapshot(tmp_path) == before


def test_bad_input_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "evals"
    good = eval_set(tmp_path, ("convert zebras", True))
    for name, source, runs, problem in [
        ("acme:alpha", eval_set(tmp_path, ("ok", True), ("   ", False)), None, "query is empty"),
        ("acme:alpha", eval_set(tmp_path), None, "no entries"),
        ("acme alpha", good, None, "not a skill name"),
        ("", good, None, "not a skill name"),
        ("acme:alpha", good, 0, "runs must be"),
    ]:
        with pytest.raises(InputError, match=problem):
            write_plugin_eval(str(out), name, source, runs=runs)
    assert not out.exists()
    write(out, "a file")
    with pytest.raises(InputError) as info:
        write_plugin_eval(str(out), "acme:alpha", good)
    assert info.value.where == str(out)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_refused_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "evals"
    write_plugin_eval(str(out), "acme:alpha", eval_set(tmp_path, ("a", True)))
    locked = out / "acme-alpha-01-trigger"
    locked.chmod(0o555)
    try:
        with pytest.raises(InputError):
            write_plugin_eval(str(out), "acme:alpha", eval_set(tmp_path, ("a", True), ("b", True)))
        assert not (out / "acme-alpha-02-trigger").exists()
    finally:
        locked.chmod(0o755)


def test_two_skills_whose_cases_would_share_folders_are_refused_before_writing(
    tmp_path: Path,
) -> None:
    """``acme:alpha`` and ``acme-alpha`` export under the same folder names: the check of
    the whole export says so, and nothing is written."""
    from pytest_skilltrigger.skills.plugin_eval.write import check_plugin_eval

    out = tmp_path / "exported"
    queries = EvalSet(str(tmp_path / "e.json"), (EvalEntry(0, "convert my zebras", True),))
    check_plugin_eval(str(out), [("acme:alpha", queries), ("acme:beta", queries)])
    with pytest.raises(InputError, match="the cases of acme:alpha and acme-alpha would share"):
        check_plugin_eval(str(out), [("acme:alpha", queries), ("acme-alpha", queries)])
    assert not out.exists()
