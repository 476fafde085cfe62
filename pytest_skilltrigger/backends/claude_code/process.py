"""Controlling a CLI process: giving it queries, reading its lines as written, and
stopping it with all it started."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pytest_skilltrigger.backends.claude_code.stream import CliVerdict, read_stream
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.turn import TurnRule
from pytest_skilltrigger.support.machine import PeakMemory, peak_rss

KILL_GRACE = 0.3  # how long to wait for a killed process to be reaped
SETTLE_TIMEOUT = 15.0  # how long a decided query's turn may take to end and rewind
STDERR_LINES = 20


@dataclass(frozen=True)
class CliCall:
    """One start of the CLI: its arguments, its folder, its environment, and the longest a
    query may take to be decided."""

    command: list[str]
    cwd: Path
    env: dict[str, str]
    timeout: float
    # a file whose Read is not the decision: how a run reaches a subfolder's skills
    passes: str | None = None
    # --trigger-within=turn: the read-only calls a run goes on past (None: the first decides)
    rule: TurnRule | None = None


@dataclass(frozen=True)
class Finished:
    """How one query to a CLI process ended: what its output said, the process's exit code
    (None: it still runs), whether the watchdog killed it before a decision, the last lines of
    its stderr (for an error's message), and the most memory it held so far (None: not known,
    e.g. it had ended, or there is no ``/proc``)."""

    verdict: CliVerdict
    returncode: int | None
    timed_out: bool
    stderr_tail: str
    peak_rss: int | None = None


class WarmCli:
    """One CLI process that answers one query after another, each as a fresh conversation.

    Why: a CLI start costs several times the CPU of a query in a started process
    (``benchmarks/bench_local_latency.py`` prints both); at real latencies the CPU, not the
    API, bounds how many runs the machine carries, so a process that answers many queries
    pays its start once. With ``--input-format stream-json`` the CLI
    reads user messages until its stdin closes. After each decision a ``rewind_conversation``
    control request takes the conversation back to before the query, so the next query's
    request is the one a fresh process sends (held byte for byte against the pinned CLI in
    ``tests/backends/test_claude_code_cli.py``). ``/clear`` would not do: the next request
    would carry a record of the command.

    The process runs in its own process group, so a kill takes everything it started.
    ``memory`` is told its peak memory after each query (what the governor of the runs in
    flight counts one more CLI process at).
    """

    def __init__(self, call: CliCall, *, memory: PeakMemory) -> None:
        self.call = call
        self.memory = memory
        self.proc = subprocess.Popen(
            call.command,
            cwd=call.cwd,
            env=call.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._lines = read_lines(self.proc.stdout)
        self._tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        stderr = self.proc.stderr
        self._err_reader = threading.Thread(
            target=lambda: self._tail.extend(read_lines(stderr)),
            name="claude-code-stderr",
            daemon=True,
        )
        self._err_reader.start()
        self._requests = itertools.count(1)
        #: whether the process can take another query (it settled after its last decision)
        self.reusable = True
        self.queries = 0  # the queries it was given

    def ask(self, query: str) -> Finished:
        """Give ``query`` as a new conversation and read the output until the first decision;
        then let the turn end (an interrupt if it still runs) and rewind the conversation.
        A watchdog kills the process after ``call.timeout`` without a decision, and after
        :data:`SETTLE_TIMEOUT` without settling; a process that did not settle is stopped."""
        self.queries += 1
        message_id = str(uuid.uuid4())
        timed_out = threading.Event()

        def on_timeout() -> None:
            timed_out.set()
            kill_group(self.proc)

        with _watchdog(self.call.timeout, on_timeout):
            self._send(user_message(query, message_id))
            verdict = read_stream(self._lines, self.call.passes, self.call.rule)
        decided = verdict.chosen is not None and not timed_out.is_set()
        with _watchdog(SETTLE_TIMEOUT, lambda: kill_group(self.proc)):
            self.reusable = decided and self._settle(message_id, verdict)
        # read while it runs: once reaped, its pid may name another process
        peak = peak_rss(self.proc.pid) if self.proc.poll() is None else None
        self.memory.record(peak)
        if not self.reusable:
            self.stop()
        stderr_tail = "\n".join(line.rstrip() for line in self._tail if line.strip())
        return Finished(verdict, self.proc.returncode, timed_out.is_set(), stderr_tail, peak)

    def alive(self) -> bool:
        """Whether it can take a query: settled after the last one, and still running."""
        return self.reusable and self.proc.poll() is None

    def _settle(self, message_id: str, verdict: CliVerdict) -> bool:
        """End the query's turn and rewind to before the query; whether both were done.

        A turn still running is interrupted (a tool call stops before it runs, as far as the
        CLI is still before it), and everything the interrupt makes the CLI write is read
        (its turn's ``result`` and its own answer), so no line of this query is left for the
        next. The turn's ``result`` counts every token of the turn, also those streamed after
        the decision: the run is priced at it when it counts more than the stream showed.
        """
        if not verdict.turn_over:
            interrupt = self._control({"subtype": "interrupt"})
            results: list[dict[str, Any]] = []
            answered = False

            def both(msg: dict[str, Any]) -> bool:
                nonlocal answered
                if msg.get("type") == "result":
                    results.append(msg)
                answered = answered or _answer_to(msg, interrupt) is not None
                return bool(results) and answered

            if not self._read_until(both):
                return False
            turn = Usage.from_dict(results[0].get("usage"))
            if turn.output_tokens > verdict.usage.output_tokens:
                verdict.usage = turn
        rewind = self._control(
            {"subtype": "rewind_conversation", "target_message_uuid": message_id}
        )
        answers: list[dict[str, Any]] = []

        def rewound(msg: dict[str, Any]) -> bool:
            answer = _answer_to(msg, rewind)
            if answer is not None:
                answers.append(answer)
            return answer is not None

        if not self._read_until(rewound):
            return False
        inner = answers[0].get("response")
        return (
            answers[0].get("subtype") == "success"
            and isinstance(inner, dict)
            and bool(inner.get("rewound"))
        )

    def _control(self, request: dict[str, Any]) -> str:
        request_id = f"skilltrigger-{next(self._requests)}"
        self._send({"type": "control_request", "request_id": request_id, "request": request})
        return request_id

    def _send(self, message: dict[str, Any]) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(message) + "\n")
            stdin.flush()
        except (OSError, ValueError):
            pass  # it died; its output ends, and says why

    def _read_until(self, done: Callable[[dict[str, Any]], bool]) -> bool:
        """Read output lines until one ``done`` accepts; False at the end of the output."""
        for raw in self._lines:
            line = raw.strip()
            if not line.startswith("{"):
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and done(msg):
                return True
        return False

    def kill(self) -> None:
        """Kill the process group and reap the process, from any thread (a thread may be
        reading its output: that read ends)."""
        self.reusable = False
        kill_group(self.proc)
        try:
            self.proc.wait(KILL_GRACE * 5)
        except subprocess.TimeoutExpired:
            pass

    def stop(self) -> None:
        """Kill it and close its pipes: by the thread that asks it, or once nobody does."""
        self.kill()
        self._err_reader.join(KILL_GRACE)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()


def _answer_to(msg: dict[str, Any], request_id: str) -> dict[str, Any] | None:
    """The CLI's answer to control request ``request_id``, if ``msg`` is it."""
    response = msg.get("response")
    if msg.get("type") != "control_response" or not isinstance(response, dict):
        return None
    return response if response.get("request_id") == request_id else None


def user_message(query: str, message_id: str) -> dict[str, Any]:
    """A user message of ``--input-format stream-json``: the query as a new conversation's
    first message, with the id a rewind names."""
    return {
        "type": "user",
        "uuid": message_id,
        "session_id": "",
        "parent_tool_use_id": None,
        "message": {"role": "user", "content": query},
    }


def query_line(query: str) -> str:
    """A query as one start's whole input: the line :meth:`WarmCli.ask` would send."""
    return json.dumps(user_message(query, str(uuid.uuid4()))) + "\n"


@contextlib.contextmanager
def _watchdog(seconds: float, on_timeout: Callable[[], None]) -> Iterator[None]:
    timer = threading.Timer(seconds, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def read_lines(stream: IO[str]) -> Iterator[str]:
    """Lines as the CLI writes them (``readline`` does not read ahead like iteration may);
    a pipe closed meanwhile ends them."""
    while True:
        try:
            line = stream.readline()
        except ValueError:
            return
        if not line:
            return
        yield line


def kill_group(proc: subprocess.Popen[str]) -> None:
    """Stop the CLI and everything it started at once (SIGKILL to its process group).

    Not SIGTERM first: a run decided at a ``Skill`` call is followed within moments by the
    CLI's next request, which a grace period lets it send (and the user pay for).
    """
    if proc.poll() is not None:
        return
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:
            proc.kill()
        else:
            killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
