"""Keeping credentials out of everything we print or store.

Error messages from HTTP libraries can echo request headers; a user's environment can put a
key into a path or a message. Every string that leaves the engine for a report, the terminal
or the store passes through :func:`redact`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
_PATTERNS = (
    re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?i)(x-api-key|authorization)(['\"]?\s*[:=]\s*['\"]?)(bearer\s+)?[^\s'\",}]+"),
)


def secrets(also: Iterable[str] = ()) -> list[str]:
    """The secret values known (long enough to be worth matching): the environment's, and
    ``also`` (a key a backend found elsewhere, the user's Claude login)."""
    found = [v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= 4]
    return found + sorted(v for v in also if len(v) >= 4)


def redact(text: str, also: Iterable[str] = ()) -> str:
    """Replace every known secret (``also`` too) and anything that looks like a key or
    auth header."""
    for value in secrets(also):
        text = text.replace(value, "[REDACTED]")
    text = _PATTERNS[0].sub("[REDACTED]", text)
    return _PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
