"""The project's ``UserPromptSubmit`` hooks, run for the builtin context as Claude Code runs
them: each command with the input the CLI gives it (the prompt among it), in a copy of the
project with a HOME of its own, its output added to the request where the CLI adds it.

A hook's output can depend on the query, so it is run per query (once: the runs of a query
share it). Hooks are the user's own code: they run only under ``--trigger-setup=project``,
never in the user's project folder or HOME. A hook that fails or blocks the prompt makes the
run an error, never a miss.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pytest_skilltrigger.backends.api.request import (
    MARKER,
    ApiRequest,
    RequestTemplate,
    build_request,
)
from pytest_skilltrigger.backends.claude_code.workspace import install_project
from pytest_skilltrigger.model.context import ProjectSetup, TriggerContext

EVENT = "UserPromptSubmit"
HOOK_TIMEOUT = 60.0  # seconds, as the CLI's default for a command hook


class HookFailed(Exception):
    """A hook exited with an error, blocked the prompt, or did not finish."""


def prompt_hook_commands(setup: ProjectSetup | None) -> list[str]:
    """The commands of the project's ``UserPromptSubmit`` hooks, in order (a settings file
    that is not as the CLI reads it has none: the CLI would run none)."""
    text = setup.file(".claude/settings.json") if setup is not None else None
    if text is None:
        return []
    hooks = json.loads(text).get("hooks")
    groups = hooks.get(EVENT) if isinstance(hooks, dict) else None
    commands = []
    for group in groups if isinstance(groups, list) else []:
        found = group.get("hooks") if isinstance(group, dict) else None
        for hook in found if isinstance(found, list) else []:
            if isinstance(hook, dict) and hook.get("type") == "command" and hook.get("command"):
                commands.append(str(hook["command"]))
    return commands


class PromptHooks:
    """The hooks of one project setup, run in a private copy of it; each query's output kept
    (the runs of one query send the same request)."""

    def __init__(self, setup: ProjectSetup) -> None:
        self.setup = setup
        self.commands = prompt_hook_commands(setup)
        self._lock = threading.Lock()
        # each (query, mode)'s output, or the failure it met: the runs of a query share it
        self._outputs: dict[tuple[str, str], Future[str]] = {}
        self._root: str | None = None

    def output(self, query: str, mode: str | None = None) -> str:
        """What the hooks add to the request for ``query`` in permission mode ``mode``
        (empty: nothing); HookFailed. Run once per query and mode; other queries' runs do
        not wait for it."""
        key = (query, mode or "default")
        with self._lock:
            found = self._outputs.get(key)
            mine = found is None
            if found is None:
                found = self._outputs[key] = Future()
        if mine:
            try:
                said = (self._run(command, query, key[1]) for command in self.commands)
                found.set_result("\n".join(filter(None, said)))
            except HookFailed as exc:
                found.set_exception(exc)
        return found.result()

    def _workspace(self) -> Path:
        with self._lock:
            return self._made()

    def _made(self) -> Path:
        if self._root is None:
            self._root = tempfile.mkdtemp(prefix="skilltrigger-hooks-")
            (Path(self._root) / "project").mkdir()
            (Path(self._root) / "home").mkdir()
            install_project(Path(self._root) / "project", self.setup)
        return Path(self._root)

    def _run(self, command: str, query: str, mode: str) -> str:
        root = self._workspace()
        project = str(root / "project")
        given: dict[str, Any] = {
            "session_id": "skilltrigger",
            "transcript_path": str(root / "home" / "transcript.jsonl"),
            "cwd": project,
            "permission_mode": mode,
            "hook_event_name": EVENT,
            "prompt": query,
        }
        env = {**os.environ, "HOME": str(root / "home"), "CLAUDE_PROJECT_DIR": project}
        try:
            done = subprocess.run(
                command,
                shell=True,
                input=json.dumps(given),
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=HOOK_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HookFailed(f"the project's {EVENT} hook {command!r} did not run: {exc}") from None
        if done.returncode != 0:
            what = "blocked the prompt" if done.returncode == 2 else f"exited {done.returncode}"
            tail = (done.stderr or done.stdout).strip()[-300:]
            raise HookFailed(f"the project's {EVENT} hook {command!r} {what}: {tail}")
        return _context_of(done.stdout)

    def close(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)


def _context_of(stdout: str) -> str:
    """What a hook's output adds: its JSON's ``additionalContext``, or its text."""
    text = stdout.strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if not isinstance(data, dict):
        return text
    if data.get("decision") == "block" or data.get("continue") is False:
        raise HookFailed(f"the project's {EVENT} hook blocked the prompt: {data.get('reason')}")
    specific = data.get("hookSpecificOutput")
    if isinstance(specific, dict):
        return str(specific.get("additionalContext") or "")
    return ""


class HookedTemplate(RequestTemplate):
    """The builtin request of a context whose project's prompt hooks add per-query text:
    each query's request is built with what they said for it. The store keys its runs as
    any template's (the hooks' scripts are part of the context's key)."""

    fixed = False

    def __init__(self, context: TriggerContext, model: str, hooks: PromptHooks) -> None:
        super().__init__({**build_request(context, MARKER, model), "stream": True})
        self.context = context
        self.model = model
        self.hooks = hooks

    def for_query(self, query: str) -> ApiRequest:
        output = self.hooks.output(query, self.context.permission_mode) or None
        params = build_request(self.context, query, self.model, output)
        return ApiRequest({**params, "stream": True}, self.headers, self.beta)

    def key_params(self) -> dict[str, Any]:
        return super().for_query("").params  # without running the hooks
