"""How values are written for people, in one place for every report and message.

The terminal summary, the Markdown step summary, the HTML reports, the pytest-html columns,
failure texts and the optimizer's prompt all format rates and "what the model chose" here,
so the same number never reads differently in two places.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import Any


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 query``, ``2 queries``: a count with its noun in the number it takes."""
    if count == 1:
        return f"{count} {noun}"
    if plural is None:
        plural = (
            noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"
        )
    return f"{count} {plural}"


def first_few(names: Sequence[str], most: int) -> str:
    """``a, b, c and 4 more``: the first ``most`` names, and how many are not shown."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def format_ratio(value: Any, missing: str = "n/a") -> str:
    """A rate, precision, recall or accuracy for people: two decimals, or ``missing`` when
    undefined (None, or not a number in a report read back)."""
    return f"{value:.2f}" if isinstance(value, int | float) else missing


def format_interval(interval: Any, confidence: float | None = None) -> str:
    """An interval for people: ``0.25–0.70``, with its level in front when given
    (``95% interval 0.25–0.70``)."""
    low, high = interval
    text = f"{low:.2f}–{high:.2f}"
    return f"{confidence:.0%} interval {text}" if confidence is not None else text


def rate_text(value: float | None, interval: Any) -> str:
    """``0.90 (0.62–0.98)``: a rate with its interval, or ``n/a`` for an undefined one."""
    if value is None or interval is None:
        return format_ratio(value)
    return f"{format_ratio(value)} ({format_interval(interval)})"


def chosen_label(choice: str) -> str:
    """What the model chose, in the words every report uses: ``skill 'x'``, ``tool Bash``,
    ``a plain answer`` (the keys ``skill:x``, ``tool:Bash`` and ``text`` stay in the JSON)."""
    kind, _, what = choice.partition(":")
    if kind == "skill" and what:
        return f"skill {what!r}"
    if kind == "tool" and what:
        return f"tool {what}"
    if choice == "looking":  # (model.turn.LOOKING) the bound of read-only calls reached
        return "still looking around at the bound (--trigger-within-bound)"
    return "a plain answer" if choice == "text" else choice


def describe_chosen(chosen: Any, exclude: str | None = None) -> str:
    """What the model chose, most first: ``{"skill:x": 2, "text": 1}`` -> ``skill 'x' x2, a
    plain answer x1``; ``exclude`` leaves out one choice (the skill a miss wanted)."""
    items = [(k, v) for k, v in chosen.items() if k != exclude] if isinstance(chosen, dict) else []
    if not items:
        return "nothing else" if exclude else "nothing"
    ranked = sorted(items, key=lambda kv: (-(kv[1] or 0), str(kv[0])))
    return ", ".join(f"{chosen_label(name)} x{count}" for name, count in ranked)


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
