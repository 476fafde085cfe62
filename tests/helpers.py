"""Small helpers shared by the plugin's tests."""

from __future__ import annotations

import json
from pathlib import Path

# Proxy settings a developer's shell may carry; tests clear them (everything is on 127.0.0.1).
PROXY_VARIABLES = (
    *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"),
    *("http_proxy", "https_proxy", "all_proxy"),
)


def plugin_args(folder: Path, *more: str) -> list[str]:
    """Arguments of a trigger run on one skill folder without pytest's cache, and without the
    default store unless the test names a store or a cache mode (no runs carried over between
    runs of one test)."""
    return [f"--skill-path={folder}", "-p", "no:cacheprovider", *no_store(more), *more]


def no_store(args: tuple[str, ...] | list[str]) -> list[str]:
    """``--trigger-cache off`` unless ``args`` already say which store or cache mode to use."""
    named = any(a.startswith(("--trigger-store", "--trigger-cache")) for a in args)
    return [] if named else ["--trigger-cache", "off"]


def make_skill(root: Path, entries: list[tuple[str, bool]]) -> Path:
    """A ``pdf-tools`` skill under ``root/skills`` whose eval set holds ``entries``."""
    folder = root / "skills" / "pdf-tools"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Merge and split PDF documents and pages.\n---\n"
    )
    data = [{"query": q, "should_trigger": s} for q, s in entries]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder
