"""How values are written for people, in one place for every report and message.

The terminal summary, the Markdown step summary, the HTML reports, the pytest-html columns,
failure texts and the optimizer's prompt all format rates and "what the model chose" here,
so the same number never reads differently in two places.
"""

from __future__ import annotations

import html
import os
from typing import Any


def format_ratio(value: Any, missing: str = "n/a") -> str:
    """A rate, precision, recall or accuracy for people: two decimals, or ``missing`` when
    undefined (None, or not a number in a report read back)."""
    return f"{value:.2f}" if isinstance(value, int | float) else missing


def format_chosen(chosen: Any) -> str:
    """What the model chose, compactly for reports: ``skill:x ×2, text ×1``, most first."""
    if not isinstance(chosen, dict) or not chosen:
        return "nothing"
    items = sorted(chosen.items(), key=lambda kv: (-(kv[1] or 0), str(kv[0])))
    return ", ".join(f"{name} ×{count}" for name, count in items)


def describe_chosen(chosen: dict[str, int], exclude: str | None = None) -> str:
    """What the model chose, in words: ``{"skill:x": 2, "text": 1}`` -> "skill 'x' x2, ..."."""
    items = [(k, v) for k, v in chosen.items() if k != exclude]
    if not items:
        return "nothing else" if exclude else "nothing"
    parts = []
    for name, count in sorted(items, key=lambda kv: (-kv[1], kv[0])):
        kind, _, what = name.partition(":")
        label = {"skill": f"skill {what!r}", "tool": f"tool {what}", "text": "a plain answer"}
        parts.append(f"{label.get(kind, name)} x{count}")
    return ", ".join(parts)



def escape_html(value: Any) -> str:
    """Escape any value for text or a quoted attribute: every user string passes here."""
    return html.escape("" if value is None else str(value), quote=True)


def display_path(path: str, base: str | None = None) -> str:
    """A folder as a person running pytest reads it: relative to where they started pytest
    (``base``, else the current folder) when it is below it (``skills``), else as it is (the
    folder itself too: ``.`` says little). Reports that are kept (the JSON) keep the full
    path."""
    try:
        relative = os.path.relpath(path, base)
    except ValueError:  # another drive (Windows)
        return path
    if relative == "." or relative == ".." or relative.startswith(".." + os.sep):
        return path
    return relative
