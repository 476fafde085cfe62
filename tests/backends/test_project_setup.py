"""The project's own setup: read before any call, copied into the claude-code backend's
workspace, and CLAUDE.md placed in the builtin request where the pinned CLI puts it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.api.request import MODE_TEXTS, build_request
from pytest_skilltrigger.backends.capture import CaptureError, Captures
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.backends.claude_code.workspace import install_project
from pytest_skilltrigger.backends.prompt_hooks import PromptHooks, prompt_hook_commands
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.context import ProjectSetup, TriggerContext
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.skills.project_setup import read_project_setup
from pytest_skilltrigger.support.errors import InputError
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_request, texts
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill

INSTRUCTIONS = "Always answer in French. The build runs with make; never call npm."
CONTEXT = TriggerContext("pdf", "Merge and split PDF files.")


def first_user_texts(body: dict[str, Any]) -> list[str]:
    content = body["messages"][0]["content"]
    return [content] if isinstance(content, str) else [b.get("text", "") for b in content]


def order(texts: list[str]) -> list[str]:
    """Which of CLAUDE.md, the listing and the query come first in the first user message."""
    marks = {"claude.md": INSTRUCTIONS, "listing": "- pdf", "query": "xyzzy"}
    found = []
    for text in texts:
        found += [name for name, mark in marks.items() if mark in text and name not in found]
    return found


def lay_out(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "CLAUDE.md").write_text(INSTRUCTIONS + "\n")
    (root / ".claude" / "hooks").mkdir(parents=True)
    (root / ".claude" / "hooks" / "greet.sh").write_text("#!/bin/sh\necho hello\n")
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {}}))
    return root


def test_the_setup_is_read_with_its_files(tmp_path: Path) -> None:
    setup = read_project_setup(str(lay_out(tmp_path)))
    assert setup.claude_md == INSTRUCTIONS + "\n"
    assert [name for name, _ in setup.files] == [
        ".claude/settings.json",
        ".mcp.json",
        ".claude/hooks/greet.sh",
    ]
    assert (
        CONTEXT.key()
        != TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup).key()
    )


def test_nothing_to_set_up_or_a_bad_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no CLAUDE\.md, \.claude/settings\.json or \.mcp\.json"):
        read_project_setup(str(tmp_path))
    (tmp_path / ".mcp.json").write_text("[1, 2")
    with pytest.raises(InputError, match=r"\.mcp\.json: is not valid JSON"):
        read_project_setup(str(tmp_path))


def test_the_backends_workspace_holds_the_setup_with_its_servers_enabled(tmp_path: Path) -> None:
    setup = read_project_setup(str(lay_out(tmp_path / "source")))
    project = tmp_path / "run" / "project"
    project.mkdir(parents=True)
    install_project(project, setup)
    assert (project / "CLAUDE.md").read_text() == INSTRUCTIONS + "\n"
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["enableAllProjectMcpServers"] is True and "hooks" in settings
    assert (project / ".claude" / "hooks" / "greet.sh").stat().st_mode & 0o111


@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_plan_mode_adds_its_section_after_the_listing(model: str) -> None:
    body = json.dumps(
        build_request(
            TriggerContext(CONTEXT.skill_name, CONTEXT.description, permission_mode="plan"),
            "q",
            model,
        )
    )
    assert MODE_TEXTS["plan"] in body
    assert body.index(MODE_TEXTS["plan"]) > body.index("- pdf: Merge")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_claude_md_sits_where_the_pinned_cli_puts_it(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    project = tmp_path / "project"
    folder = project / ".claude" / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\ndescription: {CONTEXT.description}\n---\nx\n")
    (project / "CLAUDE.md").write_text(INSTRUCTIONS + "\n")
    cli = cli_request(claude_bin, fake_api, project, tmp_path / "home", query="xyzzy", model=model)
    setup = read_project_setup(str(project))
    context = TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup)
    ours = build_request(context, "xyzzy", model)
    assert order(first_user_texts(cli)) == order(first_user_texts(ours))
    # at the front of the first user message; for 4.x among the reminders, after the listing
    expected = (
        ["claude.md", "query"] if model == "claude-opus-5-5" else ["listing", "claude.md", "query"]
    )
    assert order(first_user_texts(ours)) == expected


def test_a_project_with_nothing_to_set_up_is_a_usage_error(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these pdfs", True)])
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "--trigger-setup=project"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trigger-setup=project: * has no CLAUDE.md*"])
    assert fake_api.stats["calls"] == 0


def _listing_texts(body: dict[str, Any]) -> list[str]:
    """The texts of the message that holds the listing, block by block."""
    for message in body["messages"]:
        content = message["content"]
        texts = [content] if isinstance(content, str) else [b.get("text", "") for b in content]
        if any("- pdf" in t for t in texts):
            return texts
    raise AssertionError("no listing in the request")


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_plan_mode_adds_to_the_request_after_the_listing_as_in_the_pinned_cli(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    """The CLI in plan mode sends what it sends in the default mode, with more after the
    listing, and the builtin request adds its plan-mode text after the listing too."""
    project = tmp_path / "project"
    folder = project / ".claude" / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\ndescription: {CONTEXT.description}\n---\nx\n")
    bodies = [
        cli_request(claude_bin, fake_api, project, tmp_path / f"h{n}", model=model, args=args)
        for n, args in enumerate(([], ["--permission-mode", "plan"]))
    ]
    default, plan = ("\n".join(_listing_texts(b)) for b in bodies)
    differ = next(i for i, (a, b) in enumerate(zip(default, plan, strict=False)) if a != b)
    assert differ > plan.index("- pdf")  # the same up to the listing, more after it
    ours = TriggerContext(CONTEXT.skill_name, CONTEXT.description, permission_mode="plan")
    text = "\n".join(_listing_texts(build_request(ours, "q", model)))
    assert text.index(MODE_TEXTS["plan"]) > text.index("- pdf")


HOOK = 'import json, sys\nprint("HOOKTAG " + json.load(sys.stdin)["prompt"].upper())\n'


def hooked_project(root: Path, script: str = HOOK) -> Path:
    """A project with a skill, CLAUDE.md and a UserPromptSubmit hook whose output depends on
    the prompt."""
    folder = root / ".claude" / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\ndescription: {CONTEXT.description}\n---\nx\n")
    (root / "CLAUDE.md").write_text(INSTRUCTIONS + "\n")
    (root / ".claude" / "hooks").mkdir()
    (root / ".claude" / "hooks" / "tag.py").write_text(script)
    command = {"type": "command", "command": "python3 .claude/hooks/tag.py"}
    settings = {"hooks": {"UserPromptSubmit": [{"hooks": [command]}]}}
    (root / ".claude" / "settings.json").write_text(json.dumps(settings))
    return root


def hook_order(body: dict[str, Any]) -> list[str]:
    """Where the listing, the hook's output, CLAUDE.md and the query come, in the request."""
    marks = {
        "listing": "- pdf",
        "hook": "HOOKTAG XYZZY",
        "claude.md": INSTRUCTIONS,
        "query": "xyzzy",
    }
    found: list[str] = []
    for text in texts(body):
        for name, mark in marks.items():
            if mark in text and name not in found:
                found.append(name)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_the_builtin_context_runs_the_prompt_hook_and_places_it_as_the_cli_does(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    model: str,
) -> None:
    """The hook is given the prompt as the CLI gives it, and what it prints goes after the
    listing, before the date and CLAUDE.md (for the 4.x models), as in the CLI's request;
    the builtin backend runs it per query, in a copy of the project, and sends its output."""
    project = hooked_project(tmp_path / "project")
    cli = cli_request(claude_bin, fake_api, project, tmp_path / "home", query="xyzzy", model=model)
    setup = read_project_setup(str(project))
    context = TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup)
    backend = AnthropicBackend(model=model)
    try:
        seen = len(fake_api.requests)
        outcome = backend.run(context, "xyzzy")
        sent = fake_api.requests[seen]
    finally:
        backend.close()
    assert outcome.status != "error"
    assert hook_order(sent) == hook_order(cli)
    assert hook_order(sent).index("hook") > hook_order(sent).index("listing")
    assert not list(project.glob("**/transcript.jsonl"))  # nothing written in the project


