"""Small helpers shared by the plugin's tests."""

from __future__ import annotations

from pathlib import Path

# Proxy settings a developer's shell may carry; tests clear them (everything is on 127.0.0.1).
PROXY_VARIABLES = (
    *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"),
    *("http_proxy", "https_proxy", "all_proxy"),
)


def plugin_args(folder: Path, *more: str) -> list[str]:
    """Arguments of a trigger run on one skill folder without pytest's cache (no default store
    carried over between runs of one test)."""
    return ["--skill-path", str(folder), "-p", "no:cacheprovider", *more]
