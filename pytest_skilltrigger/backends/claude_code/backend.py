"""The Claude Code backend: the real ``claude`` CLI, one private workspace per run.

Why the CLI: many skill authors have a Claude Code login and no API key, and the CLI is the
most faithful judge of triggering (its own system prompt, built-in skills and tools).

Why one workspace per run: Claude Code lists every skill it finds under the project folder.
Runs that share a folder see each other's copies of the skill under test, with the same
description, and the model's choice between identical entries destroys the measurement.
How the workspace is laid out and isolated is in :mod:`.workspace`; reading the output is
:mod:`.stream`; stopping the process is :mod:`.process`.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_skilltrigger.backends.base import Answer, BackendUnavailable
from pytest_skilltrigger.backends.capture import CapturedRequest, record_cli_request
from pytest_skilltrigger.backends.claude_code.pool import IdlePool, Started
from pytest_skilltrigger.backends.claude_code.process import (
    CliCall,
    Finished,
    WarmCli,
    query_line,
)
from pytest_skilltrigger.backends.claude_code.stream import UNDECIDED
from pytest_skilltrigger.backends.claude_code.workspace import (
    ROOT_PREFIX,
    SECRET_ACCOUNT_KEY,
    WORKSPACE_LAYOUT,
    copy_project_files,
    credential_store_dir,
    empty_workspace,
    install_project,
    install_skills,
    remove_stale_roots,
    safe_id,
    session_folder,
    user_account,
    write_turn_hook,
)
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.skills.history import session_lines, turns_of
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.interrupts import trap_sigterm
from pytest_skilltrigger.support.machine import PeakMemory
from pytest_skilltrigger.support.redact import redact

DEFAULT_MODEL = "claude-code-default"  # until a run's init event names the CLI's default
CLI_BASE_TOKENS = 15_000  # budget estimate: the CLI's system prompt and tool definitions
DECISION_OUTPUT_TOKENS = 300
ASK_TIMEOUT = 300.0  # a proposal is one long answer, not a quick first choice
# Set inside a Claude Code session; a nested CLI must not think it is a sub-process of one.
NESTING_ENV = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")


# The switches (and their settings) that send the CLI's requests to a cloud provider instead
# of ANTHROPIC_BASE_URL.
CLOUD_PROVIDER_ENV = ("CLAUDE_CODE_USE_", "ANTHROPIC_BEDROCK", "ANTHROPIC_VERTEX")


class ClaudeCodeBackend:
    """Runs trigger checks through the ``claude`` CLI; ``run`` is thread-safe."""

    name = "claude-code"

    def __init__(
        self,
        model: str | None = None,
        timeout: float = 30.0,
        claude_bin: str | None = None,
    ) -> None:
        wanted = claude_bin or "claude"
        found = shutil.which(wanted)
        if found is None:
            raise BackendUnavailable(
                f"Claude Code CLI not found ({wanted!r}): install it "
                "(npm install -g @anthropic-ai/claude-code) or pass --trigger-claude-bin PATH"
            )
        self.claude_bin = os.path.abspath(found)  # runs start in their own folder
        self.timeout = timeout
        # The model the CLI will use: --trigger-model, else the CLI's own ANTHROPIC_MODEL,
        # else its default, which only the version pins (the store key says so) and the
        # first run's init event names (then ``model`` names it, and prices use it).
        self._model_arg = model or None
        self._keys: dict[TriggerContext, str] = {}  # each context's store key, made once
        resolved = model or os.environ.get("ANTHROPIC_MODEL") or None
        self.key_model = resolved or "cli-default"
        self.model = resolved or DEFAULT_MODEL
        account = user_account(dict(os.environ))
        # read before anything can fail: a failure's message is redacted of it
        self._login_key = str(account.pop(SECRET_ACCOUNT_KEY, "") or "")
        self._account = account
        self.cli_version = self._version()
        #: The skill names each run's init event listed, in completion order (for tests and
        #: diagnostics: a run that saw no copy, or a stray one, shows up here).
        self.observed_listings: list[tuple[str, ...]] = []
        self._lock = threading.Lock()
        self._capture_lock = threading.Lock()  # apart: close() must not wait for a capture
        self._started: set[Started] = set()  # every CLI process, busy or idle
        self._pool = IdlePool(self._retire)
        #: the peak memory of its CLI processes, as each query ends
        self.memory = PeakMemory()
        # Workspace folders are reused: Claude Code puts the workspace path into its system
        # prompt, so a fresh path per process would defeat prompt caching (every new process
        # paying a cache write of the whole prompt). A folder whose process ended cleanly
        # serves the next process, so the paths, and the cached prefixes, stay few and stable.
        self._idle_dirs: list[str] = []
        remove_stale_roots()
        self._root = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-")
        self._closed = False
        atexit.register(self.close)
        # while CLI processes may run, a CI cancellation must end through close()
        self._untrap_sigterm = trap_sigterm(only_if_default=True)

    @property
    def process_peak(self) -> int | None:
        """The most memory one of its CLI processes has held so far (None: none ran)."""
        return self.memory.largest

    def _redact(self, text: str) -> str:
        """Text that leaves this backend, without the keys: the environment's and the user's
        Claude login this backend read (only its own messages can carry that one)."""
        return redact(text, also=(self._login_key,))

    def _version(self) -> str:
        """The CLI's version (part of the store key); failing here means it cannot run."""
        try:
            done = subprocess.run(
                [self.claude_bin, "--version"],
                capture_output=True,
                text=True,
                timeout=max(self.timeout, 30.0),
                env=self._base_env(),
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendUnavailable(f"cannot run {self.claude_bin}: {exc}") from exc
        if done.returncode != 0 or not done.stdout.strip():
            tail = self._redact((done.stderr or done.stdout).strip()[-500:])
            raise BackendUnavailable(f"{self.claude_bin} --version failed: {tail}")
        return done.stdout.split()[0]

    def context_key(self, context: TriggerContext) -> str:
        """The context's store key, worked out once (every run of it names its process by
        it, and a crowd's key hashes a long listing)."""
        key = self._keys.get(context)
        if key is None:
            key = self._keys[context] = context.key(
                backend=self.name,
                model=self.key_model,
                cli_version=self.cli_version,
                workspace=WORKSPACE_LAYOUT,
            )
        return key

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        """What one run is expected to cost before it starts: the CLI's own prompt and tools
        (about :data:`CLI_BASE_TOKENS`), the listing, what the context adds (a history,
        CLAUDE.md, a subfolder's Read) and the query, all as uncached input."""
        extra = sum(len(s.line) for s in context.listing())
        extra += len(context.history or "")  # the conversation it resumes
        if context.project is not None:  # the project's instructions
            extra += len(context.project.claude_md or "")
        if context.subfolder is not None:  # the file read and the skills found after it
            extra += len(context.subfolder.read_text)
            extra += sum(len(context.discovery_line(s)) for s in context.discovered())
        return Usage(
            input_tokens=CLI_BASE_TOKENS + (extra + len(query)) // 3,
            output_tokens=DECISION_OUTPUT_TOKENS,
        )

    # -- one run ------------------------------------------------------------------------------

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One query to a CLI process of this context (started for it, or kept from an
        earlier run of it: :mod:`.pool`); failures come back as error outcomes."""
        if not safe_id(
            context.skill_name.rpartition(":")[2] if context.subfolder else context.skill_name
        ):
            return RunOutcome("error", error=f"unsafe skill name {context.skill_name!r}")
        if self._closed:
            return RunOutcome("error", error="claude-code backend already closed")
        key = self.context_key(context)
        started = self._pool.take(key)
        if started is None:
            self._pool.make_room(key)
            try:
                started = self._start(context, key)
            except OSError as exc:
                return RunOutcome("error", error=self._redact(f"claude-code run failed: {exc}"))
        kept = False
        try:
            outcome = self._outcome(started.cli.ask(query), context)
            # a process that did not settle (timeout, crash, an error) takes no other query
            # a process that found a subfolder's skills would list them from the start
            fresh = not context.found_by_read
            kept = fresh and started.cli.reusable and self._pool.give_back(started)
            return outcome
        finally:
            if not kept:
                self._retire(started)

    def _start(self, context: TriggerContext, key: str) -> Started:
        """A CLI process for the runs of ``context``, in a workspace of its own."""
        with self._lock:
            if self._closed:
                raise OSError("claude-code backend already closed")
            run_dir = self._idle_dirs.pop() if self._idle_dirs else None
        run_dir = run_dir or tempfile.mkdtemp(prefix="run-", dir=self._root)
        try:
            plugins = self._install(Path(run_dir), context)
            command = self._context_command(Path(run_dir), context, plugins)
            call = self._call(Path(run_dir), context, command, self._env(Path(run_dir)))
            started = Started(WarmCli(call, memory=self.memory), Path(run_dir), key)
        except OSError:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        with self._lock:
            self._started.add(started)
            closed = self._closed
        if closed:  # close() ran meanwhile and could not see it
            self._retire(started)
            raise OSError("claude-code backend already closed")
        return started

    def _retire(self, started: Started) -> None:
        """Stop a process and empty its workspace; the folder serves a later process if the
        process ended cleanly (a killed one may have left something behind)."""
        clean = started.cli.reusable
        started.cli.stop()
        empty_workspace(started.run_dir)  # the copies under test leave with their process
        with self._lock:
            self._started.discard(started)
            keep = clean and not self._closed
            if keep:
                self._idle_dirs.append(str(started.run_dir))
        if not keep:
            shutil.rmtree(started.run_dir, ignore_errors=True)

    def _install(self, run_dir: Path, context: TriggerContext | None) -> list[Path]:
        """Lay out a run's workspace: project, its own config folder seeded with the
        account, a scratch folder, and the skills of ``context`` (if any); the plugin
        folders to load."""
        (run_dir / "project" / ".git").mkdir(parents=True)
        config = run_dir / "config"
        config.mkdir()
        seed = {"hasCompletedOnboarding": True, **self._account}
        if context is not None:
            seed.update(_usage_seed(context))
        (config / ".claude.json").write_text(json.dumps(seed), encoding="utf-8")
        (run_dir / "tmp").mkdir()
        if context is not None and context.within is not None:  # what a turn looks at
            copy_project_files(Path(context.within.root), run_dir / "project")
            write_turn_hook(config)
        if context is not None and context.project is not None:
            install_project(run_dir / "project", context.project)
        return install_skills(run_dir, context) if context is not None else []

    def _call(
        self,
        run_dir: Path,
        context: TriggerContext,
        command: list[str],
        env: dict[str, str],
        timeout: float | None = None,
    ) -> CliCall:
        """How a context's CLI starts: in its folder (a subfolder asked for), and letting the
        Read that finds a subfolder's skills through."""
        sub = context.subfolder
        passes = sub.read_path if sub is not None and context.found_by_read else None
        folder = session_folder(run_dir, context)
        # a turn's read-only calls, run by the CLI itself; their paths shown from its folder
        rule = replace(context.within, root=str(folder)) if context.within else None
        return CliCall(command, folder, env, timeout or self.timeout, passes, rule)

    def _base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in NESTING_ENV}
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
        return env

    def _env(self, run_dir: Path) -> dict[str, str]:
        env = self._base_env()
        env["CLAUDE_SECURESTORAGE_CONFIG_DIR"] = credential_store_dir(env)
        env["CLAUDE_CONFIG_DIR"] = str(run_dir / "config")
        env["TMPDIR"] = str(run_dir / "tmp")
        if self._login_key and not env.get("ANTHROPIC_API_KEY"):
            env["ANTHROPIC_API_KEY"] = self._login_key  # in memory, never in a run's files
        return env

    def _context_command(
        self, run_dir: Path, context: TriggerContext, plugins: Sequence[Path]
    ) -> list[str]:
        """A trigger run's arguments for ``context``: its plugins, the history it resumes,
        the permission mode it runs in."""
        turns = 2 if context.found_by_read else 1  # the Read, then the choice
        if context.within is not None:  # and every read-only call the turn may go past
            turns += context.within.bound
        command = self._command(
            plugins=plugins, resume=_session_file(run_dir, context), turns=turns
        )
        if context.permission_mode is not None:
            command += ["--permission-mode", context.permission_mode]
        if context.project is not None:  # a failing hook of the project's is an error
            command += ["--include-hook-events"]
        return command

    def _command(
        self,
        streaming: bool = True,
        model: str | None = None,
        plugins: Sequence[Path] = (),
        resume: Path | None = None,
        turns: int = 1,
    ) -> list[str]:
        """The CLI's arguments: events as they arrive for trigger runs, one JSON result for
        plain questions; the plugins of the context, in order; the session to resume (the
        history an entry is asked after). The user settings and skills read are the run's
        private config folder's (CLAUDE_CONFIG_DIR), never the user's."""
        output = (
            ["stream-json", "--verbose", "--include-partial-messages"] if streaming else ["json"]
        )
        cmd = [self.claude_bin, "-p", "--output-format", *output]
        if streaming:
            cmd += ["--input-format", "stream-json"]  # one query after another (WarmCli)
        cmd += ["--setting-sources", "user,project", "--no-session-persistence"]
        for plugin in plugins:
            cmd += ["--plugin-dir", str(plugin)]
        if resume is not None:
            cmd += ["--resume", str(resume)]
        if streaming:
            # one model turn: after choosing a tool the CLI stops instead of running it and
            # sending its next request (the kill at the decision may come a moment too late)
            cmd += ["--max-turns", str(turns)]
        if model or self._model_arg:
            cmd += ["--model", str(model or self._model_arg)]
        return cmd

    def _outcome(self, finished: Finished, context: TriggerContext) -> RunOutcome:
        """What one query's output says, as an outcome."""
        verdict = finished.verdict
        if verdict.skills is not None:
            with self._lock:
                self.observed_listings.append(verdict.skills)
        if verdict.model and self._model_arg is None:
            self.model = verdict.model  # what the CLI really used: reports and prices say so
        # an API error the CLI reported came from a request of its own, even if the stream
        # showed none
        requests = verdict.requests or (1 if verdict.request_id or verdict.fatal else 0)
        model = verdict.model or self.model
        if verdict.chosen is not None and not finished.timed_out:
            return RunOutcome.of_choice(
                verdict.chosen,
                context,
                usage=verdict.usage,
                requests=requests,
                model=model,
                path=tuple(verdict.path),
            )
        return RunOutcome(
            "error",
            error=self._redact(self._failure(finished)),
            usage=verdict.usage,
            request_id=verdict.request_id,
            fatal=verdict.fatal,
            requests=requests,
            model=model,
        )

    def _failure(self, finished: Finished) -> str:
        """Why a run decided nothing: a timeout (with what went wrong before it), an error
        the CLI reported, or output that ended undecided; then the tail of its stderr."""
        verdict = finished.verdict
        if finished.timed_out:
            message = f"claude timed out after {self.timeout:g}s"
            if verdict.error and not verdict.undecided:
                message += f" ({verdict.error})"
            elif verdict.last_problem:
                message += f" (last: {verdict.last_problem})"
        else:
            message = verdict.error or UNDECIDED
            if finished.returncode:
                message += f" (exit code {finished.returncode})"
        if finished.stderr_tail:
            message += f"\nstderr:\n{finished.stderr_tail}"
        return message

    def capture(self, context: TriggerContext) -> CapturedRequest:
        """The request this CLI sends for ``context``, recorded on a loopback server (see
        :mod:`.capture`), from a workspace whose path is the same for every capture of this
        session. The user's credentials never reach the recorder: it gets a dummy key."""
        run_dir = Path(self._root) / "capture"
        with self._capture_lock:  # one capture at a time: they share the workspace path
            empty_workspace(run_dir)
            run_dir.mkdir(exist_ok=True)
            plugins = self._install(run_dir, context)
            env = self._env(run_dir)
            env.pop("ANTHROPIC_AUTH_TOKEN", None)
            # a cloud provider's switch would send the capture to that provider, a paid
            # request that never reaches the recorder
            for name in [n for n in env if n.startswith(CLOUD_PROVIDER_ENV)]:
                del env[name]
            env["ANTHROPIC_API_KEY"] = "capture"
            try:
                # exactly as a trigger run starts it
                command = self._context_command(run_dir, context, plugins)
                call = self._call(run_dir, context, command, env, max(self.timeout, 60.0))
                return record_cli_request(call, self.cli_version, self._root, query_line)
            finally:
                empty_workspace(run_dir)

    @property
    def context_label(self) -> str:
        return f"claude-code (the Claude Code CLI {self.cli_version} itself)"

    def ask(self, prompt: str, model: str | None = None) -> Answer:
        """One plain request to the model through the CLI (the optimizer's proposals when
        the user has a Claude Code login and no API key), in an empty private workspace."""
        if self._closed:
            raise AskError("claude-code backend already closed")
        run_dir = Path(tempfile.mkdtemp(prefix="ask-", dir=self._root))
        try:
            self._install(run_dir, None)
            cmd = self._command(streaming=False, model=model)
            try:
                done = subprocess.run(
                    cmd,
                    input=prompt,
                    cwd=run_dir / "project",
                    env=self._env(run_dir),
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    errors="replace",
                    timeout=max(self.timeout, ASK_TIMEOUT),
                    check=False,
                )
            except OSError as exc:  # the CLI did not start: nothing was sent
                raise AskError(self._redact(f"claude failed: {exc}")) from None
            except subprocess.TimeoutExpired as exc:  # it was waiting on its request
                raise AskError(self._redact(f"claude failed: {exc}"), requests=1) from None
            try:
                result = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                tail = (done.stderr or done.stdout).strip()[-500:]
                message = f"claude gave no result (exit {done.returncode}): {tail}"
                raise AskError(self._redact(message)) from None
            turns = int(result.get("num_turns") or 1)  # the CLI's requests for the answer
            if result.get("is_error") or done.returncode:
                raise AskError(
                    self._redact(f"claude reported an error: {result.get('result')}"),
                    requests=turns,
                )
            return Answer(
                str(result.get("result") or ""), Usage.from_dict(result.get("usage")), turns
            )
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop every CLI process, busy or idle, and remove every workspace; safe to call
        more than once. A busy process is only killed (the thread asking it closes its
        pipes); an idle one is stopped."""
        idle = self._pool.close()
        with self._lock:
            self._closed = True
            started = list(self._started)
        for one in started:  # each is reaped: a killed child nobody waits for stays a zombie
            one.cli.kill()
        for one in idle:
            one.cli.stop()
        shutil.rmtree(self._root, ignore_errors=True)
        atexit.unregister(self.close)
        self._untrap_sigterm()
        self._untrap_sigterm = lambda: None


def _session_file(run_dir: Path, context: TriggerContext) -> Path | None:
    """The context's history as a session file in the run's own workspace (the CLI resumes
    it from there and writes nothing of the user's); None without a history."""
    if context.history is None:
        return None
    project = run_dir / "project"
    path = run_dir / "tmp" / "history.jsonl"
    lines = session_lines(turns_of(context.history), str(project))
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _usage_seed(context: TriggerContext) -> dict[str, Any]:
    """The skills' usage as the CLI keeps it (``skillUsage``: uses and the last one's time),
    so that past the listing budget the same skills keep their text as in the builtin
    listing: each used as often as its score, today (no decay; a decayed score of the
    user's own install stays the fraction it is, which the CLI multiplies as it is)."""
    now = int(time.time() * 1000)
    used = {
        s.name: {"usageCount": round(s.usage, 6), "lastUsedAt": now}
        for s in context.own_listing()
        if s.usage > 0
    }
    return {"skillUsage": used} if used else {}
