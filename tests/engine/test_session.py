"""The engine's front door: which backend answers ``ask()``, chosen by the one factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skilltrigger.backends.base import Answer
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.settings import Settings
from tests.engine.test_sampler import ScriptedBackend


class AskingBackend(ScriptedBackend):
    """A caller's own backend, which answers plain questions too."""

    def ask(self, prompt: str, model: str | None = None) -> Answer:
        return Answer(f"answer to {prompt}", Usage(5, 2), 1)


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no configured profile either
    monkeypatch.setenv("PATH", str(tmp_path))  # and no claude CLI to fall back on


def test_without_credentials_the_callers_backend_answers_ask(no_credentials: None) -> None:
    """No API credentials, no CLI: the backend the caller passed in answers the proposals,
    and what it sent is counted under the improve phase."""
    backend = AskingBackend()
    session = TriggerSession(Settings(cache_mode="off"), backend=backend)
    try:
        text, usage = session.ask("a question")
    finally:
        session.close()
    assert text == "answer to a question" and usage == Usage(5, 2)
    assert session.spending()["improve"].calls == 1


def test_with_credentials_a_plain_api_request_answers_ask(
    no_credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an API key the proposals go to the Messages API (cheaper than the trigger
    backend's own way), through a backend of its own that never captures."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    session = TriggerSession(Settings(cache_mode="off"), backend=AskingBackend())
    try:
        from pytest_skilltrigger.backends import BackendParts, make_backend

        asker = make_backend(session.settings, BackendParts("ask"), reuse=session.backend)
    finally:
        session.close()
    assert asker.name == "anthropic" and asker is not session.backend
    assert getattr(asker, "captures", "missing") is None
    asker.close()


def test_a_session_is_a_context_manager_that_closes_on_the_way_out(no_credentials: None) -> None:
    """``with TriggerSession(...) as session``: the store and the threads are released
    when the block ends, as the engine-without-pytest how-to shows."""
    from pytest_skilltrigger.model.context import TriggerContext
    from pytest_skilltrigger.skills.evalset import EvalEntry

    with TriggerSession(Settings(cache_mode="off"), backend=AskingBackend()) as session:
        assert session.lanes is not None
        result = session.submit(TriggerContext("a", "A."), EvalEntry(0, "q", True, {})).result()
        assert result.runs_made > 0
    assert all(lane.sampler._closed for lane in session.lanes)
