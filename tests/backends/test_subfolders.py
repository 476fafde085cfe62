"""Skills of a monorepo's subfolder: offered as the pinned CLI offers them, after a Read of a
file there (announced under ``<folder>:<name>`` on a clash) or in a session started there;
held against the CLI's own requests for two models, and run on both backends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.api.request import build_request
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets
from pytest_skilltrigger.support.errors import InputError
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_request, listing_lines, texts
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

MODELS = ["claude-opus-5-5", "claude-haiku-4-5"]
QUERY = "please check apps/web/app.py"


def skill(folder: Path, name: str, description: str) -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nBody of {name}\n"
    )
    return folder / name


def monorepo(root: Path, clash: bool = True) -> Path:
    """A project (a git checkout) with a root skill, and a subfolder with two skills of its
    own, one of the root skill's name (when ``clash``); the tested one has an eval set."""
    (root / ".git").mkdir(parents=True)
    if clash:
        skill(root / ".claude" / "skills", "deploy", "Release the whole repository.")
    skill(root / ".claude" / "skills", "docs", "Format the project's documents.")
    web = root / "apps" / "web"
    tested = skill(web / ".claude" / "skills", "deploy", "Deploy the web app to staging.")
    skill(web / ".claude" / "skills", "webtool", "Bundle the web app's stylesheets.")
    (tested / "evals").mkdir()
    (tested / "evals" / "trigger-eval.json").write_text(
        json.dumps([{"query": QUERY, "should_trigger": True}])
    )
    (web / "app.py").write_text("print('hello')\n")
    return tested


def context_of(tested: Path, cwd: Path | None = None) -> TriggerContext:
    options = TargetOptions(cwd=str(cwd) if cwd else None)
    return find_targets([str(tested)], options).targets[0].start_context


def announced(body: dict[str, Any]) -> list[str]:
    """The names the request announces as found after the Read (its first list of bare
    names after the Read's result)."""
    after = False
    for text in all_texts(body):
        after = after or text.startswith("1\tprint")
        if after:
            names = re.findall(r"^- ([^\s:]+(?::[^\s:]+)?)$", text, re.M)
            if names:
                return names
    return []


def all_texts(body: dict[str, Any]) -> list[str]:
    """Every text of the request, a tool result's string content included."""
    found = []
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                found += block["content"].split("\n\n")
        found += texts({"messages": [message]})
    return found


