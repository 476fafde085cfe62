"""Small helpers shared by the plugin's tests."""

from __future__ import annotations

from pathlib import Path


def plugin_args(folder: Path, *more: str) -> list[str]:
    """Arguments of a trigger run on one skill folder without pytest's cache (no default store
    carried over between runs of one test)."""
    return ["--skill-path", str(folder), "-p", "no:cacheprovider", *more]