def test_a_failing_prompt_hook_is_an_error_without_a_call(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    project = hooked_project(tmp_path / "project", "import sys\nsys.exit(2)\n")
    setup = read_project_setup(str(project))
    context = TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup)
    backend = AnthropicBackend(model="claude-opus-5-5")
    try:
        outcome = backend.run(context, "xyzzy")
    finally:
        backend.close()
    assert outcome.status == "error" and "blocked the prompt" in (outcome.error or "")
    assert fake_api.stats["calls"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("model", ["claude-opus-5-5", "claude-haiku-4-5"])
def test_capture_mode_carries_the_projects_mcp_tools_and_instructions(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    """The project's .mcp.json server, started by the CLI in the run's workspace: its tool
    joins the deferred tools as ``mcp__<server>__<tool>`` and its instructions come before
    the skill listing, in the request capture mode replays (the builtin context cannot)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    server = Path(__file__).with_name("mcp_stdio_server.py")
    root = tmp_path / "project"
    root.mkdir()
    servers = {"mcpServers": {"ledger": {"command": sys.executable, "args": [str(server)]}}}
    (root / ".mcp.json").write_text(json.dumps(servers))
    context = TriggerContext("pdf", CONTEXT.description, project=read_project_setup(str(root)))
    backend = ClaudeCodeBackend(model=model, claude_bin=claude_bin)
    try:
        body = json.dumps(backend.capture(context).body)
    finally:
        backend.close()
    assert "mcp__ledger__lookup_invoice" in body
    assert body.index("LEDGER-INSTRUCTIONS") < body.index("- pdf: ")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("code", "said"), [(2, "hook blocked the prompt"), (1, "hook failed (exit 1)")]
)
def test_a_failing_hook_under_the_cli_is_an_error_never_a_miss(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
    said: str,
) -> None:
    """The CLI answers nothing for a blocked prompt, and goes on after a failing hook: the
    claude-code backend reads the hook's event and makes the run an error instead."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    project = hooked_project(tmp_path / "project", f"import sys\nsys.exit({code})\n")
    setup = read_project_setup(str(project))
    context = TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup)
    backend = ClaudeCodeBackend(timeout=60, claude_bin=claude_bin)
    try:
        outcome = backend.run(context, "merge these pdf files")
    finally:
        backend.close()
    assert outcome.status == "error" and said in (outcome.error or "")
    if code == 2:  # a blocked prompt is never sent (after a failed hook the CLI may be)
        assert fake_api.stats["calls"] == 0


@pytest.mark.slow
def test_a_server_that_fails_to_start_under_the_cli_is_an_error(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its tools and instructions would be missing from what the model is shown: the run
    is an error, not a verdict on a session the project does not have."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    root.mkdir()
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"broken": {"command": "false"}}}))
    context = TriggerContext("pdf", CONTEXT.description, project=read_project_setup(str(root)))
    backend = ClaudeCodeBackend(timeout=60, claude_bin=claude_bin)
    try:
        outcome = backend.run(context, "merge these pdf files")
        with pytest.raises(CaptureError, match="MCP server broken failed to start"):
            backend.capture(context)  # capture mode would replay a request without it
    finally:
        backend.close()
    assert outcome.status == "error"
    assert "MCP server broken failed to start" in (outcome.error or "")


