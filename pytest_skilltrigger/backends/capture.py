"""Capturing the request the installed Claude Code CLI sends, to replay it through the API.

The CLI is run once per trigger context (the description under test and its siblings), in
the same isolated workspace as the claude-code backend's runs, against a recorder on
127.0.0.1 that keeps the first ``POST /v1/messages`` and answers it with a short ``end_turn``
message, so the CLI ends at once. The query it is given is a marker; the API backend then
sends that very request (system prompt, tools, reminders, listing, thinking, betas) with only
the marker replaced by each query. Nothing of Claude Code's text is kept in this project: it
comes from the user's own CLI, at run time.

Volatile parts are fixed once per capture: the session and device ids in ``metadata`` and the
workspace path in the system prompt are whatever the capture run had, and every replay of it
sends them unchanged, so the prompt-cache prefix stays the same from run to run. (A new
capture, for another description, has its own ids and so its own cache prefix.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

from pytest_skilltrigger.backends.api.request import MARKER, RequestTemplate
from pytest_skilltrigger.backends.claude_code.process import CliCall
from pytest_skilltrigger.backends.claude_code.stream import read_stream
from pytest_skilltrigger.backends.claude_code.workspace import WORKSPACE_LAYOUT
from pytest_skilltrigger.backends.looking_around import ProjectFiles
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.support.redact import redact


class CapturingCli(Protocol):
    """What the captures need of the Claude Code backend (a Protocol, so that this module,
    which that backend uses, names nothing of it)."""

    cli_version: str
    key_model: str

    def capture(self, context: TriggerContext) -> CapturedRequest: ...

    def close(self) -> None: ...


# Request headers that describe the request, not the caller: replayed as they were.
REPLAYED_HEADERS = ("anthropic-beta", "anthropic-version")


class CaptureError(Exception):
    """The CLI did not send a request that can be replayed."""


@dataclass(frozen=True)
class CapturedRequest:
    """The CLI's request with a marker for the query, ready to splice queries into."""

    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    cli_version: str
    workspace: str = ""  # the capture's workspace root, which the CLI writes into the prompt
    # what the CLI added after a file's numbered lines in its follow-up request, when the
    # capture went on through a Read (``--trigger-within=turn``): the API backend's follow-ups
    # add the same, so a replayed turn goes on as the user's CLI would
    read_suffix: str = ""

    @property
    def model(self) -> str:
        return str(self.body.get("model") or "")

    def key_material(self) -> str:
        """What identifies the request for the store: the body without what differs from
        capture to capture of the same context (the workspace path, in both the forms the
        CLI writes it, and the session and device ids in ``metadata``), and the headers."""
        body = {k: v for k, v in self.body.items() if k != "metadata"}
        text = json.dumps([body, self.headers, self.path], ensure_ascii=False, sort_keys=True)
        if self.workspace:
            text = text.replace(self.workspace, "<workspace>")
            text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", self.workspace), "<workspace>")
        return text

    def template(self) -> RequestTemplate:
        """The request to send for each query: the body with the query where the marker is,
        the replayed headers, on the beta endpoint as the CLI sends it."""
        try:
            return RequestTemplate(self.body, self.headers, beta=True)
        except ValueError:
            raise CaptureError(
                "the captured request does not hold the query exactly once"
            ) from None

    def to_json(self) -> str:
        return json.dumps(
            {
                "body": self.body,
                "headers": self.headers,
                "path": self.path,
                "cli_version": self.cli_version,
                "workspace": self.workspace,
                "read_suffix": self.read_suffix,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> CapturedRequest:
        data = json.loads(text)
        return cls(
            data["body"],
            dict(data["headers"]),
            data["path"],
            data["cli_version"],
            data.get("workspace", ""),
            data.get("read_suffix", ""),
        )


# The file a turn's capture has the CLI read (written into the capture's own workspace, never
# the user's folder), and the id of that call.
PROBE_FILE = ".skilltrigger-probe.txt"
PROBE_TEXT = "a file read to record the follow-up request\n"
PROBE_ID = "toolu_probe"


class _Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reads: str | None = None, probe: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _RecorderHandler)
        self.recorded: list[tuple[str, dict[str, str], bytes]] = []
        # a file the first answer reads (how a session finds a subfolder's skills)
        self.reads = reads
        # a file the answer to the query reads, to record the CLI's follow-up request
        self.probe = probe
        self.probed = False

    def read_asked(self, raw: bytes) -> tuple[str, str] | None:
        """The tool id and the file the answer to this request reads, if it reads one."""
        if self.reads is not None and len(self.recorded) == 1:
            return "toolu_capture", self.reads
        if self.probe is not None and not self.probed and MARKER.encode() in raw:
            self.probed = True
            return PROBE_ID, self.probe
        return None


class _RecorderHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        server: _Recorder = self.server  # type: ignore[assignment]
        headers = {k.lower(): v for k, v in self.headers.items()}
        server.recorded.append((self.path, headers, raw))
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": "OK"}
        stop = "end_turn"
        asked = server.read_asked(raw)
        if asked is not None:
            block = {"type": "tool_use", "id": asked[0], "name": "Read", "input": {}}
            delta = {
                "type": "input_json_delta",
                "partial_json": json.dumps({"file_path": asked[1]}),
            }
            stop = "tool_use"
        events = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_capture",
                        "type": "message",
                        "role": "assistant",
                        "model": "capture",
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 1, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": block,
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": delta,
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": 1},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        payload = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def record_cli_request(
    call: CliCall, cli_version: str, workspace: str, given: Callable[[str], str]
) -> CapturedRequest:
    """Run the CLI with the marker as its query against a recorder; its first request (the
    one after the Read, when the call lets a Read through to find a subfolder's skills).
    ``given`` is what the CLI reads on stdin for a query (as trigger runs give it)."""
    probe = None
    if call.rule is not None:
        probe = os.path.join(call.cwd, PROBE_FILE)
        Path(probe).write_text(PROBE_TEXT, encoding="utf-8")
    recorder = _Recorder(call.passes, probe)
    thread = threading.Thread(target=recorder.serve_forever, daemon=True)
    thread.start()
    try:
        env = {**call.env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{recorder.server_address[1]}"}
        try:
            done = subprocess.run(
                call.command,
                input=given(MARKER),
                cwd=call.cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=call.timeout,
                check=False,
                start_new_session=True,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CaptureError(redact(f"claude did not run: {exc}")) from None
    finally:
        recorder.shutdown()
        recorder.server_close()
    shown = read_stream(done.stdout.splitlines(), call.passes)
    if shown.error and not shown.undecided:  # a hook or a server of the project's failed
        raise CaptureError(redact(shown.error))
    recorded = recorder.recorded[1:] if call.passes is not None else recorder.recorded
    for at, (path, headers, raw) in enumerate(recorded):
        try:
            body = json.loads(raw)
        except ValueError:
            continue
        if isinstance(body, dict) and MARKER in raw.decode("utf-8", "replace"):
            kept = {k: headers[k] for k in REPLAYED_HEADERS if k in headers}
            suffix = _read_suffix(recorded[at + 1 :], probe) if probe else ""
            return CapturedRequest(
                body, kept, path.split("?", 1)[0], cli_version, workspace, suffix
            )
    tail = redact((done.stderr or done.stdout).strip()[-500:])
    raise CaptureError(f"claude sent no request holding the query (exit {done.returncode}): {tail}")


def _read_suffix(after: list[tuple[str, dict[str, str], bytes]], probe: str) -> str:
    """What the CLI's follow-up request added after the probe file's numbered lines (a
    reminder of its own, say); empty when it added nothing or sent no follow-up."""
    ours = ProjectFiles(os.path.dirname(probe)).answer("Read", {"file_path": probe}).content
    for _path, _headers, raw in after[:1]:
        for block in _tool_results(json.loads(raw)):
            content = block.get("content")
            text = content if isinstance(content, str) else _first_text(content)
            if block.get("tool_use_id") == PROBE_ID and isinstance(ours, str):
                return text[len(ours) :] if text.startswith(ours) else ""
    return ""


def _tool_results(body: Any) -> list[dict[str, Any]]:
    messages = body.get("messages") if isinstance(body, dict) else None
    blocks = [b for m in messages or [] if isinstance(m, dict) for b in _blocks(m)]
    return [b for b in blocks if b.get("type") == "tool_result"]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _first_text(content: Any) -> str:
    texts = [b.get("text") for b in content or [] if isinstance(b, dict)]
    return next((t for t in texts if isinstance(t, str)), "")


class CaptureStore(Protocol):
    """Where captures are kept between sessions (the engine's
    :class:`~pytest_skilltrigger.engine.store.StoredCaptures`, which knows whether this process
    may write; a :class:`~pytest_skilltrigger.engine.store.ResultStore` also serves)."""

    def load_capture(self, key: str) -> str | None: ...

    def save_capture(self, key: str, request: str) -> None: ...


class Captures:
    """One captured request per trigger context: captured on first need, then reused (and,
    with a store, reused by later sessions of the same CLI version and model).

    The CLI backend that captures is made on first need too (``make_cli``): a session whose
    captures all come from the store never starts it. A capture that failed is not tried
    again for the same context: the error comes back at once.
    """

    def __init__(
        self,
        make_cli: Callable[[], CapturingCli],
        store: CaptureStore | None = None,
    ) -> None:
        self._make_cli = make_cli
        self.store = store  # it decides whether this process may write (xdist workers not)
        self._lock = threading.Lock()
        self._locks: dict[TriggerContext, threading.Lock] = {}
        self._done: dict[TriggerContext, tuple[CapturedRequest, RequestTemplate]] = {}
        self._failed: dict[TriggerContext, CaptureError] = {}

    @cached_property
    def backend(self) -> CapturingCli:
        """The CLI backend whose workspace, isolation and binary the captures use."""
        return self._make_cli()

    @property
    def cli_version(self) -> str:
        return str(self.backend.cli_version)

    def store_key(self, context: TriggerContext) -> str:
        return context.key(
            capture="claude-code",
            cli_version=self.cli_version,
            model=self.backend.key_model,
            workspace=WORKSPACE_LAYOUT,
        )

    def get(self, context: TriggerContext) -> tuple[CapturedRequest, RequestTemplate]:
        """The captured request of ``context`` and the template its runs send."""
        with self._lock:
            found = self._done.get(context)
            lock = self._locks.setdefault(context, threading.Lock())
        if found is not None:
            return found
        with lock:  # one capture per context, however many runs wait for it
            with self._lock:
                found = self._done.get(context)
                failed = self._failed.get(context)
            if found is not None:
                return found
            if failed is not None:
                raise failed
            try:
                captured = self._load(context) or self._capture(context)
                found = (captured, captured.template())
            except CaptureError as exc:
                with self._lock:
                    self._failed[context] = exc
                raise
            with self._lock:
                self._done[context] = found
            return found

    def _load(self, context: TriggerContext) -> CapturedRequest | None:
        if self.store is None:
            return None
        text = self.store.load_capture(self.store_key(context))
        return CapturedRequest.from_json(text) if text else None

    def _capture(self, context: TriggerContext) -> CapturedRequest:
        captured = self.backend.capture(context)
        if self.store is not None:
            self.store.save_capture(self.store_key(context), captured.to_json())
        return captured

    def close(self) -> None:
        """Close the capturing CLI's backend, if one was made."""
        if "backend" in self.__dict__:
            self.backend.close()
