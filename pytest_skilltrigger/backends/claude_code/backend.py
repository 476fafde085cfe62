"""The Claude Code backend: the real ``claude`` CLI, one private workspace per run.

Why the CLI: many skill authors have a Claude Code login and no API key, and the CLI is the
most faithful judge of triggering (its own system prompt, built-in skills and tools).

Why one workspace per run: Claude Code lists every skill it finds under the project folder.
Runs that share a folder see each other's copies of the skill under test, with the same
description, and the model's choice between identical entries destroys the measurement.
Each run therefore gets a fresh temporary folder::

    <run>/project/.git/                          empty: marks the project root, so Claude Code
                                                 does not look for skills in parent folders
    <run>/project/.claude/skills/<name>/SKILL.md the skill under test, description under test
    <run>/project/.claude/skills/<sibling>/...   its sibling skills (the project's competitors)
    <run>/config/                                CLAUDE_CONFIG_DIR: the run's own config home
    <run>/tmp/                                   TMPDIR: the CLI's scratch files and sockets

How the user's own skills are kept out while their login keeps working (checked against
Claude Code 2.1.328, see ``.ci/install_claude_code.sh``: with neither the private config
folder nor the setting sources below, a same-named skill in ``~/.claude/skills`` replaces the
copy under test in the listing; each alone is enough, both are kept):

* ``CLAUDE_CONFIG_DIR=<run>/config``: the user skill folder is ``<config dir>/skills``, so it
  is now an empty folder of the run's own. Everything the CLI writes (``.claude.json``,
  backups, project history) lands there too: nothing in the user's home, and parallel runs
  never write the same config file.
* ``CLAUDE_SECURESTORAGE_CONFIG_DIR`` pins the credential store to where the user's login
  really lives (empty = the default ``~/.claude/.credentials.json`` and the default keychain
  entry; else the user's own ``CLAUDE_CONFIG_DIR``). Without it, moving CLAUDE_CONFIG_DIR
  also moves the credential store (and renames the macOS keychain entry), and the login is
  lost. Reading the real store rather than a copy also means a token refresh updates the
  user's own credentials instead of silently invalidating them.
* The account keys of the user's ``.claude.json`` (``oauthAccount``, ``primaryApiKey``, ...)
  are copied into the run's config, so ``/login`` managed keys and account details apply.
* ``--setting-sources project`` as a second guard: the CLI reads user skills, commands,
  plugins and settings only when the ``user`` source is on. Project skills (ours) still load.

What is lost: user-level settings (``~/.claude/settings.json``: ``env``, ``apiKeyHelper``,
hooks) are not applied; credentials in the environment (``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, cloud provider variables) pass through.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pytest_skilltrigger.backends.api.sse import FirstChoice, StreamError, choice_of
from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage
from pytest_skilltrigger.support.errors import AskError
from pytest_skilltrigger.support.interrupts import trap_sigterm
from pytest_skilltrigger.support.redact import redact, register_secret

DEFAULT_MODEL = "claude-code-default"
ROOT_PREFIX = "skilltrigger-cc-"
STDERR_LINES = 20
ASK_TIMEOUT = 300.0  # a proposal is one long answer, not a quick first choice
KILL_GRACE = 0.3  # SIGTERM first (it tidies up), but a decided run must not wait long
# Tools whose input must be seen before deciding: a Read of a SKILL.md is a skill being used.
INSPECTED_TOOLS = frozenset({"Skill", "Read"})
# Statuses retrying cannot fix; the CLI would retry a 401 ten times over minutes.
FATAL_STATUSES = frozenset({401, 403, 404})
SKILL_FILE_RE = re.compile(r"(?:^|/)\.claude/skills/([^/]+)/SKILL\.md$")
SAFE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Keys of the user's global config that carry the login's account, copied into each run.
# Keys that are (or hold pieces of) secrets are never written into a run's files: the /login
# key travels to the CLI in its environment instead (see ``ClaudeCodeBackend._env``).
ACCOUNT_KEYS = (
    "oauthAccount",
    "userID",
)  # onboarding is always marked done in the seed written for each run
SECRET_ACCOUNT_KEY = "primaryApiKey"
UNDECIDED = "claude exited before the model chose anything"
# Set inside a Claude Code session; a nested CLI must not think it is a sub-process of one.
NESTING_ENV = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")


# --------------------------------------------------------------------------------------------
# Reading the stream: a pure function over JSON lines, so it is tested on recorded output.
# --------------------------------------------------------------------------------------------


@dataclass
class CliVerdict:
    """What one CLI run's output said: a choice, or an error; plus what the run was shown.

    ``chosen`` is ``skill:<name>``, ``tool:<Name>`` or ``text``, or None with ``error`` set.
    ``skills`` is the init event's skill list (names only), None if no init line came.
    """

    chosen: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    fatal: bool = False
    request_id: str | None = None
    skills: tuple[str, ...] | None = None
    cli_version: str | None = None
    undecided: bool = False  # the output ended before a decision (the error says so)
    last_problem: str | None = None  # what went wrong last before that, if anything


def read_stream(lines: Iterable[str]) -> CliVerdict:
    """Consume ``--output-format stream-json`` lines until the first decision, then return.

    Decides on the first tool call of the main conversation, from the raw stream events
    (thinking and text preambles skipped, the ``skill`` input assembled from fragments) or
    from a complete ``assistant`` message, whichever comes first. A ``Read`` of
    ``.claude/skills/<name>/SKILL.md`` counts as ``skill:<name>``. A message that ends without
    a tool, or a successful ``result`` without one, is ``text``. An API error reported by the
    CLI, an error result, or output that ends undecided is an error, never a miss.
    """
    verdict = CliVerdict()
    choice = FirstChoice(INSPECTED_TOOLS)
    for raw in lines:
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        kind = msg.get("type")
        if kind == "system":
            subtype = msg.get("subtype")
            if subtype == "init":
                skills = msg.get("skills")
                if isinstance(skills, list):
                    verdict.skills = tuple(str(s) for s in skills)
                verdict.cli_version = msg.get("claude_code_version")
            elif subtype == "api_retry":
                status = msg.get("error_status")
                verdict.last_problem = (
                    f"API error {status} ({msg.get('error')}), retried by the CLI"
                )
                if status in FATAL_STATUSES:
                    verdict.error = f"API error {status}: {msg.get('error')}"
                    verdict.fatal = True
                    return verdict
            continue
        if msg.get("parent_tool_use_id"):
            continue  # a subagent's conversation, not the model's first choice
        if kind == "stream_event":
            event = msg.get("event")
            if not isinstance(event, dict):
                continue
            name = str(event.get("type"))
            if name == "message_start":
                choice = FirstChoice(INSPECTED_TOOLS)  # a retried request starts afresh
            if not choice.wants(name):
                continue
            try:
                decision = choice.feed(name, event)
            except StreamError as exc:
                verdict.last_problem = f"stream error: {exc}"  # the CLI retries or reports it
                choice = FirstChoice(INSPECTED_TOOLS)
                continue
            if decision is not None:
                verdict.usage = decision.usage
                verdict.chosen = _chosen(decision.chosen, decision.tool_input)
                return verdict
        elif kind == "assistant":
            message = msg.get("message") if isinstance(msg.get("message"), dict) else {}
            if msg.get("error") or msg.get("is_api_error_message"):
                status = msg.get("api_error_status")
                text = _text_of(message) or str(msg.get("error"))
                label = f"API error {status}" if status else f"API error ({msg.get('error')})"
                verdict.error = f"{label}: {text}"
                verdict.fatal = status in FATAL_STATUSES
                verdict.request_id = msg.get("request_id")
                return verdict
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    tool_input = tool_input if isinstance(tool_input, dict) else {}
                    tool = str(block.get("name"))
                    verdict.chosen = _chosen(choice_of(tool, tool_input), tool_input)
                    streamed = choice.usage != Usage()
                    verdict.usage = (
                        choice.usage if streamed else Usage.from_dict(message.get("usage"))
                    )
                    return verdict
        elif kind == "result":
            if msg.get("is_error") or msg.get("subtype") != "success":
                status = msg.get("api_error_status")
                detail = msg.get("result") or msg.get("subtype") or "error result"
                errors = msg.get("errors")
                if isinstance(errors, list) and errors:
                    detail = f"{detail}: {'; '.join(str(e) for e in errors[:3])}"
                verdict.error = f"API error {status}: {detail}" if status else str(detail)
                verdict.fatal = status in FATAL_STATUSES
                return verdict
            verdict.chosen = "text"
            verdict.usage = Usage.from_dict(msg.get("usage"))
            return verdict
    verdict.undecided = True
    verdict.error = UNDECIDED
    if verdict.last_problem:
        verdict.error += f" (last: {verdict.last_problem})"
    return verdict


def _chosen(chosen: str, tool_input: dict[str, Any] | None) -> str:
    """Map a ``Read`` of a skill's SKILL.md to ``skill:<name>``; anything else unchanged."""
    if chosen == "tool:Read" and tool_input:
        path = str(tool_input.get("file_path") or "").replace("\\", "/")
        match = SKILL_FILE_RE.search(path)
        if match:
            return f"skill:{match.group(1)}"
    return chosen


