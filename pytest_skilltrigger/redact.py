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


def secrets() -> list[str]:
    """The secret values currently in the environment (long enough to be worth matching)."""
    return [v for k in SECRET_ENV if len(v := os.environ.get(k, "")) >= 4]


def redact(text: str) -> str:
    """Replace every known secret and anything that looks like a key or auth header."""
    for value in secrets():
        text = text.replace(value, "[REDACTED]")
    text = _PATTERNS[0].sub("[REDACTED]", text)
    return _PATTERNS[1].sub(lambda m: f"{m.group(1)}{m.group(2)}[REDACTED]", text)
