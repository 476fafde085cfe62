"""The Messages API backend: one streamed request per run, shaped like Claude Code's.

The model sees a short agent system prompt, the ordinary tools (Bash, Read, Edit, Write), a
``Skill`` tool, and the skill listing as a reminder block before the user's query. The stable
prefix (tools, system, listing) is marked for prompt caching, so the many runs of one
description mostly pay cache-read prices. Credentials and the base URL come from the SDK's own
rules (``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, ...).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import anthropic

try:  # the SDK's HTTP client: a cut stream surfaces as its transport error, unwrapped
    from httpx2 import HTTPError as TransportError
except ImportError:  # older SDKs use httpx
    from httpx import HTTPError as TransportError

from pytest_skilltrigger.backends.base import BackendUnavailable
from pytest_skilltrigger.backends.sse import StreamError, decide
from pytest_skilltrigger.context import TriggerContext, one_line
from pytest_skilltrigger.outcome import RunOutcome
from pytest_skilltrigger.redact import redact
from pytest_skilltrigger.settings import DEFAULT_MODEL

SYSTEM_PROMPT = (
    "You are an agentic coding assistant working in the user's terminal and project folder. "
    "You help with software engineering and everyday computer tasks: reading and changing "
    "files, running commands, explaining code, and producing documents and data. Use the "
    "tools you are given to act rather than describing what you would do. Be concise.\n\n"
    "Skills are packaged instructions and resources for particular kinds of task. When a "
    "listed skill covers the user's request, call the Skill tool with its name before doing "
    "anything else, because the skill holds knowledge you do not have yet. Do not call it "
    "for skills that are not listed, and do not call it when no listed skill fits."
)

SKILL_TOOL: dict[str, Any] = {
    "name": "Skill",
    "description": (
        "Load a skill: a set of instructions, scripts and references packaged for one kind of "
        "task. Call this first whenever one of the skills listed in the conversation matches "
        "what the user is asking for. Only names from that listing are valid."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "skill": {"type": "string", "description": "The exact name of a listed skill."},
            "args": {"type": "string", "description": "Optional arguments for the skill."},
        },
        "required": ["skill"],
    },
}

ORDINARY_TOOLS: list[dict[str, Any]] = [
    {
        "name": "Bash",
        "description": "Run a shell command in the project folder and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
    {
        "name": "Read",
        "description": "Read a file from the local file system.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
    {
        "name": "Edit",
        "description": "Replace an exact string in a file with another string.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "old_string", "new_string"],
        },
    },
    {
        "name": "Write",
        "description": "Write a whole file, creating it or replacing its content.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["file_path", "content"],
        },
    },
]

LISTING_HEADER = "The following skills are available through the Skill tool:"
STREAM_RETRIES = 4
DRAIN_LINES = 400
FATAL_ERRORS = (
    anthropic.AuthenticationError,
    anthropic.PermissionDeniedError,
    anthropic.NotFoundError,
)


def listing_text(context: TriggerContext) -> str:
    """The listing block: a header line, then ``- name: description`` per skill."""
    lines = [f"- {s.name}: {one_line(s.description)}" for s in context.listing()]
    return (
        "<system-reminder>\n" + LISTING_HEADER + "\n\n" + "\n".join(lines) + "\n</system-reminder>"
    )


def build_request(context: TriggerContext, query: str, model: str) -> dict[str, Any]:
    """The keyword arguments of one ``messages.create`` call (without ``stream``)."""
    tools = [*ORDINARY_TOOLS, {**SKILL_TOOL, "cache_control": {"type": "ephemeral"}}]
    return {
        "model": model,
        "max_tokens": 4096,
        "system": [{"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}],
        "tools": tools,
        "tool_choice": {"type": "auto"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": listing_text(context),
                        "cache_control": {"type": "ephemeral"},
                    },
                    {"type": "text", "text": query},
                ],
            }
        ],
    }


def credentials_configured() -> bool:
    """True when the SDK would find credentials (env key or token, or a configured profile)."""
    try:
        client = anthropic.Anthropic(max_retries=0)
    except Exception:  # any failure here means "not configured"
        return False
    try:
        return bool(client.api_key or client.auth_token or client.credentials)
    finally:
        client.close()


class AnthropicBackend:
    """Runs trigger checks through the ``anthropic`` SDK, one shared client and pool."""

    name = "anthropic"

    def __init__(self, model: str = DEFAULT_MODEL, timeout: float = 30.0, max_retries: int = 4):
        if not credentials_configured():
            raise BackendUnavailable(
                "no Anthropic API credentials: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
            )
        self.model = model
        self.timeout = timeout
        self._client = anthropic.Anthropic(max_retries=max_retries, timeout=timeout)
        self._rng = random.Random()
        self._rng_lock = threading.Lock()
        self._closed = threading.Event()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(
            backend=self.name,
            model=self.model,
            request=build_request(context, "", self.model),
        )

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """One run; statuses are retried by the SDK, stream failures by this loop."""
        request = build_request(context, query, self.model)
        deadline = time.monotonic() + self.timeout * (STREAM_RETRIES + 1)
        for attempt in range(STREAM_RETRIES + 1):
            outcome, retryable = self._attempt(context.skill_name, request)
            if not retryable or attempt == STREAM_RETRIES or time.monotonic() >= deadline:
                return outcome
            if self._closed.wait(self._backoff(attempt)):
                return outcome  # the session is shutting down: no more retries
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int) -> float:
        with self._rng_lock:
            jitter = self._rng.uniform(0.75, 1.25)
        return min(8.0, 0.25 * (2**attempt)) * jitter

    def _attempt(self, skill_name: str, request: dict[str, Any]) -> tuple[RunOutcome, bool]:
        """One HTTP request; returns the outcome and whether a failure is worth retrying."""
        request_id: str | None = None
        try:
            with self._client.messages.with_streaming_response.create(
                **request, stream=True
            ) as response:
                request_id = response.http_response.headers.get("request-id")
                lines = response.iter_lines()
                decision = decide(lines)
                _drain(lines)
        except StreamError as exc:
            message = _with_id(f"stream error: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), exc.retryable
        except FATAL_ERRORS as exc:
            outcome = RunOutcome(
                "error", error=_describe(exc), request_id=exc.request_id, fatal=True
            )
            return outcome, False
        except anthropic.APIStatusError as exc:
            retry = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            return RunOutcome("error", error=_describe(exc), request_id=exc.request_id), retry
        except (anthropic.APIError, TransportError, OSError, ValueError) as exc:
            # connection errors, timeouts and streams cut while we read them
            message = _with_id(f"{type(exc).__name__}: {redact(str(exc))}", request_id)
            return RunOutcome("error", error=message, request_id=request_id), True
        status = "triggered" if decision.chosen == f"skill:{skill_name}" else "not_triggered"
        outcome = RunOutcome(
            status, chosen=decision.chosen, usage=decision.usage, request_id=request_id
        )
        return outcome, False

    def close(self) -> None:
        """Stop retrying and close the pool, which also aborts calls still in flight."""
        self._closed.set()
        self._client.close()


def _drain(lines: Iterator[str], limit: int = DRAIN_LINES) -> None:
    """Read the short tail of a decided stream without parsing it, so the connection goes
    back to the pool instead of being torn down (a new TLS handshake costs more than the
    few frames after a tool call). A stream with a long tail is simply closed."""
    for count, _line in enumerate(lines):
        if count >= limit:
            return


def _describe(exc: anthropic.APIStatusError) -> str:
    message = exc.api_message or str(exc)
    return _with_id(f"{exc.status_code} {exc.type or 'error'}: {redact(message)}", exc.request_id)


def _with_id(message: str, request_id: str | None) -> str:
    return f"{message} (request id {request_id})" if request_id else message