def _text_of(message: dict[str, Any]) -> str:
    parts = [
        str(b.get("text"))
        for b in message.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    return " ".join(parts).strip()


# --------------------------------------------------------------------------------------------
# Workspaces and the process
# --------------------------------------------------------------------------------------------


def skill_file(name: str, description: str) -> str:
    """A minimal SKILL.md; ``json.dumps`` of a string is a valid YAML double-quoted scalar,
    so any description (colons, quotes, newlines, leading dashes) survives the frontmatter."""
    body = f"# {name}\n\nPlaceholder body: trigger tests never get this far.\n"
    return (
        f"---\nname: {json.dumps(name)}\n"
        f"description: {json.dumps(description, ensure_ascii=False)}\n---\n\n{body}"
    )


def credential_store_dir(env: dict[str, str]) -> str:
    """Where the user's login lives, as ``CLAUDE_SECURESTORAGE_CONFIG_DIR`` says it.

    Empty means the CLI's default store (``~/.claude`` and the default keychain entry);
    a user who moved their config with ``CLAUDE_CONFIG_DIR`` keeps their store there.
    """
    if "CLAUDE_SECURESTORAGE_CONFIG_DIR" in env:
        return env["CLAUDE_SECURESTORAGE_CONFIG_DIR"]
    return env.get("CLAUDE_CONFIG_DIR", "")


def _user_account(env: dict[str, str]) -> dict[str, Any]:
    """The account keys of the user's global config file (plus, held in memory only, its
    /login key under ``SECRET_ACCOUNT_KEY``), or nothing if unreadable."""
    config_dir = env.get("CLAUDE_CONFIG_DIR")
    path = Path(config_dir, ".claude.json") if config_dir else Path.home() / ".claude.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: data[k] for k in (*ACCOUNT_KEYS, SECRET_ACCOUNT_KEY) if k in data}


def _lines(stream: IO[str]) -> Iterator[str]:
    """Lines as the CLI writes them (``readline`` does not read ahead like iteration may)."""
    while True:
        line = stream.readline()
        if not line:
            return
        yield line


def _empty(run_dir: Path) -> None:
    """Clear a workspace for its next run; nothing of the previous run may remain."""
    for child in ("project", "config", "tmp"):
        shutil.rmtree(run_dir / child, ignore_errors=True)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Stop the CLI and anything it started: SIGTERM to its group, SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            proc.kill()
        else:
            killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE)
                return
            except subprocess.TimeoutExpired:
                killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _remove_stale_roots() -> None:
    """Remove the workspaces of sessions that died without cleaning up (SIGKILL, power loss).

    ``close()`` and ``atexit`` cover normal ends and Ctrl-C; a killed process leaves its root
    behind, so the next session removes every root whose owning process (in its name) is gone.
    POSIX only: probing a pid with ``os.kill(pid, 0)`` would terminate it on Windows.
    """
    if os.name != "posix":
        return
    for folder in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        pid_text = folder.name[len(ROOT_PREFIX) :].split("-", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            os.kill(int(pid_text), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive but not ours to signal, or unreadable: leave it


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
                "(npm install -g @anthropic-ai/claude-code) or pass --claude-bin PATH"
            )
        self.claude_bin = os.path.abspath(found)  # runs start in their own folder
        self.timeout = timeout
        self._model_arg = model or None
        self.model = model or DEFAULT_MODEL
        self.cli_version = self._version()
        #: The skill names each run's init event listed, in completion order (for tests and
        #: diagnostics: a run that saw no copy, or a stray one, shows up here).
        self.observed_listings: list[tuple[str, ...]] = []
        self._lock = threading.Lock()
        self._live: dict[str, subprocess.Popen[str] | None] = {}
        # Workspaces are reused one run at a time: Claude Code puts the workspace path into
        # its system prompt, so a fresh path per run would defeat prompt caching (every run
        # paying a cache write of the whole prompt). A pool of at most one workspace per
        # concurrent run keeps the path, and so the cached prefix, stable.
        self._idle: list[str] = []
        account = _user_account(dict(os.environ))
        self._login_key = str(account.pop(SECRET_ACCOUNT_KEY, "") or "")
        register_secret(self._login_key)
        self._account = account
        _remove_stale_roots()
        self._root = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-")
        self._closed = False
        atexit.register(self.close)
        # while CLI processes may run, a CI cancellation must end through close()
        self._untrap_sigterm = trap_sigterm(only_if_default=True)

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
            tail = redact((done.stderr or done.stdout).strip()[-500:])
            raise BackendUnavailable(f"{self.claude_bin} --version failed: {tail}")
        return done.stdout.split()[0]

    def context_key(self, context: TriggerContext) -> str:
        return context.key(backend=self.name, model=self.model, cli_version=self.cli_version)

    # -- one run ------------------------------------------------------------------------------

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One CLI process in a fresh workspace; failures come back as error outcomes."""
        if not SAFE_NAME_RE.fullmatch(context.skill_name):
            return RunOutcome("error", error=f"unsafe skill name {context.skill_name!r}")
        if self._closed:
            return RunOutcome("error", error="claude-code backend already closed")
        with self._lock:
            run_dir = self._idle.pop() if self._idle else None
        try:
            run_dir = run_dir or tempfile.mkdtemp(prefix="run-", dir=self._root)
        except OSError as exc:
            return RunOutcome("error", error=f"cannot create a workspace: {exc}")
        with self._lock:
            self._live[run_dir] = None
        reusable = False
        try:
            self._install(Path(run_dir), context)
            outcome = self._run_cli(Path(run_dir), query, context.skill_name)
            # a failed run (timeout, crash) may have left a process behind: never reuse it
            reusable = outcome.status != "error"
            return outcome
        except OSError as exc:
            return RunOutcome("error", error=redact(f"claude-code run failed: {exc}"))
        finally:
            _empty(Path(run_dir))  # the copy under test leaves with its run; the path stays
            with self._lock:
                self._live.pop(run_dir, None)
                if reusable and not self._closed:
                    self._idle.append(run_dir)
                    run_dir = None
            if run_dir is not None:
                shutil.rmtree(run_dir, ignore_errors=True)

    def _install(self, run_dir: Path, context: TriggerContext | None) -> None:
        """Lay out a run's workspace: project (with the skills of ``context``, if any), its
        own config folder seeded with the account, and a scratch folder."""
        project = run_dir / "project"
        (project / ".git").mkdir(parents=True)
        skills = project / ".claude" / "skills"
        entries = {s.name: s.description for s in context.siblings} if context else {}
        if context is not None:
            entries[context.skill_name] = context.description
        for name, description in entries.items():
            if not SAFE_NAME_RE.fullmatch(name):
                continue  # a sibling we cannot place safely is left out, not written elsewhere
            folder = skills / name
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(skill_file(name, description), encoding="utf-8")
        config = run_dir / "config"
        config.mkdir()
        seed = {"hasCompletedOnboarding": True, **self._account}
        (config / ".claude.json").write_text(json.dumps(seed), encoding="utf-8")
        (run_dir / "tmp").mkdir()

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

    def _command(self, streaming: bool = True, model: str | None = None) -> list[str]:
        """The CLI's arguments: events as they arrive for trigger runs, one JSON result for
        plain questions; user-level settings and skills are never loaded."""
        output = (
            ["stream-json", "--verbose", "--include-partial-messages"] if streaming else ["json"]
        )
        cmd = [self.claude_bin, "-p", "--output-format", *output]
        cmd += ["--setting-sources", "project", "--no-session-persistence"]
        if model or self._model_arg:
            cmd += ["--model", str(model or self._model_arg)]
        return cmd

    def _run_cli(self, run_dir: Path, query: str, skill_name: str) -> RunOutcome:
        # The query goes through stdin: an argument starting with "-" would read as an option.
        proc = subprocess.Popen(
            self._command(),
            cwd=run_dir / "project",
            env=self._env(run_dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        with self._lock:
            if self._closed:
                _kill_group(proc)
            self._live[str(run_dir)] = proc
        stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        assert proc.stdout is not None and proc.stderr is not None and proc.stdin is not None
        err_reader = threading.Thread(
            target=lambda: stderr_tail.extend(_lines(proc.stderr)),  # type: ignore[arg-type]
            name="claude-code-stderr",
            daemon=True,
        )
        err_reader.start()
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            _kill_group(proc)

        watchdog = threading.Timer(self.timeout, on_timeout)
        watchdog.daemon = True
        watchdog.start()
        try:
            try:
                proc.stdin.write(query)
                proc.stdin.close()
            except OSError:
                pass  # it died at once; stdout and stderr say why
            verdict = read_stream(_lines(proc.stdout))
        finally:
            watchdog.cancel()
            _kill_group(proc)
            try:
                proc.wait(KILL_GRACE * 5)
            except subprocess.TimeoutExpired:
                pass
            err_reader.join(KILL_GRACE)
            proc.stdout.close()
        if verdict.skills is not None:
            with self._lock:
                self.observed_listings.append(verdict.skills)
        if verdict.chosen is not None and not timed_out.is_set():
            status = "triggered" if verdict.chosen == f"skill:{skill_name}" else "not_triggered"
            return RunOutcome(status, chosen=verdict.chosen, usage=verdict.usage)
        if timed_out.is_set():
            message = f"claude timed out after {self.timeout:g}s"
            if verdict.error and not verdict.undecided:
                message += f" ({verdict.error})"
            elif verdict.last_problem:
                message += f" (last: {verdict.last_problem})"
        else:
            message = verdict.error or UNDECIDED
            if proc.returncode:
                message += f" (exit code {proc.returncode})"
        tail = "\n".join(line.rstrip() for line in stderr_tail if line.strip())
        if tail:
            message += f"\nstderr:\n{tail}"
        return RunOutcome(
            "error",
            error=redact(message),
            usage=verdict.usage,
            request_id=verdict.request_id,
            fatal=verdict.fatal,
        )

    def ask(self, prompt: str, model: str | None = None) -> tuple[str, Usage]:
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
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise AskError(redact(f"claude failed: {exc}")) from None
            try:
                result = json.loads(done.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                tail = (done.stderr or done.stdout).strip()[-500:]
                message = f"claude gave no result (exit {done.returncode}): {tail}"
                raise AskError(redact(message)) from None
            if result.get("is_error") or done.returncode:
                raise AskError(redact(f"claude reported an error: {result.get('result')}"))
            return str(result.get("result") or ""), Usage.from_dict(result.get("usage"))
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop live runs and remove every workspace; safe to call more than once."""
        with self._lock:
            self._closed = True
            procs = [p for p in self._live.values() if p is not None]
        for proc in procs:
            _kill_group(proc)
        shutil.rmtree(self._root, ignore_errors=True)
        atexit.unregister(self.close)
        self._untrap_sigterm()
        self._untrap_sigterm = lambda: None
