"""Trigger backends, and the one factory that chooses one by name and makes it.

Every backend has ``run()`` (one trigger run) and ``ask()`` (a plain question); the factory
makes the one for trigger runs and the one that answers the optimizer's questions by one rule
(:func:`backend_choice`). ``auto`` picks the Messages API when credentials are configured,
else the Claude Code CLI when ``claude`` is on PATH; with neither, :class:`BackendUnavailable`
says what to set.

Which code makes a backend of a name is a :data:`BackendMaker`: :func:`builtin_backend`
knows the two built in. The pytest layer asks its hook instead
(``pytest_skilltrigger_make_backend``), where the built-in ones are one implementation and a
plugin or a conftest adds its own without editing this package.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pytest_skilltrigger.backends.base import BackendUnavailable, TriggerBackend
from pytest_skilltrigger.model.settings import DEFAULT_MODEL, Settings
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.backends.api.rate_limit import RateLimiter
    from pytest_skilltrigger.backends.capture import Captures, CaptureStore
    from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend

#: what a backend is made for: trigger runs, or asking a plain question (proposals)
Purpose = Literal["trigger", "ask"]

BUILTIN_BACKENDS = ("anthropic", "claude-code")
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
    # deferred: the SDK client loads anthropic, only when a run is made
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


@dataclass(frozen=True)
class BackendParts:
    """What a backend is made with besides the settings: what for, where captured CLI
    requests are kept between sessions (the engine's store, written where this process may
    write; the asker never captures), and the session's pacing to the rate limits."""

    purpose: Purpose = "trigger"
    captures: CaptureStore | None = None
    limiter: RateLimiter | None = None


#: makes the backend of a name for these settings, or says (None) that it knows no such name
BackendMaker = Callable[[str, Settings, BackendParts], "TriggerBackend | None"]


def builtin_backend(name: str, settings: Settings, parts: BackendParts) -> TriggerBackend | None:
    """The backends built in: the Messages API (``anthropic``) and the Claude Code CLI
    (``claude-code``); None for another name."""
    if name == "anthropic":
        from pytest_skilltrigger.backends.api.backend import AnthropicBackend  # deferred: the SDK

        captures = _captures(settings, parts.captures) if parts.purpose == "trigger" else None
        return AnthropicBackend(
            settings.resolved_model(DEFAULT_MODEL),
            timeout=settings.timeout,
            captures=captures,
            limiter=parts.limiter,
        )
    if name == "claude-code":
        return _cli(settings)
    return None


def make_backend(
    settings: Settings,
    parts: BackendParts = BackendParts(),
    *,
    reuse: TriggerBackend | None = None,
    maker: BackendMaker = builtin_backend,
) -> TriggerBackend:
    """Make the backend :func:`backend_choice` names for ``parts.purpose`` with ``maker``, or
    raise :class:`BackendUnavailable`. ``reuse`` is a backend already made (the trigger
    backend, when asking): returned as it is when it is the one chosen."""
    if parts.purpose == "ask" and reuse is not None:
        # deferred: the SDK client loads anthropic, only when a run is made
        from pytest_skilltrigger.backends.api.sdk_client import credentials_configured

        # the trigger backend answers, whatever it is (a caller's own too), unless a plain
        # API request is to be had
        if reuse.name == "anthropic" or not credentials_configured():
            return reuse
    choice = backend_choice(settings, parts.purpose)
    if reuse is not None and reuse.name == choice:
        return reuse
    made = maker(choice, settings, parts)
    if made is None:  # a typo, or a plugin not installed: bad input, not a missing backend
        raise InputError(
            "--trigger-backend",
            f"no backend named {choice!r}: built in are {', '.join(BUILTIN_BACKENDS)}; a "
            "plugin or a conftest adds one with the pytest_skilltrigger_make_backend hook",
        )
    return made


def _cli(settings: Settings) -> ClaudeCodeBackend:
    """The Claude Code backend the settings describe (it also captures requests)."""
    # deferred: the CLI backend's modules, only when it is the one made
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
            "--trigger-claude-bin)"
        )
    # deferred: the capture runs the CLI, only for a captured context
    from pytest_skilltrigger.backends.capture import Captures

    return Captures(lambda: _cli(settings), store)


__all__ = [
    "BUILTIN_BACKENDS",
    "NO_BACKEND",
    "BackendMaker",
    "BackendParts",
    "BackendUnavailable",
    "TriggerBackend",
    "backend_choice",
    "builtin_backend",
    "make_backend",
]
