"""Each realistic context run on both backends against the stand-in: the claude-code
backend's CLI, given the context as a user has it (rivals in its HOME, the project's
CLAUDE.md, the history it resumes), and the builtin request reach the same verdicts. The
stand-in reads the listing each request shows, so a context that hides the skill's text
(a crowd past the budget) shows in both."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.model.context import ProjectSetup, TriggerContext
from pytest_skilltrigger.skills.history import history_text
from pytest_skilltrigger.skills.project_setup import read_project_setup
from pytest_skilltrigger.skills.rivals import crowd_context
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.backends.test_project_setup import hooked_project
from tests.fake_messages_api import FakeMessagesAPI

PDF = TriggerContext("pdf", "Merge, split and rotate PDF files and extract their pages.")
QUERIES = ["merge these pdf files and rotate the pages", "plan a birthday party for my niece"]
EARLIER = [
    {"role": "user", "content": "I have a folder of scanned invoices"},
    {"role": "assistant", "content": "I can help with those. What would you like?"},
]
CONTEXTS = {
    "crowd 10, opus-5-5": ("claude-opus-5-5", crowd_context(PDF, 10)),
    "crowd 40, haiku-4-5": ("claude-haiku-4-5", crowd_context(PDF, 40)),
    "CLAUDE.md": ("claude-opus-5-5", PDF),  # with the project set below, in tmp_path
    "prompt hook": ("claude-haiku-4-5", PDF),  # likewise
    "history": ("claude-haiku-4-5", PDF.with_history(history_text(EARLIER))),
    "plan mode": ("claude-opus-5-5", PDF.in_mode("plan")),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONTEXTS))
def test_both_backends_reach_the_same_verdicts(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    model, context = CONTEXTS[name]
    if name == "CLAUDE.md":
        setup = ProjectSetup(str(tmp_path), "Answer briefly. The project builds with make.\n")
        context = TriggerContext(PDF.skill_name, PDF.description, project=setup)
    if name == "prompt hook":
        setup = read_project_setup(str(hooked_project(tmp_path / "project")))
        context = TriggerContext(PDF.skill_name, PDF.description, project=setup)
    cli = ClaudeCodeBackend(model=model, timeout=90, claude_bin=claude_bin)
    api = AnthropicBackend(model=model)
    try:
        verdicts = [(cli.run(context, q).chosen, api.run(context, q).chosen) for q in QUERIES]
    finally:
        cli.close()
        api.close()
    assert all(a == b for a, b in verdicts), verdicts
    if name != "crowd 40, haiku-4-5":  # there the skill is a bare name: nothing to match
        assert verdicts[0][0] == "skill:pdf"
    assert verdicts[1][0] != "skill:pdf"
