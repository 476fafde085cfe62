"""Keeping credentials out of everything we print or store.

Error messages from HTTP libraries can echo request headers; a user's environment can put a
key into a path or a message. Every string that leaves the engine for a report, the terminal
or the store passes through :func:`redact`.
"""

from __future__ import annotations

import os
import re

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(x-api-key|authorization)(['\"]?\s*[:=]\s*['\"]?)(bearer\s+)?[^\s'\",}]+"),
)


_REGISTERED: set[str] = set()


def register_secret(value: str) -> None:
    """Also redact a secret found elsewhere (e.g. a key from the user's Claude config)."""
    if len(value) >= 4:
        _REGISTERED.add(value)


def secrets() -> list[str]:
    """The secret values currently known (long enough to be worth matching)."""
    found = [v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= 4]
    return found + sorted(_REGISTERED)


def redact(text: str) -> str:
    """Replace every known secret and anything that looks like a key or auth header."""
    for value in secrets():
        text = text.replace(value, "[REDACTED]")
    text = _PATTERNS[0].sub("[REDACTED]", text)
    return _PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
