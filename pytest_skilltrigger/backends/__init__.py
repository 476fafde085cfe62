"""Trigger backends and how one is chosen.

``auto`` picks the Messages API when credentials are configured, else the Claude Code CLI when
``claude`` is on PATH; with neither, :class:`BackendUnavailable` says what to set.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from typing import TYPE_CHECKING

from pytest_skilltrigger.backends.base import BackendUnavailable, TriggerBackend
from pytest_skilltrigger.engine.settings import DEFAULT_MODEL, Settings

if TYPE_CHECKING:
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
    from pytest_skilltrigger.backends.claude_code.capture import Captures
    from pytest_skilltrigger.engine.store import ResultStore

NO_BACKEND = (
    "no trigger backend: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for the Messages API, "
    "or install the `claude` CLI (Claude Code)"
)


def make_backend(
    settings: Settings, *, store: ResultStore | None = None, write_store: bool = True
) -> TriggerBackend:
    """Create the backend the settings ask for, or raise :class:`BackendUnavailable`.
    ``store`` is the session's result store, which also keeps captured CLI requests;
    ``write_store`` is false where nothing may be stored (an xdist worker): captures are
    then read from it but not added."""
    choice = settings.backend
    if choice == "auto":
        from pytest_skilltrigger.backends.api.backend import credentials_configured

        if credentials_configured():
            choice = "anthropic"
        elif settings.batch:
            raise BackendUnavailable(
                "--trigger-batch needs Messages API credentials: set ANTHROPIC_API_KEY "
                "(or ANTHROPIC_AUTH_TOKEN)"
            )
        elif shutil.which(settings.claude_bin or "claude"):
            choice = "claude-code"
        else:
            raise BackendUnavailable(NO_BACKEND)
    if choice == "anthropic":
        from pytest_skilltrigger.backends.api.backend import AnthropicBackend

        return AnthropicBackend(
            settings.resolved_model(DEFAULT_MODEL),
            timeout=settings.timeout,
            captures=_captures(settings, store, write_store),
        )
    return _cli(settings)


def _cli(settings: Settings) -> ClaudeCodeBackend:
    """The Claude Code backend the settings describe (it also captures requests)."""
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend

    return ClaudeCodeBackend(
        model=settings.resolved_model("") or None,  # None: the CLI's own default
        timeout=settings.timeout,
        claude_bin=settings.claude_bin,
    )


def _captures(
    settings: Settings, store: ResultStore | None, write_store: bool
) -> Captures | None:
    """The installed CLI's requests to replay (``--trigger-context``), or None for the
    builtin context: ``auto`` captures when a ``claude`` binary is found."""
    wanted = settings.trigger_context
    found = shutil.which(settings.claude_bin or "claude")
    if wanted == "builtin" or (wanted == "auto" and not found):
        return None
    if not found:
        wanted_bin = settings.claude_bin or "claude"
        raise BackendUnavailable(
            f"--trigger-context claude-code: no claude CLI found ({wanted_bin} on PATH or "
            "--claude-bin)"
        )
    from pytest_skilltrigger.backends.claude_code.capture import Captures

    return Captures(lambda: _cli(settings), store, write=write_store)


def make_asker(settings: Settings, backend: TriggerBackend) -> TriggerBackend:
    """The backend that answers ``ask()`` (the optimizer's proposals) for a session whose
    trigger runs go to ``backend``.

    The Messages API whenever credentials are configured (a plain request is cheaper and
    faster there than a CLI process), else the trigger backend itself: a user with only a
    Claude Code login still gets proposals, through the CLI.
    """
    if backend.name == "anthropic":
        return backend
    from pytest_skilltrigger.backends.api.backend import credentials_configured

    if credentials_configured():
        return make_backend(replace(settings, backend="anthropic", trigger_context="builtin"))
    return backend


__all__ = ["NO_BACKEND", "BackendUnavailable", "TriggerBackend", "make_asker", "make_backend"]