def test_a_batch_carries_each_querys_hook_output_and_capture_mode_refuses_hooks(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The hooks' output is part of the request wherever it is built: a batch made ahead
    sends each query's own; capture mode, which replays one request, says it cannot."""
    setup = read_project_setup(str(hooked_project(tmp_path / "project")))
    context = TriggerContext(CONTEXT.skill_name, CONTEXT.description, project=setup)
    entries = [EvalEntry(0, "xyzzy one", True), EvalEntry(1, "xyzzy two", False)]
    session = TriggerSession(Settings(cache_mode="off", batch=True, batch_poll=0.01))
    try:
        session.sample_ahead([(context, e, session.plan) for e in entries])
    finally:
        session.close()
    sent = [json.dumps(p) for p in fake_api.batch_requests_log]
    assert sent and all(("HOOKTAG XYZZY ONE" in s) != ("HOOKTAG XYZZY TWO" in s) for s in sent)
    assert fake_api.stats["trigger_calls"] == 0
    capturing = AnthropicBackend(captures=Captures(lambda: pytest.fail("no CLI is needed")))
    try:
        with pytest.raises(CaptureError, match="UserPromptSubmit hooks add text"):
            capturing.template(context)
    finally:
        capturing.close()


def test_prompt_hooks_are_read_and_run_as_the_cli_runs_them(tmp_path: Path) -> None:
    """Settings whose hooks are not as the CLI reads them have none (never a crash); a hook
    is given the session's permission mode, and each query and mode is run once."""
    for hooks in ([], {"UserPromptSubmit": "x"}, {"UserPromptSubmit": [{"hooks": "x"}]}):
        odd = ProjectSetup(
            str(tmp_path), files=((".claude/settings.json", json.dumps({"hooks": hooks})),)
        )
        assert prompt_hook_commands(odd) == []
    script = (
        'import json, sys\nd = json.load(sys.stdin)\nprint(d["permission_mode"], d["prompt"])\n'
    )
    setup = read_project_setup(str(hooked_project(tmp_path / "project", script)))
    hooks = PromptHooks(setup)
    try:
        assert hooks.output("q", "plan") == "plan q" and hooks.output("q") == "default q"
        assert len(hooks._outputs) == 2
    finally:
        hooks.close()
