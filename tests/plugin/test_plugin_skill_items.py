"""Items of a plugin's skills on the API backend: a Skill call counts when it names what
Claude Code would load (the listed ``plugin:folder``, or a bare name it resolves), a name it
refuses does not, and the JSON and the failure text say which name the model wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI, parse_listing
from tests.helpers import plugin_args

ALPHA = "Convert zebra spreadsheets into llama reports."
GAMMA = "Tune kazoo orchestras before the concert."


def make_plugin(root: Path) -> Path:
    plugin = root / "acme-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "acme"}))
    for folder, name, text, query in [
        ("alpha", "alpha", ALPHA, "convert my zebra spreadsheets into llama reports"),
        ("gamma", "delta", GAMMA, "tune the kazoo orchestras before the concert"),
    ]:
        skill = plugin / "skills" / folder
        (skill / "evals").mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n\nBody.\n")
        evals = [{"query": query, "should_trigger": True}]
        (skill / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    return plugin


def test_bare_names_count_as_the_cli_resolves_them(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path)
    # the model writes bare names: 'alpha' loads acme:alpha (its frontmatter name), 'gamma'
    # is refused (a plugin folder whose frontmatter name is delta)
    fake_api.call_names = {"acme:alpha": "alpha", "acme:gamma": "gamma"}
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(plugin, "-v", "--trigger-runs=1", f"--trigger-json={out}")
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*::acme:alpha?00-convert-my-zebra-spreadsheets-into-llama? PASSED*",
            "*::acme:gamma?00-tune-the-kazoo-orchestras-before-the-con? FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*the model chose instead: skill 'gamma' x1*",
            "*the model called the Skill tool with: 'gamma' x1 (Claude Code refuses this name*",
        ]
    )
    # what the model was shown: the ids, the alias beside gamma's
    names = [name for name, _text in parse_listing(fake_api.requests[0])]
    assert names[:2] == ["acme:alpha", "acme:gamma"]
    report = json.loads(out.read_text())
    rows = {s["skill_name"]: s["results"][0] for s in report["skills"]}
    assert rows["acme:alpha"]["invoked_as"] == {"alpha": 1}
    assert rows["acme:alpha"]["chosen"] == {"skill:acme:alpha": 1}
    assert rows["acme:gamma"]["invoked_as"] == {"gamma": 1}
    assert rows["acme:gamma"]["pass"] is False


def test_the_alias_with_its_plugin_loads_the_skill(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path)
    fake_api.call_names = {"acme:gamma": "acme:delta"}
    result = pytester.runpytest_subprocess(*plugin_args(plugin, "--trigger-runs=1"))
    result.assert_outcomes(passed=2)


def test_a_routing_set_may_expect_a_skill_without_an_eval_set(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """beta has no eval set of its own: the routing entry that expects it is its
    should-trigger entry too (one item more, the same runs: the listing is the folder's),
    and the routing entry counts beta's choices."""
    skills = pytester.path / "skills"
    for name, text in (("alpha", ALPHA), ("beta", GAMMA)):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n")
    (skills / "alpha" / "evals").mkdir()
    evals = [{"query": "convert my zebra spreadsheets into llama reports", "should_trigger": True}]
    (skills / "alpha" / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    routing = [
        {"query": "tune the kazoo orchestras before the concert", "expected_skill": "beta"},
        {"query": "what is the capital of france", "expected_skill": None},
    ]
    (skills / "routing-eval.json").write_text(json.dumps(routing))
    result = pytester.runpytest_subprocess(*plugin_args(skills, "--trigger-runs=1"))
    result.assert_outcomes(passed=4)
    assert "not tested: beta" not in result.stdout.str()
    result.stdout.fnmatch_lines(["skills/beta/SKILL.md .*"])
    assert fake_api.stats["trigger_calls"] == 3  # beta's item shares the routing entry's run