def after_query(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The messages after the query: each role and the kinds it holds (the Read's call,
    its result, a system message), thinking and preambles left out."""
    messages = body["messages"]
    start = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    shape = []
    for message in messages[start:]:
        content = message["content"]
        kinds = [b["type"] for b in content if b["type"] in ("tool_use", "tool_result", "text")]
        if message["role"] == "assistant":
            kinds = [k for k in kinds if k == "tool_use"]
        shape.append((message["role"], "+".join(kinds)))
    return shape


@pytest.mark.parametrize("clash", [True, False])
@pytest.mark.parametrize("model", MODELS)
def test_a_subfolder_skill_is_announced_after_a_read(
    tmp_path: Path, model: str, clash: bool
) -> None:
    tested = monorepo(tmp_path / "repo", clash)
    context = context_of(tested)
    name = "apps/web:deploy" if clash else "deploy"
    assert context.skill_name == name
    assert "deploy" not in [s.name for s in context.listing()] or clash  # not at the start
    body = build_request(context, QUERY, model)
    assert announced(body) == [name, "webtool"]
    assert context.resolve(name) == name
    if clash:  # a bare name loads the root skill: not a trigger of the nested one
        assert context.resolve("deploy") == "deploy" != context.skill_name


@pytest.mark.slow
@pytest.mark.parametrize("clash", [True, False])
@pytest.mark.parametrize("model", MODELS)
def test_the_cli_announces_them_where_the_builtin_request_does(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
    clash: bool,
) -> None:
    """A root session whose model reads a file under the subfolder: the pinned CLI's next
    request and the builtin one hold the same messages after the query (the Read, its
    result, for the 5.x models a system message), announce the same names, and neither
    lists the subfolder's skills at the start."""
    tested = monorepo(tmp_path / "repo", clash)
    fake_api.script(QUERY, ["tool:Read", "text"])
    body = cli_request(
        claude_bin,
        fake_api,
        tmp_path / "repo",
        tmp_path / "home",
        query=QUERY,
        model=model,
        args=["--max-turns", "3"],
        last=True,
    )
    builtin = build_request(context_of(tested), QUERY, model)
    assert after_query(body) == after_query(builtin)
    assert announced(body) == announced(builtin)
    first = [line.split(":")[0] for line in listing_lines(body)]
    assert "- webtool" not in first and ("- deploy" in first) == clash


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_a_session_started_in_the_subfolder_lists_it_first(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    """``--trigger-cwd``: the subfolder's skills are listed at the start, before the
    root's, and the root skill of the same name is not listed at all (the CLI's order)."""
    tested = monorepo(tmp_path / "repo")
    web = tmp_path / "repo" / "apps" / "web"
    body = cli_request(claude_bin, fake_api, web, tmp_path / "home", model=model)
    context = context_of(tested, cwd=web)
    ours = [s.name for s in context.own_listing()]
    cli = [line[2:].split(":")[0] for line in listing_lines(body)]
    assert [n for n in cli if n in ours] == ours == ["deploy", "webtool", "docs"]
    assert context.skill_name == "deploy" and context.resolve("deploy") == "deploy"


@pytest.mark.slow
def test_both_backends_reach_the_subfolder_skill_alike(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The claude-code backend lets the Read through and takes the next choice (two
    requests, counted by the server), in a workspace laid out as the project; the scoped
    name triggers, the bare name reaches the root skill and does not; a session started in
    the subfolder triggers on the bare name. The builtin request reads the same."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    tested = monorepo(tmp_path / "repo")
    context = context_of(tested)
    started_in = context_of(tested, cwd=tmp_path / "repo" / "apps" / "web")
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    api = AnthropicBackend(model="claude-opus-5-5")
    try:
        verdicts = []
        for chosen in ["skill:apps/web:deploy", "skill:deploy"]:
            fake_api.script(QUERY, ["tool:Read", chosen])
            seen = len(fake_api.requests)
            cli = backend.run(context, QUERY)
            assert len(fake_api.requests) - seen == 2  # the Read, then the choice
            fake_api.script(QUERY, [chosen])
            builtin = api.run(context, QUERY)
            verdicts.append((cli.status, cli.chosen, builtin.status, builtin.chosen))
        fake_api.script(QUERY, ["skill:deploy"])
        cwd_run = backend.run(started_in, QUERY)
        cwd_builtin = api.run(started_in, QUERY)
    finally:
        backend.close()
        api.close()
    assert verdicts == [
        ("triggered", "skill:apps/web:deploy", "triggered", "skill:apps/web:deploy"),
        ("not_triggered", "skill:deploy", "not_triggered", "skill:deploy"),
    ]
    assert cwd_run.status == cwd_builtin.status == "triggered"


def test_bad_subfolder_input_is_one_line(tmp_path: Path) -> None:
    tested = monorepo(tmp_path / "repo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for cwd, problem in [
        (outside, "outside the project"),
        (tmp_path / "repo" / "apps", "none of the collected skills"),
        (tmp_path / "nowhere", "not a folder"),
    ]:
        with pytest.raises(InputError, match=problem) as raised:
            context_of(tested, cwd=cwd)
        assert "\n" not in str(raised.value)
    (tmp_path / "repo" / "apps" / "web" / "app.py").unlink()
    with pytest.raises(InputError, match="holds no file to read"):
        context_of(tested)


def test_a_pytest_run_tests_the_subfolder_skill_and_a_rerun_makes_no_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A bare name reaching the root skill fails the item, and the failure says how the
    session reached the skill and what the bare name loads; the same run again is served
    from the store without a call, with the same verdict."""
    tested = monorepo(pytester.path / "repo")
    fake_api.script(QUERY, ["skill:deploy"])
    store = pytester.path / "store.db"
    args = plugin_args(tested, "-v", f"--trigger-store={store}")
    first = pytester.runpytest_subprocess(*args)
    first.stdout.fnmatch_lines(
        [
            "*deploy*FAILED*",
            "*the model chose instead: skill 'deploy'*",
            "*found after a Read of apps/web/app.py (a Skill call naming 'deploy' loads the "
            "project's own 'deploy', not this one)*",
            "*missed 1 of 1 should-trigger queries; chosen instead: skill 'deploy' x*",
        ]
    )
    calls = fake_api.stats["calls"]
    assert calls > 0
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(failed=1)
    assert fake_api.stats["calls"] == calls


@pytest.mark.slow
@pytest.mark.parametrize("model", MODELS)
def test_capture_mode_records_the_request_after_the_read(
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    """The recorder answers the CLI's first request with a Read of the file under the
    subfolder; the request after it, which announces the subfolder's skills, is the one
    replayed, with the query in its place."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    context = context_of(monorepo(tmp_path / "repo"))
    backend = ClaudeCodeBackend(model=model, claude_bin=claude_bin)
    try:
        captured = backend.capture(context)
    finally:
        backend.close()
    body = captured.template().for_query(QUERY).params
    reads = [
        b
        for m in body["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b.get("type") == "tool_use" and b.get("name") == "Read"
    ]
    assert [r["input"]["file_path"] for r in reads] == ["apps/web/app.py"]
    assert announced(body) == ["apps/web:deploy", "webtool"]


def test_the_json_says_how_the_session_reached_the_skill(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    tested = monorepo(pytester.path / "repo")
    fake_api.script(QUERY, ["skill:apps/web:deploy"])
    out = pytester.path / "out.json"
    pytester.runpytest_subprocess(*plugin_args(tested, f"--trigger-json={out}"))
    (skill,) = json.loads(out.read_text())["skills"]
    assert skill["subfolder"] == {
        "folder": "apps/web",
        "session": "root, after a Read",
        "read": "apps/web/app.py",
        "called_as": "apps/web:deploy",
    }
    assert skill["summary"]["passed"] == 1
