"""Trigger backends and the one factory that chooses and makes them.

Every backend has ``run()`` (one trigger run) and ``ask()`` (a plain question); the factory
makes the one for trigger runs and the one that answers the optimizer's questions by one rule
(:func:`backend_choice`). ``auto`` picks the Messages API when credentials are configured,
else the Claude Code CLI when ``claude`` is on PATH; with neither, :class:`BackendUnavailable`
says what to set.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Literal

from pytest_skilltrigger.backends.base import BackendUnavailable, TriggerBackend
from pytest_skilltrigger.model.settings import DEFAULT_MODEL, Settings

if TYPE_CHECKING:
    from pytest_skilltrigger.backends.api.rate_limit import RateLimiter
    from pytest_skilltrigger.backends.capture import Captures, CaptureStore
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend

#: what a backend is made for: trigger runs, or asking a plain question (proposals)
Purpose = Literal["trigger", "ask"]

NO_BACKEND = (
    "no trigger backend: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for the Messages API, "
    "or install the `claude` CLI (Claude Code)"
)


def backend_choice(settings: Settings, purpose: Purpose = "trigger") -> str:
    """The one rule that names the backend for a purpose, or raises
    :class:`BackendUnavailable`.

    Trigger runs go where ``--trigger-backend`` says (``auto``: the Messages API when
    credentials are configured, else the CLI when ``claude`` is found). Asking (the
    optimizer's proposals) prefers the Messages API whenever credentials are configured, a
    plain request being cheaper and faster there than a CLI process, else the trigger
    backend: a user with only a Claude Code login still gets proposals, through the CLI.
    """
    from pytest_skilltrigger.backends.api.sdk_client import credentials_configured

    if purpose == "ask" and credentials_configured():
        return "anthropic"
    if settings.backend != "auto":
        return settings.backend
    if credentials_configured():
        return "anthropic"
    if settings.batch:
        raise BackendUnavailable(
            "--trigger-batch needs Messages API credentials: set ANTHROPIC_API_KEY "
            "(or ANTHROPIC_AUTH_TOKEN)"
        )
    if shutil.which(settings.claude_bin or "claude"):
        return "claude-code"
    raise BackendUnavailable(NO_BACKEND)


def make_backend(
    settings: Settings,
    *,
    purpose: Purpose = "trigger",
    captures: CaptureStore | None = None,
    reuse: TriggerBackend | None = None,
    limiter: RateLimiter | None = None,
) -> TriggerBackend:
    """Create the backend :func:`backend_choice` names for ``purpose``, or raise
    :class:`BackendUnavailable`. ``reuse`` is a backend already made (the trigger backend,
    when asking): returned as it is when it is the one chosen. ``captures`` keeps captured CLI
    requests between sessions (the engine's session, which writes them to its store where
    this process may write); the asker never captures."""
    if purpose == "ask" and reuse is not None:
        from pytest_skilltrigger.backends.api.sdk_client import credentials_configured

        # the trigger backend answers, whatever it is (a caller's own too), unless a plain
        # API request is to be had
        if reuse.name == "anthropic" or not credentials_configured():
            return reuse
    choice = backend_choice(settings, purpose)
    if reuse is not None and reuse.name == choice:
        return reuse
    if choice == "anthropic":
        from pytest_skilltrigger.backends.api.backend import AnthropicBackend

        return AnthropicBackend(
            settings.resolved_model(DEFAULT_MODEL),
            timeout=settings.timeout,
            captures=_captures(settings, captures) if purpose == "trigger" else None,
            limiter=limiter,
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


def _captures(settings: Settings, store: CaptureStore | None) -> Captures | None:
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
    from pytest_skilltrigger.backends.capture import Captures

    return Captures(lambda: _cli(settings), store)


__all__ = ["NO_BACKEND", "BackendUnavailable", "TriggerBackend", "backend_choice", "make_backend"]
