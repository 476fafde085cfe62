"""Plugin skills against the pinned CLI: a plugin with two skills beside a project's skills
is listed the same way by the builtin request, the captured request and the CLI's own, and a
Skill call on ``acme:alpha`` is alpha's trigger on both backends.

The fake Messages API answers with the listed name of the skill whose description matches
the query (its keyword model), as a model does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.request import listing_text
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets
from pytest_skilltrigger.skills.neighbours import load_installed
from tests.backends import test_claude_code_cli
from tests.backends.test_claude_code_cli import first_turns
from tests.fake_messages_api import LISTING_HEADER_START, FakeMessagesAPI

pytestmark = pytest.mark.slow
claude_bin = test_claude_code_cli.claude_bin  # the pinned CLI, installed on first use

ALPHA = "Convert zebra spreadsheets into llama reports."
QUERY = "please convert my zebra spreadsheets into llama reports"


def write_skill(folder: Path, description: str, name: str | None = None) -> None:
    folder.mkdir(parents=True)
    text = f"---\nname: {name or folder.name}\ndescription: {description}\n---\n\nBody.\n"
    (folder / "SKILL.md").write_text(text, encoding="utf-8")


def make_session(root: Path) -> tuple[Path, Path]:
    """A project with two skills (one whose frontmatter names it otherwise) and plugin
    ``acme`` (folder ``acme-plugin``) with alpha, which has an eval set, and beta."""
    project = root / "work" / ".claude" / "skills"
    write_skill(project / "proj", "Feed the office cactus every morning.")
    write_skill(project / "foo", "Count the ocelots in the barn.", name="bar")
    plugin = root / "acme-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "acme"}))
    write_skill(plugin / "skills" / "alpha", ALPHA)
    write_skill(plugin / "skills" / "beta", "Polish walrus invoices until they shine.")
    evals = [
        {"query": QUERY, "should_trigger": True},
        {"query": "turn these zebra spreadsheets into a llama report", "should_trigger": True},
        {"query": "what is the capital of france", "should_trigger": False},
    ]
    (plugin / "skills" / "alpha" / "evals").mkdir()
    (plugin / "skills" / "alpha" / "evals" / "trigger-eval.json").write_text(json.dumps(evals))
    return project, plugin


def skill_lines(text: str) -> list[str]:
    """The listing lines of the skills section in ``text`` (continuation lines dropped)."""
    after = text[text.index(LISTING_HEADER_START) :].split("\n")[1:]
    while after and not after[0].strip():
        after.pop(0)
    end = next((i for i, line in enumerate(after) if not line.strip()), len(after))
    return [line for line in after[:end] if line.startswith("- ")]


def request_lines(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body["messages"]:
        content = message["content"]
        blocks = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        texts += [t for t in blocks if LISTING_HEADER_START in t]
    return skill_lines(texts[0])


def test_builtin_captured_and_cli_list_the_same_lines_in_the_same_order(
    fake_api: FakeMessagesAPI, claude_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project, plugin = make_session(tmp_path)
    user = tmp_path / "user-skills"
    write_skill(user / "zed", "Sharpen the pencils on the desk.")
    options = TargetOptions(installed=load_installed([str(user)]))
    (target,) = find_targets([str(project), str(plugin)], options).targets
    context: TriggerContext = target.start_context
    ours = [s.line for s in context.listing() if s not in context.generic_competitors]
    assert ours == [
        "- zed: Sharpen the pencils on the desk.",  # the user's, first
        "- foo (bar): Count the ocelots in the barn.",
        "- proj: Feed the office cactus every morning.",
        f"- acme:alpha: {ALPHA}",
        "- acme:beta: Polish walrus invoices until they shine.",
    ]
    assert skill_lines(listing_text(context))[: len(ours)] == ours
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        outcome = backend.run(context, QUERY)
        captured = backend.capture(context)
    finally:
        backend.close()
    assert (outcome.status, outcome.chosen) == ("triggered", "skill:acme:alpha"), outcome.error
    cli_body = first_turns(fake_api)[0]
    assert request_lines(cli_body)[: len(ours)] == ours
    assert request_lines(captured.body)[: len(ours)] == ours
    # the workspace loaded the plugin as a plugin: the CLI says so in its init event
    assert "acme:alpha" in backend.observed_listings[0]


@pytest.mark.parametrize(
    "backend,context",
    [("anthropic", "builtin"), ("anthropic", "claude-code"), ("claude-code", "claude-code")],
)
def test_a_call_on_the_listed_name_passes_the_plugin_skills_items(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    claude_bin: str,
    backend: str,
    context: str,
) -> None:
    project, plugin = make_session(pytester.path)
    json_path = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-v",
        f"--trigger-skill-path={project}",
        f"--trigger-skill-path={plugin}",
        f"--trigger-backend={backend}",
        *([f"--trigger-context={context}"] if backend == "anthropic" else []),
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-confidence=off",
        "--trigger-runs=1",
        "--trigger-cache=off",
        "--trigger-timeout=90",
        f"--trigger-json={json_path}",
        timeout=300,
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*no eval set, so listed but not tested: foo, proj, acme:beta*",
            "*::acme:alpha?00-please-convert-my-zebra-spreadsheets-int? PASSED*",
        ]
    )
    report = json.loads(json_path.read_text())
    (skill,) = report["skills"]
    assert skill["skill_name"] == "acme:alpha"
