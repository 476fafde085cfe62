"""Run the pinned Claude Code CLI once, offline, and read the request it sent.

The tests that hold the builtin context against the real CLI (broken frontmatters, commands,
earlier turns, crowded installs, subfolders, a project's setup) all need the same thing: a
project and a HOME laid out as a user has them, one ``claude -p`` against the fake Messages API,
and the first request that asked the model to choose. This is that, and nothing more.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.fake_messages_api import LISTING_HEADER_START, FakeMessagesAPI

QUERY = "xyzzy plugh frobnicate the quux"


def cli_env(api: FakeMessagesAPI, home: Path, model: str | None = None) -> dict[str, str]:
    """The environment of an offline CLI run against ``api`` with ``home`` as HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "CLAUDE"))}
    env.update(
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="test-key",
        HOME=str(home),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
    )
    if model:
        env["ANTHROPIC_MODEL"] = model
    return env


def cli_command(claude_bin: str, api: FakeMessagesAPI, home: Path, *args: str) -> str:
    """Run one CLI command (``plugin marketplace add``, ``plugin install``) as a user would
    in ``home``; its output, or AssertionError with it when it failed."""
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [claude_bin, *args],
        cwd=home,
        env=cli_env(api, home),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, f"claude {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def cli_request(
    claude_bin: str,
    api: FakeMessagesAPI,
    project: Path,
    home: Path,
    *,
    query: str = QUERY,
    model: str | None = None,
    args: Sequence[str] = (),
    last: bool = False,
) -> dict[str, Any]:
    """The body of the first request of one ``claude -p QUERY`` run in ``project`` with
    ``home`` as HOME that offered the Skill tool (``last``: the last such request). Raises
    AssertionError with the CLI's output when it sent none."""
    home.mkdir(parents=True, exist_ok=True)
    env = cli_env(api, home, model)
    seen = len(api.requests)
    done = subprocess.run(
        [claude_bin, "-p", query, "--output-format", "stream-json", "--verbose", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    offered = [
        body
        for body in list(api.requests)[seen:]
        if any(t.get("name") == "Skill" for t in body.get("tools") or [])
    ]
    if offered:
        return offered[-1] if last else offered[0]
    raise AssertionError(f"the CLI sent no request offering Skill:\n{done.stdout}\n{done.stderr}")


def texts(body: dict[str, Any]) -> list[str]:
    """Every text of the request's messages, in order (tool results' texts included)."""
    out: list[str] = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
            continue
        for block in content:
            if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                out += [b.get("text", "") for b in block["content"]]
            elif isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


def listing_lines(body: dict[str, Any]) -> list[str]:
    """The listing lines of the first skills section of the request (``- name: text`` or a
    bare ``- name``)."""
    for text in texts(body):
        if LISTING_HEADER_START in text:
            after = text[text.index(LISTING_HEADER_START) :].split("\n")[1:]
            while after and not after[0].strip():
                after.pop(0)
            end = next((i for i, line in enumerate(after) if not line.strip()), len(after))
            return [line for line in after[:end] if line.startswith("- ")]
    return []
