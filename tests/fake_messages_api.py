"""A local HTTP server that speaks enough of the Anthropic Messages API to test against.

Why it exists: the plugin, the benchmarks and (later) the real Claude Code CLI must run
offline and deterministically, yet still meet what the real service does to a client: real
sockets, HTTP/1.1 keep-alive, server-sent events written frame by frame, thinking blocks,
text preambles before tool calls, ``ping`` frames in odd places, tool input split into tiny
JSON fragments, prompt-cache accounting, and faults (429, 5xx, an ``error`` event inside a
200 stream, a connection cut mid-stream, a hang). It also keeps Message Batches (create, poll,
cancel, JSONL results) with what makes real batches awkward: polls that stay in progress,
results in no particular order, per-request errors and expiry, answers cut at ``max_tokens``.
Mocking the HTTP client would hide exactly the bugs this server is meant to expose, so it is a
real server on 127.0.0.1 and nothing else.

Rate limits (:class:`RateLimits`, off unless given) are enforced as the real API enforces
them: token buckets for requests, input tokens and output tokens per minute that refill
continuously, ``anthropic-ratelimit-*`` headers on every ``/v1/messages`` answer, and a 429
``rate_limit_error`` naming the limit with a ``retry-after`` that is the real wait. That differs
from an injected ``"429"`` fault (:attr:`FakeMessagesAPI.faults`, or ``fail_first_tries``): a
fault is drawn at random (or by attempt number) regardless of traffic, says ``retry-after: 0``
and waiting does not matter; a rate limit depends only on the traffic and the clock, and only
waiting (or sending less) gets a request through. They are counted apart:
``stats["rate_limited"]`` versus ``stats["faults_injected"]`` / ``stats["first_try_faults"]``.

Standard library only, so it can run anywhere the tests run::

    python -m tests.fake_messages_api --port 8765 --latency 0.25 --rpm 60 --minute 6
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import random
import re
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "FAULT_KINDS",
    "FIRST_TRY_KINDS",
    "FakeMessagesAPI",
    "RateLimits",
    "ServerOptions",
    "decide",
    "extract_query",
    "parse_listing",
]

#: Fault kinds understood by :attr:`FakeMessagesAPI.faults`, in the order rates are stacked.
FAULT_KINDS: tuple[str, ...] = ("429", "529", "500", "stream_error", "drop", "hang")

# A listing line: ``- name: text``, ``- plugin:folder: text`` or, when the frontmatter name
# differs from the folder, ``- folder (name): text``; the name up to the first ": ".
LISTING_RE = re.compile(
    r"^- (?P<name>[^\s(]+?)(?: \((?P<alias>[^)\n]+)\))?: (?P<desc>.+)$", re.MULTILINE
)
# The line that opens the skills section (the CLI's and the plugin's builtin header both
# start so); the lines after it, to the first empty line, are the listing.
LISTING_HEADER_START = "The following skills are available"
WORD_RE = re.compile(r"\w+")
# A path-like token ending in an extension ("src/app.py", "~/notes.md", "report.csv").
PATH_RE = re.compile(
    r"(?<![\w/.~-])((?:~|\.{1,2})?/?(?:[\w.-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/])"
)
NOT_PATHS = frozenset({"e.g", "i.e", "etc", "vs"})
BACKTICK_RE = re.compile(r"`([^`\n]+)`")
COMMAND_WORDS = frozenset(
    {"run", "running", "execute", "install", "grep", "command", "commands", "terminal", "shell"}
)
# A word list: rows of words read better than one word a line (the formatter's layout).
# fmt: off
STOPWORDS = frozenset(
    {
        "this", "that", "with", "from", "have", "will", "when", "what", "your", "into", "them",
        "then", "they", "some", "like", "want", "need", "please", "help", "could", "would",
        "should", "about", "just", "file", "files", "these", "those", "make", "using", "use",
        "used", "does", "done", "there", "their", "which", "where", "while", "been", "were",
        "also", "only", "more", "most", "very", "than", "each", "other", "here", "over", "such",
        "much", "many", "wants", "thing", "things", "something", "anything", "everything", "know",
        "think", "sure", "okay", "thanks", "thank", "able", "after", "before", "again", "being",
        "both", "because", "really", "still", "even", "well", "good", "great", "needs", "give",
        "take", "find", "show", "tell", "look", "looks", "work", "works",
    }
)
# fmt: on

PREAMBLE = "I'll take a look at that."
THINKING_TEXT = (
    "The user wants something done. Let me check whether one of the available tools or "
    "skills covers this request before answering."
)
TEXT_ANSWER = "Here is a short answer: this can be done directly, no tool is needed."
DONE_TEXT = "Done."

# --------------------------------------------------------------------------------------------
# The request model: pure functions, so the plugin's own tests can reuse them.
# --------------------------------------------------------------------------------------------


def _block_texts(content: Any) -> Iterator[str]:
    """Yield the texts of a message/system content (a string or a list of blocks).

    Why recursive into ``tool_result``: Claude Code nests text there and a lenient reader
    must not miss it.
    """
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            yield block["text"]
        elif block.get("type") == "tool_result":
            yield from _block_texts(block.get("content"))


def _message_texts(body: dict[str, Any]) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [t for m in messages if isinstance(m, dict) for t in _block_texts(m.get("content"))]


def _system_texts(body: dict[str, Any]) -> list[str]:
    return list(_block_texts(body.get("system")))


def _skill_tool(body: dict[str, Any]) -> dict[str, Any] | None:
    tools = body.get("tools")
    if not isinstance(tools, list):
        return None
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == "Skill":
            return tool
    return None


def parse_listing(body: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the ``(name, description)`` pairs offered to the model, first occurrence wins.

    Why messages first and the system prompt only as a fallback: Claude Code's long system
    prompt has bullet lines shaped like listing lines; reading them as skills would make the
    fake pick nonsense "skills" whenever a real listing is present in the conversation.
    """
    sources = _message_texts(body)
    tool = _skill_tool(body)
    if tool is not None and isinstance(tool.get("description"), str):
        sources.append(tool["description"])
    found = _listing_from(sources)
    if not found:
        found = _listing_from(_system_texts(body))
    return found


BARE_RE = re.compile(
    r"^- (?P<name>[^\s(:]+(?::[^\s(:]+)?)(?: \((?P<alias>[^)\n]+)\))?$", re.MULTILINE
)


def bare_names(body: dict[str, Any]) -> list[str]:
    """The skills a request lists as bare names (``- name``, no text: past the listing
    budget), in order, from its messages."""
    return [
        m.group("name")
        for text in _listing_sections(_message_texts(body))
        for m in BARE_RE.finditer(text)
    ]


def _listing_sections(texts: list[str]) -> list[str]:
    """The skills sections of ``texts``: what follows a skills header up to the first empty
    line after the listing. Why: Claude Code's context has other bullet lists (its agent
    types) shaped like listing lines. Texts without a header are taken whole when none has
    one (a listing written some other way)."""
    sections = []
    for text in texts:
        at = text.find(LISTING_HEADER_START)
        if at < 0:
            continue
        lines = text[at:].split("\n")[1:]
        while lines and not lines[0].strip():
            lines.pop(0)
        end = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
        sections.append("\n".join(lines[:end]))
    return sections or texts


def _listing_from(texts: list[str]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for text in _listing_sections(texts):
        for m in LISTING_RE.finditer(text):
            seen.setdefault(m.group("name"), m.group("desc").strip())
    return list(seen.items())


def extract_query(body: dict[str, Any]) -> str:
    """Return the user's query: the last user text that is neither a reminder nor a listing.

    Why so lenient: the plugin puts the listing in a block before the query, Claude Code in a
    separate message after it; both must yield the same query.
    """
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        for text in reversed(list(_block_texts(message.get("content")))):
            if text.lstrip().startswith("<system-reminder>") or LISTING_RE.search(text):
                continue
            if text.strip():
                return text
    return ""


def _read_answered(body: dict[str, Any]) -> int | None:
    """The index of the assistant message whose ``Read`` the request's last user message
    answers (a session reading its way into a subfolder's skills), else None: such a
    request still asks for the decision on the query before it."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users or users[-1] == 0:
        return None
    content = messages[users[-1]].get("content")
    if not isinstance(content, list) or not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return None
    before = messages[users[-1] - 1]
    calls = [
        b
        for b in before.get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if before.get("role") == "assistant" and calls and calls[-1].get("name") == "Read":
        return users[-1] - 1
    return None


def _has_tool_result(body: dict[str, Any]) -> bool:
    """Whether the request goes on with a turn: its last user message answers a tool call
    (a new prompt after an earlier turn's tools starts a new decision)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


@functools.lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    """Content words of ``text``; cached because the same descriptions recur on every call."""
    return frozenset(w for w in WORD_RE.findall(text.lower()) if len(w) >= 4 and w not in STOPWORDS)


_SUFFIXES = ("ings", "ing", "ions", "ion", "ers", "er", "ed", "es", "s", "e")


@functools.lru_cache(maxsize=16384)
def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _match(a: str, b: str) -> bool:
    """Whether two words count as the same for scoring.

    Equal; or one a prefix of the other with at least 5 shared characters ("chart"/"charts");
    or the same light stem ("merging"/"merge", which share only "merg").
    """
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) >= 5 and long_.startswith(short):
        return True
    sa, sb = _stem(a), _stem(b)
    return sa == sb and len(sa) >= 4


def score(query: str, description: str) -> int:
    """How many distinct content words of ``query`` match a word of ``description``."""
    desc = _words(description)
    return sum(1 for q in _words(query) if q in desc or any(_match(q, d) for d in desc))


def decide(query: str, listing: list[tuple[str, str]], min_overlap: int = 2) -> str:
    """The keyword model: ``"skill:<name>"``, ``"tool:Bash"``, ``"tool:Read"`` or ``"text"``.

    Deterministic on purpose, so tests can state what "should trigger" means for the fake.
    """
    best_name, best = None, -1
    for name, desc in listing:
        s = score(query, desc)
        if s > best:
            best_name, best = name, s
    if best_name is not None and best >= min_overlap:
        return f"skill:{best_name}"
    raw = set(WORD_RE.findall(query.lower()))
    if raw & COMMAND_WORDS:
        return "tool:Bash"
    if _find_path(query):
        return "tool:Read"
    return "text"


def _find_path(query: str) -> str | None:
    for m in PATH_RE.finditer(query):
        if m.group(1).lower() not in NOT_PATHS:
            return m.group(1)
    return None


def _tool_input(name: str, query: str) -> dict[str, Any]:
    """A plausible input for a non-Skill tool call, so clients that inspect it get a value."""
    if name == "Bash":
        m = BACKTICK_RE.search(query)
        return {"command": m.group(1) if m else "ls -la", "description": "Run the command"}
    if name == "Read":
        return {"file_path": _find_path(query) or "README.md"}
    return {}


def _estimate(text: str) -> int:
    return (len(text) + 3) // 4


def _is_trigger(body: dict[str, Any]) -> bool:
    """Whether ``body`` asks for a trigger decision (else it is an improvement request).

    An improvement prompt sent through Claude Code carries the Skill tool too: the answer
    format the prompt asks for tells it apart from a trigger request.
    """
    asks_description = any("<new_description>" in t for t in _message_texts(body))
    return _skill_tool(body) is not None and not asks_description


_DRAFT_FILLERS = (
    "today",
    "for the team",
    "before friday",
    "again",
    "quickly",
    "for my boss",
    "this week",
    "for the report",
    "properly",
    "once more",
)


# the fillers of a draft asked again after a refused answer: other requests than the first's
_REPAIR_FILLERS = (
    "by noon",
    "for the board",
    "after lunch",
    "for the audit",
    "in bulk",
    "for the client",
    "before the demo",
    "for our wiki",
    "step by step",
    "without losing data",
)
REPAIR_MARK = "An earlier answer to this could not be used"


def drafted_set(prompt: str, stubborn: bool = False) -> str:
    """A stand-in improve model's eval set for a draft request: ten should-trigger queries
    made of the skill's own description words, ten near misses made of each sibling skill's
    words (another skill's territory), in a code fence as models often answer. It ignores
    what the set has already (as the issue that found it saw: the same twenty again), but a
    repair request gets other requests, unless ``stubborn``."""
    own = re.search(r"^description:\s*(.+)$", prompt, re.M)
    words = _content_words(own.group(1) if own else "")
    siblings = re.findall(
        r"^- ([\w-]+): (.+)$", prompt.split("Skills of the same project", 1)[-1], re.M
    )
    other = [w for _name, text in siblings for w in _content_words(text)] or [
        "poem",
        "weather",
        "recipe",
        "holiday",
        "football",
        "garden",
    ]
    entries = []
    fillers = _REPAIR_FILLERS if REPAIR_MARK in prompt and not stubborn else _DRAFT_FILLERS
    for i, filler in enumerate(fillers):
        pick = [words[(i + k) % len(words)] for k in range(3)] if words else ["help"]
        entries.append({"query": f"please {' '.join(pick)} {filler}", "should_trigger": True})
        near = [other[(2 * i + k) % len(other)] for k in range(3)]
        entries.append({"query": f"could you {' '.join(near)} {filler}", "should_trigger": False})
    for entry in entries[:4]:  # a few asked mid-conversation, as the request asks
        entry["history"] = [
            {"role": "user", "content": f"hello, a question first about {filler}s"},
            {"role": "assistant", "content": "Sure. What would you like to know?"},
        ]
    return "Here is the eval set:\n```json\n" + json.dumps(entries, indent=1) + "\n```\n"


def _content_words(text: str) -> list[str]:
    """The words of a description worth matching on (the keyword model's terms)."""
    seen: dict[str, None] = {}
    for word in re.findall(r"[a-z]{4,}", text.lower()):
        if word not in {"when", "with", "that", "this", "from", "your", "user", "wants", "skill"}:
            seen.setdefault(word)
    return list(seen)


def _current_description(body: dict[str, Any]) -> str | None:
    for text in _system_texts(body) + _message_texts(body):
        start = text.find("<current_description>")
        if start < 0:
            continue
        start += len("<current_description>")
        end = text.find("</current_description>", start)
        if end >= 0:
            return text[start:end].strip()
    return None


def _tool_segments(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    tools = body.get("tools")
    return [
        (
            json.dumps({k: v for k, v in tool.items() if k != "cache_control"}, sort_keys=True),
            _ttl(tool),
        )
        for tool in (tools if isinstance(tools, list) else [])
        if isinstance(tool, dict)
    ]


def _system_segments(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    system = body.get("system")
    if isinstance(system, str):
        return [(system, None)]
    segments: list[tuple[str, str | None]] = []
    for block in system if isinstance(system, list) else []:
        if isinstance(block, dict):
            text = str(block.get("text", ""))
            if not text.startswith(BILLING_HEADER):  # per-request attribution: not cached
                segments.append((text, _ttl(block)))
    return segments


def _message_segments(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    messages = body.get("messages")
    segments: list[tuple[str, str | None]] = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        role = str(message.get("role"))
        if isinstance(content, str):
            segments.append((role + content, None))
            continue
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict):
                text = block.get("text")
                if not isinstance(text, str):
                    rest = {k: v for k, v in block.items() if k != "cache_control"}
                    text = json.dumps(rest, sort_keys=True)
                segments.append((role + text, _ttl(block)))
    return segments


def _segments(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The prompt in cache order (tools, system, messages): ``(text, breakpoint lifetime)``."""
    return _tool_segments(body) + _system_segments(body) + _message_segments(body)


def _cache_keys(body: dict[str, Any], segments: list[tuple[str, str | None]]) -> dict[int, str]:
    """The cache key of the prefix ending at each breakpoint, by the breakpoint's index."""
    last = max((i for i, (_, c) in enumerate(segments) if c), default=-1)
    digest = hashlib.sha256(str(body.get("model")).encode())
    keys: dict[int, str] = {}
    for i, (text, marked) in enumerate(segments[: last + 1]):
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
        if marked:
            keys[i] = digest.copy().hexdigest()
    return keys


def _cached_usage(segments: list[tuple[str, str | None]], total: int, hit: int) -> dict[str, Any]:
    """Usage when the prefix up to segment ``hit`` (-1: none) is read from the cache and the
    rest up to the last breakpoint is written."""
    last = max((i for i, (_, c) in enumerate(segments) if c), default=-1)
    read = sum(_estimate(t) for t, _ in segments[: hit + 1])
    prefix = sum(_estimate(t) for t, _ in segments[: last + 1])
    # writes up to the last one-hour breakpoint are kept an hour (the API wants those
    # breakpoints first), the rest five minutes; reported apart, as the API does
    long = max((i for i, (_, ttl) in enumerate(segments) if ttl == "1h"), default=-1)
    hour = max(sum(_estimate(t) for t, _ in segments[: long + 1]) - read, 0)
    return {
        "input_tokens": max(total - prefix, 0),
        "cache_creation_input_tokens": prefix - read,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": prefix - read - hour,
            "ephemeral_1h_input_tokens": hour,
        },
    }


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    api: FakeMessagesAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up or refuses our certificate is not a server fault: no trace."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One connection; serves many requests on it (HTTP/1.1 keep-alive) like the real API."""

    protocol_version = "HTTP/1.1"
    server_version = "fake-messages-api"
    sys_version = ""
    # Small frames must leave at once: with Nagle plus delayed ACK every keep-alive request
    # would stall ~40 ms, which would swamp benchmark numbers.
    disable_nagle_algorithm = True
    server: _Server
    rate_headers = False  # whether this request's answer carries ``anthropic-ratelimit-*``

    def setup(self) -> None:
        api = self.server.api
        if api.tls is not None:
            self.request.do_handshake()
            api._bump("alpn", str(self.request.selected_alpn_protocol()))
        # applied to the socket by StreamRequestHandler.setup (typeshed: a class variable)
        self.timeout = api.idle_timeout  # type: ignore[misc]
        super().setup()
        api._connection_opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.api._connection_closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging: it costs CPU and floods test output."""

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError):
            # The client left (closed a stream early, timed out): nothing to answer.
            self.close_connection = True

    # Everything that is not POST is a 404 (but GET on batch paths), answered properly so
    # keep-alive survives. ``self.command``: a DELETE must not pass for a GET.
    def do_GET(self) -> None:
        self.server.api._handle(self, self.command)

    do_PUT = do_DELETE = do_PATCH = do_GET

    def do_HEAD(self) -> None:
        self.server.api._handle(self, "HEAD")

    def do_POST(self) -> None:
        self.server.api._handle(self, "POST")

    # -- low-level writing --------------------------------------------------------------------

    def read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        return b""

    def start(self, status: int, headers: dict[str, str]) -> None:
        if self.rate_headers:  # the state of the rate limits as the answer starts
            headers = {**headers, **self.server.api.ratelimit_headers()}
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def write_chunk(self, data: bytes) -> None:
        """One chunk per frame, written in one call: the client sees frames as they come."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")


def _frame(event: str, data: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (
        event.encode(),
        json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode(),
    )


# Claude Code puts a per-request attribution line first in its system prompt; the real API
# reads it as billing metadata, so it does not break the cached prefix. Neither may it here.
BILLING_HEADER = "x-anthropic-billing-header:"


# --------------------------------------------------------------------------------------------
# Message Batches: the pieces that do not need the server (its handlers are in the class)
# --------------------------------------------------------------------------------------------

BATCH_LIMIT = 100_000  # requests the real API takes in one batch
CUSTOM_ID_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # used with fullmatch: "$" would pass "id\n"
BATCH_PATH_RE = re.compile(r"/v1/messages/batches/(?P<id>[^/]+)(?:/(?P<action>results|cancel))?")
#: The result types of a batch request, in the order ``request_counts`` lists them.
BATCH_RESULT_TYPES: tuple[str, ...] = ("succeeded", "errored", "canceled", "expired")
#: What :meth:`FakeMessagesAPI.batch_script` accepts (plus ``"errored:<error type>"``).
BATCH_SCRIPT_RESULTS = frozenset({"ok", "errored", "expired"})
BATCH_ERROR_MESSAGES = {
    "overloaded_error": "Overloaded",
    "api_error": "Internal server error",
    "rate_limit_error": "Number of requests has exceeded your rate limit",
}
#: The error type the real API gives with each status a create can be refused with.
CREATE_REFUSAL_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
#: The usage fields a succeeded batch request is billed for (tallied in ``batch_usage``).
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _ttl(block: dict[str, Any]) -> str | None:
    """A content block's cache breakpoint: its lifetime ("5m" or "1h"), None when unmarked."""
    marker = block.get("cache_control")
    if not isinstance(marker, dict):
        return None
    return "1h" if marker.get("ttl") == "1h" else "5m"


def _iso(moment: datetime) -> str:
    """RFC 3339 in UTC with a ``Z``, as the real API writes its timestamps."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _errored(etype: str, message: str) -> dict[str, Any]:
    """A batch result for a request that failed (the error body a live call would get)."""
    return {
        "type": "errored",
        "error": {"type": "error", "error": {"type": etype, "message": message}},
    }


def batch_problem(body: Any) -> str | None:
    """Why a create-batch body is refused with a 400 (the message), or None if it is taken.

    Only what the real API checks when the batch is created; a bad ``params`` value beyond a
    missing ``model``/``messages`` (unknown model, no ``max_tokens``) is found per request
    while processing and comes back as an ``errored`` result instead.
    """
    if not isinstance(body, dict):
        return "The request body is not valid JSON (an object is required)."
    requests = body.get("requests")
    if not isinstance(requests, list):
        return "requests: Field required" if "requests" not in body else "requests: not a list"
    if not requests:
        return "requests: List should have at least 1 item after validation, not 0"
    if len(requests) > BATCH_LIMIT:
        return f"requests: List should have at most {BATCH_LIMIT} items, not {len(requests)}"
    seen: set[str] = set()
    for i, item in enumerate(requests):
        problem = _batch_item_problem(f"requests.{i}", item, seen)
        if problem is not None:
            return problem
    return None


#: The ``stats`` counter each Message Batches action bumps.
BATCH_ACTION_STATS = {
    "create": "batch_creates",
    "retrieve": "batch_polls",
    "results": "batch_results_fetches",
    "cancel": "batch_cancels",
}


def _batch_route(method: str, path: str) -> tuple[str, str] | None:
    """``(action, batch id)`` of a Message Batches request, None for any other path.

    Listing batches is not imitated: a GET of the collection is a 404 like any unknown path.
    """
    if path == "/v1/messages/batches":
        return ("create", "") if method == "POST" else None
    m = BATCH_PATH_RE.fullmatch(path)
    if m is None:
        return None
    action = {
        ("GET", None): "retrieve",
        ("GET", "results"): "results",
        ("POST", "cancel"): "cancel",
    }.get((method, m["action"]), "")
    return (action, m["id"]) if action else None


def _create_refusal(refused: int | tuple[int, float]) -> _Refusal:
    """The answer to a create refused by ``batch_create_refusals`` (a status, or a status and
    the ``retry-after`` seconds to send), with the error type the real API gives."""
    status, wait = refused if isinstance(refused, tuple) else (refused, None)
    etype = CREATE_REFUSAL_TYPES.get(status, "api_error")
    message = BATCH_ERROR_MESSAGES.get(etype, f"{etype} (scripted)")
    headers = dict(_RETRY) if status in (429, 529) else {}
    if wait is not None:
        headers["retry-after"] = f"{wait:g}"
    return _Refusal(status, etype, message, headers)


def _batch_item_problem(where: str, item: Any, seen: set[str]) -> str | None:
    """Why one request of a batch is refused at creation (the message), or None; adds its
    ``custom_id`` to ``seen``."""
    if not isinstance(item, dict):
        return f"{where}: Input should be a valid dictionary"
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not CUSTOM_ID_RE.fullmatch(custom_id):
        return f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
    if custom_id in seen:
        return f"{where}.custom_id: {custom_id!r} is not unique within the batch"
    seen.add(custom_id)
    params = item.get("params")
    if not isinstance(params, dict):
        return f"{where}.params: Input should be a valid dictionary"
    for key, kind in (("model", str), ("messages", list)):
        if not isinstance(params.get(key), kind):
            return f"{where}.params.{key}: Field required"
    if params.get("stream") is True:
        return f"{where}.params.stream: streaming is not supported in a batch"
    return None


@dataclass
class _Batch:
    """One Message Batch; every field is read and changed under ``lock`` only.

    ``shown`` is how many requests the in-progress counts report as done; a cancel lets
    exactly those be processed and cancels the rest. ``results`` are the JSONL lines, decided
    when the batch ends and kept in their (shuffled) order.
    """

    id: str
    requests: list[tuple[str, dict[str, Any]]]
    created_at: datetime
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    status: str = "in_progress"  # then "canceling" (after a cancel) or "ended"
    hold: int = 1  # retrieves that find it in progress; the one after ends it
    polls: int = 0
    shown: int = 0
    cancel_initiated_at: datetime | None = None
    ended_at: datetime | None = None
    results_url: str | None = None
    results: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def as_json(self) -> dict[str, Any]:
        """The ``MessageBatch`` object (``BetaMessageBatch`` has the same fields)."""
        counts = {"processing": 0, **dict.fromkeys(BATCH_RESULT_TYPES, 0)}
        if self.status == "ended":
            for line in self.results:
                counts[line["result"]["type"]] += 1
        else:
            counts["processing"] = len(self.requests) - self.shown
            counts["succeeded"] = self.shown
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": counts,
            "ended_at": _iso(self.ended_at) if self.ended_at else None,
            "created_at": _iso(self.created_at),
            "expires_at": _iso(self.created_at + timedelta(hours=24)),
            "archived_at": None,
            "cancel_initiated_at": (
                _iso(self.cancel_initiated_at) if self.cancel_initiated_at else None
            ),
            "results_url": self.results_url,
        }


# --------------------------------------------------------------------------------------------
# Error answers, faults and rate limits
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Refusal:
    """An error answer: status, error type, message and headers of its own."""

    status: int
    etype: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    limit: str = ""  # the rate limit's bucket that refused the request ("requests"...)


_RETRY = {"x-should-retry": "true"}
#: The answers of the faults that refuse a request outright (``"stream_error"`` on a request
#: that is not streamed is answered as a ``"529"``).
_FAULT_REFUSALS = {
    "429": _Refusal(
        429,
        "rate_limit_error",
        "Number of requests has exceeded your rate limit",
        {"retry-after": "0", **_RETRY},
    ),
    "500": _Refusal(500, "api_error", "Internal server error", _RETRY),
    "529": _Refusal(529, "overloaded_error", "Overloaded", _RETRY),
}
#: Statuses :attr:`FakeMessagesAPI.fail_first_tries` understands.
FIRST_TRY_KINDS: tuple[str, ...] = tuple(_FAULT_REFUSALS)


def _fault_refusal(
    fault: str | None, stream: bool, retry_after_ms: float | None
) -> _Refusal | None:
    """The error answer of an injected fault, or None when the fault is not an error status."""
    if fault == "stream_error" and not stream:
        fault = "529"
    refusal = _FAULT_REFUSALS.get(fault or "")
    if refusal is None or retry_after_ms is None:
        return refusal
    return replace(refusal, headers={**refusal.headers, "retry-after-ms": str(retry_after_ms)})


def _whole_seconds(seconds: float) -> str:
    """A ``retry-after`` value: whole seconds, rounded up, at least 1 (as the real API)."""
    return str(max(1, math.ceil(seconds)))


@dataclass(frozen=True)
class RateLimits:
    """Per-server rate limits, each enforced with a token bucket, as the real API does.

    ``rpm``, ``itpm``, ``otpm``: requests, input tokens and output tokens per minute (None: no
    such limit). Each bucket holds up to its limit and refills continuously at limit/minute; it
    starts full. ``minute`` is the length of a "minute" in real seconds: ``minute=6.0`` runs a
    scenario ten times faster, and every header, reset time and ``retry-after`` is then in real
    seconds, consistent with that bucket. ``interval`` (seconds, None: none) also keeps the
    requests a minute over that shorter interval, as the API's docs say it may ("60 RPM may be
    enforced as one request a second"): a second bucket holding ``rpm * interval / minute``,
    refilled at the same rate. The headers say nothing of it, as the API's do not.
    """

    rpm: int | None = None
    itpm: int | None = None
    otpm: int | None = None
    minute: float = 60.0
    interval: float | None = None

    def __post_init__(self) -> None:
        for name in ("rpm", "itpm", "otpm"):
            value = getattr(self, name)
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f"RateLimits.{name} must be a positive int or None: {value!r}")
        if not self.minute > 0:
            raise ValueError(f"RateLimits.minute must be > 0 seconds: {self.minute!r}")
        if self.interval is not None and not (0 < self.interval < self.minute and self.rpm):
            raise ValueError(
                f"RateLimits.interval needs rpm and 0 < it < minute: {self.interval!r}"
            )


#: bucket name (as in the headers) -> what the 429 message calls its unit
_BUCKET_UNITS = {
    "requests": "requests",
    "input-tokens": "input tokens",
    "output-tokens": "output tokens",
}
RATE_LIMIT_DOCS = "https://docs.claude.com/en/api/rate-limits"


@dataclass
class _Bucket:
    """A token bucket: at most ``capacity``, refilled continuously at ``capacity``/``minute``
    per second. The output bucket may go below zero (it is charged after the answer)."""

    capacity: float
    minute: float
    level: float
    updated: float

    @property
    def rate(self) -> float:
        return self.capacity / self.minute

    def refill(self, now: float) -> None:
        if now > self.updated:
            self.level = min(float(self.capacity), self.level + (now - self.updated) * self.rate)
            self.updated = now

    def wait_for(self, level: float) -> float:
        """Seconds until the bucket holds ``level`` (0 if it does already)."""
        return max(0.0, (level - self.level) / self.rate)


class _RateLimiter:
    """The buckets of one :class:`RateLimits` (every method is called with the server's lock)."""

    def __init__(self, limits: RateLimits, now: float) -> None:
        self.limits = limits
        caps = {"requests": limits.rpm, "input-tokens": limits.itpm, "output-tokens": limits.otpm}
        self.buckets = {
            name: _Bucket(cap, limits.minute, float(cap), now)
            for name, cap in caps.items()
            if cap is not None
        }
        # the requests a minute kept over the short interval too (unstated in the headers)
        self.short: _Bucket | None = None
        if limits.interval is not None and limits.rpm is not None:
            burst = limits.rpm * limits.interval / limits.minute
            self.short = _Bucket(burst, limits.interval, burst, now)

    def admit(self, now: float, input_tokens: int) -> _Refusal | None:
        """Take one request of ``input_tokens`` (ITPM cost), or say why not (nothing taken)."""
        for bucket in self.buckets.values():
            bucket.refill(now)
        if self.short is not None:
            self.short.refill(now)
        waits = self._waits(input_tokens)
        if not waits:
            if self.short is not None:
                self.short.level -= 1
            if "requests" in self.buckets:
                self.buckets["requests"].level -= 1
            if "input-tokens" in self.buckets:
                self.buckets["input-tokens"].level -= input_tokens
            return None
        name, wait = max(waits.items(), key=lambda item: item[1])
        limit = self.buckets[name].capacity
        message = (
            f"This request would exceed the rate limit for your organization of {limit} "
            f"{_BUCKET_UNITS[name]} per minute. For details, refer to: {RATE_LIMIT_DOCS}. You can "
            "see the response headers for current usage. Please reduce the prompt length or the "
            "maximum tokens requested, or try again later."
        )
        never = math.isinf(wait)
        if never:  # it can never fit: say so, and keep the SDK from retrying
            message = (
                f"This request's {input_tokens} input tokens exceed the rate limit for your "
                f"organization of {limit} input tokens per minute on their own: it can never be "
                f"accepted. Please reduce the prompt length. For details, refer to: "
                f"{RATE_LIMIT_DOCS}."
            )
            wait = self.limits.minute
        headers = {"retry-after": _whole_seconds(wait), "x-should-retry": str(not never).lower()}
        return _Refusal(429, "rate_limit_error", message, headers, limit=name)

    def _waits(self, input_tokens: int) -> dict[str, float]:
        """Seconds until each refusing bucket would take the request (inf: never)."""
        waits: dict[str, float] = {}
        requests = self.buckets.get("requests")
        if requests is not None and requests.level < 1:
            waits["requests"] = requests.wait_for(1)
        if self.short is not None and self.short.level < 1:
            waits["requests"] = max(waits.get("requests", 0.0), self.short.wait_for(1))
        tokens = self.buckets.get("input-tokens")
        if tokens is not None and input_tokens > tokens.capacity:
            waits["input-tokens"] = math.inf
        elif tokens is not None and tokens.level < input_tokens:
            waits["input-tokens"] = tokens.wait_for(input_tokens)
        output = self.buckets.get("output-tokens")
        if output is not None and output.level <= 0:
            # refused while at or below 0: it takes the request once it is back above 0
            waits["output-tokens"] = output.wait_for(0)
        return waits

    def spend_output(self, now: float, tokens: int) -> None:
        bucket = self.buckets.get("output-tokens")
        if bucket is not None:
            bucket.refill(now)
            bucket.level -= tokens

    def headers(self, now: float, wall: datetime) -> dict[str, str]:
        """The ``anthropic-ratelimit-*`` headers of the configured buckets, as of ``now``."""
        out: dict[str, str] = {}
        remaining_tokens, limit_tokens, full_in = 0.0, 0, 0.0
        for name, bucket in self.buckets.items():
            bucket.refill(now)
            remaining = max(0, math.floor(bucket.level))
            until_full = bucket.wait_for(bucket.capacity)
            if name != "requests":  # the token counts are rounded down to the thousand
                remaining_tokens += max(0.0, bucket.level)
                limit_tokens += bucket.capacity
                full_in = max(full_in, until_full)
                remaining -= remaining % 1000
            out.update(_bucket_headers(name, bucket.capacity, remaining, wall, until_full))
        if limit_tokens:
            remaining = math.floor(remaining_tokens)
            remaining -= remaining % 1000
            out.update(_bucket_headers("tokens", limit_tokens, remaining, wall, full_in))
        return out


def _bucket_headers(
    name: str, limit: int, remaining: int, wall: datetime, until_full: float
) -> dict[str, str]:
    prefix = f"anthropic-ratelimit-{name}"
    return {
        f"{prefix}-limit": str(limit),
        f"{prefix}-remaining": str(remaining),
        f"{prefix}-reset": _iso(wall + timedelta(seconds=until_full)),
    }


@dataclass(frozen=True)
class ServerOptions:
    """How a :class:`FakeMessagesAPI` is built (its keyword arguments, as one object).

    ``api_key`` the key required (None: any); ``latency`` seconds slept before each answer;
    ``seed`` of the fault, shape and batch RNGs; ``awkward`` streams shaped as real ones are
    (False: minimal frames); ``min_overlap`` of the keyword model; ``known_models`` (None:
    any model); ``port`` (0: a free one); ``tls`` to serve HTTPS; ``rate_limits`` (None: none).
    """

    api_key: str | None = "test-key"
    latency: float = 0.0
    seed: int = 0
    awkward: bool = True
    min_overlap: int = 2
    known_models: set[str] | None = None
    port: int = 0
    tls: ssl.SSLContext | None = None
    rate_limits: RateLimits | None = None


class _OptionKeywords(TypedDict, total=False):
    """The fields of :class:`ServerOptions`, as keyword arguments of the constructor."""

    api_key: str | None
    latency: float
    seed: int
    awkward: bool
    min_overlap: int
    known_models: set[str] | None
    port: int
    tls: ssl.SSLContext | None
    rate_limits: RateLimits | None


def _new_stats() -> dict[str, Any]:
    """The counters of a fresh server (see :attr:`FakeMessagesAPI.stats`)."""
    return {
        "calls": 0,
        "trigger_calls": 0,
        "improve_calls": 0,
        "count_tokens_calls": 0,
        "faults_injected": {},
        "decisions": {},
        "connections": 0,
        "in_flight_max": 0,
        "alpn": {},
        "output_tokens": 0,
        "batch_creates": 0,
        "batches_created": 0,
        "batch_requests": 0,
        "batch_polls": 0,
        "batch_results_fetches": 0,
        "batch_cancels": 0,
        "batch_results": {},
        "batch_usage": dict.fromkeys(USAGE_FIELDS, 0),
        "rate_limited": 0,
        "rate_limited_by": {},
        "first_try_faults": {},
    }


class FakeMessagesAPI:
    """A threaded loopback server imitating ``POST /v1/messages`` and Message Batches.

    Attributes tests read or set:

    ``url``              ``http://127.0.0.1:PORT`` once started.
    ``requests``         every parsed JSON body sent to ``/v1/messages`` (including refused
                         ones), with ``request_headers`` the matching lower-cased headers.
    ``faults``           ``{"429": 0.1, "drop": 0.05, ...}`` rates, see :data:`FAULT_KINDS`.
    ``hang_seconds``     how long a ``"hang"`` fault sleeps before answering (then it answers
                         normally, unless the server stops first).
    ``retry_after_ms``   if set, 429/5xx faults also carry ``retry-after-ms``.
    ``proposals``        scripted answers to improvement requests (no ``Skill`` tool, text
                         mentions "description"), popped in order by successful responses.
    ``drafts``           scripted answers to requests for a trigger eval set, popped in
                         order; when none is left, :func:`drafted_set` reads the request and
                         writes one (the skill's words for should-trigger queries, the sibling
                         skills' words for near misses).
    ``stats``            ``calls`` (every POST /v1/messages), ``trigger_calls``,
                         ``improve_calls``, ``count_tokens_calls``, ``faults_injected``
                         (kind -> n), ``decisions`` (outcome -> n, successful responses only,
                         batch requests that succeed included), ``connections`` (accepted
                         sockets), ``in_flight_max`` (live requests only), ``alpn`` (protocol
                         agreed in each TLS handshake -> n), ``output_tokens`` (what
                         the live answers sent without a fault were billed); for batches
                         ``batch_creates`` (every create received, refused ones too),
                         ``batches_created``,
                         ``batch_requests`` (requests in created batches), ``batch_polls``
                         (every GET of a batch), ``batch_results_fetches``, ``batch_cancels``,
                         ``batch_results`` (result type -> n, counted when a batch ends) and
                         ``batch_usage`` (the tokens of the succeeded requests, the only ones
                         billed: input, output, cache writes and reads, as in ``usage``).
                         Batch requests are not ``calls``/``trigger_calls``/``improve_calls``.
                         ``rate_limited`` (429s of :attr:`rate_limits`; injected faults are
                         not in it), ``rate_limited_by`` (bucket that refused -> n:
                         ``requests``, ``input-tokens``, ``output-tokens``) and
                         ``first_try_faults`` (kind -> n, see ``fail_first_tries``).
    ``tls``              an ``ssl.SSLContext`` to serve HTTPS with (``url`` is then https).
    ``idle_timeout``     seconds an idle keep-alive connection is kept open (None: forever).
    ``fail_first_tries`` ``{"429": 2}``: the first 2 attempts of every distinct request (keyed
                         by its body bytes, so identical bodies share a count) are refused
                         with that status (``"429"`` rate_limit_error with ``retry-after: 0``,
                         ``"500"`` api_error, ``"529"`` overloaded_error; ``retry-after-ms`` too
                         when ``retry_after_ms`` is set), the next is served. Assigning resets
                         the counts.

    Rate limits (how they differ from an injected 429: see the module docstring):

    ``rate_limits``      a :class:`RateLimits` (None: none); assignable while serving, the new
                         buckets start full. Only ``POST /v1/messages`` is charged (streamed or
                         not; not ``count_tokens``, not batches): one request and its input
                         tokens (``input_tokens + cache_creation_input_tokens`` of its usage,
                         cache reads not counted) when it starts, its output tokens once the
                         answer is sent. Refused (429 ``rate_limit_error`` naming the limit,
                         ``retry-after`` = whole seconds until it would fit, at least 1) when
                         fewer than 1 request or fewer than its input tokens are left, or the
                         output bucket is at or below 0. A request bigger than the whole ITPM
                         is refused every time, with ``x-should-retry: false``. Checked after
                         the 401/400/404 checks and ``fail_first_tries``, before ``faults``
                         are drawn. Every ``/v1/messages`` answer (200 or error) carries the
                         ``anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-
                         {limit,remaining,reset}`` headers of the configured buckets (token
                         ``remaining`` rounded down to the thousand; ``reset`` RFC 3339 UTC,
                         when the bucket is full again); see :meth:`ratelimit_headers`.
    ``rate_log``         ``(time.monotonic(), input tokens counted)`` of every request admitted
                         while limits are set; :meth:`peak_window` finds the busiest window.

    Message Batches (``/v1/messages/batches``, ``?beta=true`` or not):

    ``batch_polls``      how many retrieves a batch stays ``in_progress`` (showing partial
                         counts); the retrieve after that ends it and decides every request.
    ``batch_holds``      the same for each next batch created, popped in creation order
                         (``[1, 10_000]``: the second batch stays in progress); after the list
                         runs out, ``batch_polls``.
    ``batch_create_refusals``  statuses the next creates are refused with, in order (429, 529,
                         500, 404...), with the error type the real API gives for each; such a
                         create makes no batch. A ``(status, seconds)`` entry also sends
                         ``retry-after``: :meth:`refuse_batch_creates` queues such entries.
    ``batch_create_log`` ``(time.monotonic(), status answered)`` of every create received.
    ``batch_faults``     ``{"errored": 0.1, "expired": 0.05}`` per-request result rates, drawn
                         with an RNG of their own when the batch ends (errored: an
                         ``overloaded_error`` or ``api_error`` result).
    ``batch_requests_log``  the ``params`` of every request of every created batch, in order.
    ``batch_sizes``      how many requests each created batch holds, in creation order.
    ``batch_headers``    lower-cased headers of each successful create (``anthropic-beta``...).
    :meth:`batch_script` forces the results of the next batch requests for one query.

    A batch request that succeeds is answered by the live rules (scripts, keyword model,
    decoration, prompt cache), in submission order when the batch ends, then cut to its
    ``max_tokens`` (whole trailing blocks dropped, ``stop_reason: "max_tokens"``). An unknown
    model (see ``known_models``) or a missing ``max_tokens`` is an ``errored`` result. Results
    come back in a shuffled order, never the request order.
    """

    def __init__(
        self, options: ServerOptions | None = None, /, **keywords: Unpack[_OptionKeywords]
    ) -> None:
        """``FakeMessagesAPI(latency=0.1, rate_limits=RateLimits(rpm=60))``, or the same as
        one :class:`ServerOptions` (keywords given as well override its fields)."""
        opts = replace(options or ServerOptions(), **keywords)
        self.api_key = opts.api_key
        self.latency = opts.latency
        self.seed = seed = opts.seed
        self.awkward = opts.awkward
        self.min_overlap = opts.min_overlap
        self.known_models = opts.known_models
        self.port = opts.port
        self.tls = opts.tls
        self.hang_seconds = 5.0
        self._lock = threading.Lock()
        # Seconds a keep-alive connection may sit idle before the server closes it (None: never),
        # as real front ends do; clients must notice and not send on a closed connection.
        self.idle_timeout: float | None = None
        # The SDK ignores ``retry-after: 0`` and backs off 0.5 s, 1 s, ...; set this (milliseconds)
        # to also send ``retry-after-ms`` on 429/5xx faults so retrying tests stay fast.
        self.retry_after_ms: float | None = None
        self.faults: dict[str, float] = {}
        self.proposals: list[str] = []
        self.drafts: list[str] = []
        # a drafting model that repeats its first answer even when asked again
        self.stubborn_drafts = False
        # trigger rates spread over (0, 1), drawn afresh per request, and an improve model
        # that reads the prompt (see tests.graded_model); None: the keyword model
        self.graded: Any = None
        # the chance a model reads the file a query names before it decides (then decides on
        # the query as before, and answers in words rather than read again): a model that
        # looks around first, as ``--trigger-within=turn`` expects
        self.looks_first = 0.0
        # models whose keyword decisions are reversed (a skill taken where the keyword model
        # would answer, and the other way round): a description that wins on one model of a
        # matrix loses on these
        self.contrary_models: set[str] = set()
        # the name the stand-in model writes in its Skill call for a listed skill (default:
        # the listed id): a model may call a plugin skill by its bare name, or by an alias
        self.call_names: dict[str, str] = {}
        # input tokens added to every trigger request's prompt (a big CLAUDE.md, say), to reach
        # a long-prompt price tier; and the usage of every live answer sent, as billed
        self.prompt_padding = 0
        self.usages: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.stats: dict[str, Any] = _new_stats()
        # rate limits: the buckets (None: no limit), every admitted request as
        # (time.monotonic(), input tokens counted) while limits are set, and the first-tries fault
        self._rate: _RateLimiter | None = None
        self.rate_log: list[tuple[float, int]] = []
        self._fail_first: dict[str, int] = {}
        self._tries: dict[bytes, int] = {}
        self._init_batches(seed)
        self._fault_rng = random.Random(seed)
        self._shape_rng = random.Random(seed + 1)
        self._look_rng = random.Random(seed + 2)
        self._scripts: dict[str, list[str]] = {}
        self._script_pos: dict[str, int] = {}
        self._turns: dict[str, list[str]] = {}
        self._cache: set[str] = set()
        self._in_flight = 0
        self._ids = 0
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.rate_limits = opts.rate_limits

    def _init_batches(self, seed: int) -> None:
        """The Message Batches state and settings (see the class docstring)."""
        self.batch_polls = 1
        self.batch_holds: list[int] = []
        # statuses the next batch creates are refused with, in order (429, 529, ...); a
        # (status, seconds) pair also sends ``retry-after``
        self.batch_create_refusals: list[int | tuple[int, float]] = []
        # (time.monotonic(), status answered) of every batch create received
        self.batch_create_log: list[tuple[float, int]] = []
        self.batch_faults: dict[str, float] = {}
        self.batch_requests_log: list[dict[str, Any]] = []
        self.batch_sizes: list[int] = []
        self.batch_headers: list[dict[str, str]] = []
        self._batches: dict[str, _Batch] = {}
        self._batch_scripts: dict[str, list[str]] = {}
        self._batch_rng = random.Random(seed + 2)

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeMessagesAPI is not started")
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeMessagesAPI:
        """Bind 127.0.0.1 (never another interface: tests must stay offline) and serve."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", self.port), _Handler)
        server.api = self
        if self.tls is not None:  # the handshake happens in the connection's own thread
            server.socket = self.tls.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
        self._server = server
        # A short poll interval keeps stop() fast for function-scoped fixtures.
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-messages-api",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and cut idle keep-alive connections so no handler thread lingers."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            open_socks = list(self._open)
        for sock in open_socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, query: str, outcomes: list[str], model: str | None = None) -> None:
        """Fix the answers to one exact query: ``"skill:<name>"``, ``"tool:<Name>"``, ``"text"``,
        ``"empty"`` (a message with no content block at all, as a misbehaving proxy sends);
        with ``model``, only for requests to that model (a model matrix's models may differ).

        Outcomes cycle; only successful responses advance, so a retried fault sees the same one.
        """
        if model is not None:
            query = f"{model}\x00{query}"
        for outcome in outcomes:
            if not (outcome in ("text", "empty") or outcome.startswith(("skill:", "tool:"))):
                raise ValueError(f"bad scripted outcome {outcome!r}")
        if not outcomes:
            raise ValueError("outcomes must not be empty")
        with self._lock:
            self._scripts[query] = list(outcomes)
            self._script_pos[query] = 0

    def turns(self, query: str, outcomes: list[str]) -> None:
        """Fix a whole turn of one exact query, model answer by model answer: the answer to a
        request holding N assistant messages is ``outcomes[N]`` (``"skill:<name>"``,
        ``"tool:<Name>"``, ``"text"``), also after a tool's result; past the list, "Done."
        (``"tool:Read"`` reads the path the query names, else README.md). A model that looks
        around first: ``["tool:Read", "skill:pdf"]``."""
        for outcome in outcomes:
            if not (outcome == "text" or outcome.startswith(("skill:", "tool:"))):
                raise ValueError(f"bad turn outcome {outcome!r}")
        with self._lock:
            self._turns[query] = list(outcomes)

    def batch_script(self, query: str, results: list[str]) -> None:
        """Force the results of the next batch requests whose query is exactly ``query``.

        ``"errored"`` (an ``overloaded_error`` result; ``"errored:<type>"`` for another error
        type), ``"expired"`` or ``"ok"`` (no injected fault), one per request in submission
        order; after the list runs out, results are drawn from ``batch_faults`` again. A
        request that is canceled does not use an entry. Replaces an earlier list for the query.
        """
        for result in results:
            if result not in BATCH_SCRIPT_RESULTS and not (
                result.startswith("errored:") and len(result) > len("errored:")
            ):
                raise ValueError(f"bad scripted batch result {result!r}")
        with self._lock:
            self._batch_scripts[query] = list(results)

    # -- rate limits and the first-tries fault ------------------------------------------------

    @property
    def rate_limits(self) -> RateLimits | None:
        """The :class:`RateLimits` enforced on ``POST /v1/messages`` (None: none).

        Assignable while the server runs: the new buckets start full.
        """
        with self._lock:
            return self._rate.limits if self._rate is not None else None

    @rate_limits.setter
    def rate_limits(self, limits: RateLimits | None) -> None:
        if limits is not None and not isinstance(limits, RateLimits):
            raise TypeError(f"rate_limits must be a RateLimits or None, not {limits!r}")
        with self._lock:
            self._rate = _RateLimiter(limits, time.monotonic()) if limits is not None else None

    @property
    def fail_first_tries(self) -> dict[str, int]:
        """``{"429": 2}``: the first 2 attempts of every distinct request (same body bytes)
        are answered 429; the third is served. Several kinds apply in order (``{"429": 1,
        "500": 1}``: a 429, then a 500, then served). Kinds: :data:`FIRST_TRY_KINDS`.

        Assigning starts every request's count afresh; ``{}`` turns the fault off.
        """
        with self._lock:
            return dict(self._fail_first)

    @fail_first_tries.setter
    def fail_first_tries(self, plan: dict[str, int]) -> None:
        for kind, count in plan.items():
            if kind not in FIRST_TRY_KINDS or type(count) is not int or count < 0:
                raise ValueError(f"bad first-tries fault {kind!r}: {count!r}")
        with self._lock:
            self._fail_first = dict(plan)
            self._tries.clear()

    def refuse_batch_creates(self, count: int, status: int = 429, retry_after: float = 1) -> None:
        """Answer the next ``count`` batch creates with ``status`` and ``retry-after`` (seconds).

        Batch creates are not charged to :attr:`rate_limits` (batches have a queue of their
        own); this is how a test meets a 429 on a create. No batch is made by a refused create.
        """
        with self._lock:
            self.batch_create_refusals.extend([(status, retry_after)] * count)

    def peak_window(self, window: float | None = None) -> tuple[int, int]:
        """The most requests, and the most input tokens, admitted within any ``window`` seconds
        (default: the rate limits' ``minute``), from :attr:`rate_log`.

        A token bucket lets at most its capacity plus one window's refill through in a window:
        ``2 * rpm`` requests (and ``2 * itpm`` input tokens) per ``minute``.
        """
        with self._lock:
            log = sorted(self.rate_log)
            limits = self._rate.limits if self._rate is not None else None
        span = window if window is not None else (limits.minute if limits else 60.0)
        most_requests = most_tokens = 0
        start = tokens = 0
        for end, (moment, cost) in enumerate(log):
            tokens += cost
            while moment - log[start][0] >= span:
                tokens -= log[start][1]
                start += 1
            most_requests = max(most_requests, end - start + 1)
            most_tokens = max(most_tokens, tokens)
        return most_requests, most_tokens

    def _first_try_refusal(self, raw: bytes) -> _Refusal | None:
        """The first-tries fault's answer to this attempt of ``raw``, or None: serve it."""
        with self._lock:
            if not self._fail_first:
                return None
            key = hashlib.sha256(raw).digest()
            attempt = self._tries.get(key, 0)
            self._tries[key] = attempt + 1
            for kind, count in self._fail_first.items():
                if attempt < count:
                    tally = self.stats["first_try_faults"]
                    tally[kind] = tally.get(kind, 0) + 1
                    return _fault_refusal(kind, False, self.retry_after_ms)
                attempt -= count
            return None

    def _admit(self, body: dict[str, Any]) -> _Refusal | None:
        """Charge one request and its input tokens to the rate limits, or refuse it (429)."""
        with self._lock:
            counts_input = self._rate is not None and "input-tokens" in self._rate.buckets
            if self._rate is None:
                return None
        cost = 0
        if counts_input:  # as the real API: cache writes count, cache reads do not
            usage = self._usage(body, commit=False)
            cost = usage["input_tokens"] + usage["cache_creation_input_tokens"]
        now = time.monotonic()
        with self._lock:
            if self._rate is None:
                return None
            refusal = self._rate.admit(now, cost)
            if refusal is None:
                self.rate_log.append((now, cost))
                return None
            self.stats["rate_limited"] += 1
            by = self.stats["rate_limited_by"]
            by[refusal.limit] = by.get(refusal.limit, 0) + 1
        return refusal

    def _spend_output(self, tokens: int) -> None:
        now = time.monotonic()
        with self._lock:
            if self._rate is not None:
                self._rate.spend_output(now, tokens)

    def ratelimit_headers(self) -> dict[str, str]:
        """The ``anthropic-ratelimit-*`` headers a ``/v1/messages`` answer would carry now."""
        now, wall = time.monotonic(), datetime.now(timezone.utc)
        with self._lock:
            return self._rate.headers(now, wall) if self._rate is not None else {}

    # -- bookkeeping ------------------------------------------------------------------------------

    def _connection_opened(self, sock: socket.socket) -> None:
        with self._lock:
            self.stats["connections"] += 1
            self._open.add(sock)

    def _connection_closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def _bump(self, key: str, sub: str | None = None) -> None:
        with self._lock:
            if sub is None:
                self.stats[key] += 1
            else:
                self.stats[key][sub] = self.stats[key].get(sub, 0) + 1

    def _draw_fault(self) -> str | None:
        """At most one fault per request: one uniform draw against the stacked rates."""
        with self._lock:
            faults = dict(self.faults)
            if not any(faults.values()):
                return None
            u = self._fault_rng.random()
            acc = 0.0
            for kind in FAULT_KINDS:
                acc += float(faults.get(kind, 0.0))
                if u < acc:
                    self.stats["faults_injected"][kind] = (
                        self.stats["faults_injected"].get(kind, 0) + 1
                    )
                    return kind
            return None

    def _scripted(self, query: str, advance: bool, model: str | None = None) -> str | None:
        with self._lock:
            if model is not None and f"{model}\x00{query}" in self._scripts:
                query = f"{model}\x00{query}"
            outcomes = self._scripts.get(query)
            if outcomes is None:
                return None
            pos = self._script_pos[query]
            if advance:
                self._script_pos[query] = pos + 1
            return outcomes[pos % len(outcomes)]

    def _usage(self, body: dict[str, Any], commit: bool = True) -> dict[str, Any]:
        """Input/cache token estimate; the prefix up to the last ``cache_control`` is cached.

        As the real API does, every breakpoint is looked up: the longest prefix already cached
        is read, the rest up to the last breakpoint is written (into the cache only with
        ``commit``: a request refused by a rate limit writes nothing).
        """
        segments = _segments(body)
        total = (sum(_estimate(t) for t, _ in segments) or 1) + self.prompt_padding
        keys = _cache_keys(body, segments)
        if not keys:
            return {
                "input_tokens": total,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        with self._lock:
            hit = max((i for i, key in keys.items() if key in self._cache), default=-1)
            if commit:
                self._cache.update(keys.values())
        return _cached_usage(segments, total, hit)

    # -- request handling -----------------------------------------------------------------------

    def _error(self, h: _Handler, rid: str, status: int, etype: str, message: str) -> None:
        self._refuse(h, rid, _Refusal(status, etype, message))

    @staticmethod
    def _refuse(h: _Handler, rid: str, refusal: _Refusal) -> None:
        """Answer with an error body (``h.rate_headers``: and the rate limits' headers)."""
        payload = json.dumps(
            {
                "type": "error",
                "error": {"type": refusal.etype, "message": refusal.message},
                "request_id": rid,
            }
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(payload)),
            "request-id": rid,
            **refusal.headers,
        }
        h.start(refusal.status, headers)
        if h.command != "HEAD":
            h.wfile.write(payload)

    def _authorised(self, h: _Handler) -> bool:
        if self.api_key is None:
            return True
        if h.headers.get("x-api-key") == self.api_key:
            return True
        return h.headers.get("authorization") == f"Bearer {self.api_key}"

    def _handle(self, h: _Handler, method: str) -> None:
        raw = h.read_body() if method != "HEAD" else b""
        rid = f"req_fake_{self._next_id()}"
        path = h.path.split("?", 1)[0].rstrip("/")
        h.rate_headers = method == "POST" and path == "/v1/messages"
        if self._handle_batch(h, rid, method, path, raw):
            return
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            self._error(h, rid, 404, "not_found_error", f"Not found: {method} {path}")
            return
        counting = path.endswith("count_tokens")
        self._bump("count_tokens_calls" if counting else "calls")
        with self._lock:
            self._in_flight += 1
            self.stats["in_flight_max"] = max(self.stats["in_flight_max"], self._in_flight)
        try:
            self._handle_post(h, rid, raw, counting)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _handle_post(self, h: _Handler, rid: str, raw: bytes, counting: bool) -> None:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if not counting and isinstance(body, dict):
            with self._lock:
                self.requests.append(body)
                self.request_headers.append({k.lower(): v for k, v in h.headers.items()})
        if self.latency > 0:
            self._stopping.wait(self.latency)
        problem = self._problem(h, body)
        if problem is not None:
            self._refuse(h, rid, problem)
        elif counting:
            self._send_json(h, rid, {"input_tokens": self._usage_uncached(body)})
        else:
            self._serve_message(h, rid, raw, body)

    def _problem(self, h: _Handler, body: Any) -> _Refusal | None:
        """Why a request is refused before it is looked at (401, 400, 404), or None."""
        if not self._authorised(h):
            return _Refusal(401, "authentication_error", "invalid x-api-key")
        if not isinstance(body, dict):
            return _Refusal(
                400,
                "invalid_request_error",
                "The request body is not valid JSON (an object is required).",
            )
        model = body.get("model")
        if not isinstance(model, str):
            return _Refusal(400, "invalid_request_error", "model: Field required")
        if not isinstance(body.get("messages"), list):
            return _Refusal(400, "invalid_request_error", "messages: Field required")
        if self.known_models is not None and model not in self.known_models:
            return _Refusal(404, "not_found_error", f"model: {model}")
        return None

    def _serve_message(self, h: _Handler, rid: str, raw: bytes, body: dict[str, Any]) -> None:
        """A valid ``POST /v1/messages``: the first-tries fault, the rate limits, then the
        drawn fault or the answer. The answer's output tokens are charged once it is sent."""
        trigger = _is_trigger(body)
        self._bump("trigger_calls" if trigger else "improve_calls")
        refusal = self._first_try_refusal(raw) or self._admit(body)
        if refusal is not None:
            self._refuse(h, rid, refusal)
            return
        stream = bool(body.get("stream"))
        fault = self._draw_fault()
        if fault == "hang":
            self._stopping.wait(self.hang_seconds)
        refusal = _fault_refusal(fault, stream, self.retry_after_ms)
        if refusal is not None:
            self._refuse(h, rid, refusal)
            return
        message, rng = self._answer(body, trigger, f"msg_fake_{rid[9:]}", advance=fault is None)
        if fault is None:
            with self._lock:
                self.stats["output_tokens"] += message["usage"]["output_tokens"]
                self.usages.append({**message["usage"], "model": body.get("model")})
        try:
            if not stream:
                self._send_json_message(h, rid, message, fault)
            else:
                self._send_stream(h, rid, message, fault, rng)
        finally:
            self._spend_output(message["usage"]["output_tokens"])

    def _answer(
        self, body: dict[str, Any], trigger: bool, message_id: str, advance: bool
    ) -> tuple[dict[str, Any], random.Random]:
        """The whole answer to ``body`` (live or batched), and the RNG that shaped it."""
        content, stop_reason = self._plan(body, trigger, advance=advance)
        usage = self._usage(body)
        with self._lock:
            rng = random.Random(self._shape_rng.getrandbits(64))
        content = self._decorate(content, rng)
        message = {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {**usage, "output_tokens": max(_estimate(json.dumps(content)), 1)},
        }
        return message, rng

    def _usage_uncached(self, body: dict[str, Any]) -> int:
        text = json.dumps([body.get("tools"), body.get("system"), body.get("messages")])
        return max(_estimate(text), 1)

    def _plan(
        self, body: dict[str, Any], trigger: bool, advance: bool
    ) -> tuple[list[dict[str, Any]], str]:
        """Decide the answer's content blocks (without thinking/preamble decoration)."""
        if not trigger and any("trigger eval set" in t for t in _message_texts(body)):
            return self._plan_draft(body, advance)
        if not trigger:
            return self._plan_improve(body, advance)
        turned = self._turn_outcome(body)
        if turned is not None:
            if advance:
                self._bump("decisions", turned[0])
            return self._blocks(*turned)
        read = _read_answered(body)
        if read is None and _has_tool_result(body):
            if advance:
                self._bump("decisions", "done")
            return [{"type": "text", "text": DONE_TEXT}], "end_turn"
        query = extract_query(body if read is None else {"messages": body["messages"][:read]})
        if read is None and self._looks(query):
            outcome = "tool:Read"
        else:
            outcome = self._after_looking(self._trigger_outcome(body, query, advance), read)
        if advance:
            self._bump("decisions", outcome)
        return self._blocks(outcome, query)

    def _after_looking(self, outcome: str, read: int | None) -> str:
        """A decision once the model has read a file (or, with ``looks_first``, chose not
        to): it answers in words rather than read again."""
        if read is None:
            # with looks_first only the draw in _looks reads
            return "text" if self.looks_first and outcome == "tool:Read" else outcome
        if outcome.startswith("tool:Read"):
            return "text"  # it has read the file
        return outcome if outcome.startswith("skill:") or not self.looks_first else "text"

    def _looks(self, query: str) -> bool:
        """Whether this run reads the file the query names before it decides."""
        if not self.looks_first or _find_path(query) is None:
            return False
        with self._lock:
            return self._look_rng.random() < self.looks_first

    def _turn_outcome(self, body: dict[str, Any]) -> tuple[str, str] | None:
        """The scripted answer of this request's place in a turn (see :meth:`turns`), with
        the turn's query."""
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        first = next((m for m in messages if m.get("role") == "user"), None)
        if first is None or not self._turns:
            return None
        query = extract_query({"messages": [first]})
        with self._lock:
            outcomes = self._turns.get(query)
        if outcomes is None:
            return None
        done = sum(1 for m in messages if m.get("role") == "assistant")
        return (outcomes[done] if done < len(outcomes) else "done"), query

    def _blocks(self, outcome: str, query: str) -> tuple[list[dict[str, Any]], str]:
        """The content blocks of an outcome."""
        if outcome == "done":
            return [{"type": "text", "text": DONE_TEXT}], "end_turn"
        if outcome == "text":
            return [{"type": "text", "text": TEXT_ANSWER}], "end_turn"
        if outcome == "empty":
            return [], "end_turn"
        kind, _, name = outcome.partition(":")
        if kind == "skill":
            tool, tool_input = "Skill", {"skill": self.call_names.get(name, name)}
        else:
            tool, tool_input = name, _tool_input(name, query)
        block = {
            "type": "tool_use",
            "id": f"toolu_fake_{self._next_id():06d}",
            "name": tool,
            "input": tool_input,
        }
        return [block], "tool_use"

    def _plan_draft(self, body: dict[str, Any], advance: bool) -> tuple[list[dict[str, Any]], str]:
        """The answer to a request for a trigger eval set: scripted, else drafted."""
        with self._lock:
            scripted = (self.drafts.pop(0) if advance else self.drafts[0]) if self.drafts else None
        prompt = _message_texts(body)[-1]
        text = scripted if scripted is not None else drafted_set(prompt, self.stubborn_drafts)
        if advance:
            self._bump("decisions", "draft")
        return [{"type": "text", "text": text}], "end_turn"

    def _plan_improve(
        self, body: dict[str, Any], advance: bool
    ) -> tuple[list[dict[str, Any]], str]:
        """The answer to an improvement request: proposed descriptions in tags."""
        # Only a request that talks about a description consumes a proposal: Claude Code
        # also sends small side requests without the Skill tool (titles, summaries).
        texts = _system_texts(body) + _message_texts(body)
        wants = any("description" in t.lower() for t in texts)
        with self._lock:
            proposal = None
            if wants and self.proposals:
                proposal = self.proposals.pop(0) if advance else self.proposals[0]
        written = [proposal] if proposal is not None else []
        if not written and wants and self.graded is not None:
            written = self.graded.improve("\n".join(texts))
        if not written:
            written = [_current_description(body) or "A skill description."]
        text = "Here is a revised description that should trigger more reliably.\n" + "\n".join(
            f"<new_description>{d}</new_description>" for d in written
        )
        if advance:
            self._bump("decisions", "improve")
        return [{"type": "text", "text": text}], "end_turn"

    def _trigger_outcome(self, body: dict[str, Any], query: str, advance: bool) -> str:
        """``"skill:<name>"``, ``"tool:<Name>"`` or ``"text"``: scripted, graded or keyword."""
        outcome = self._scripted(query, advance, body.get("model"))
        if outcome is not None:
            return outcome
        if self.graded is not None:
            chosen = self.graded.choose(query, parse_listing(body))
            return f"skill:{chosen}" if chosen else decide(query, [], self.min_overlap)
        listing = parse_listing(body)
        outcome = decide(query, listing, self.min_overlap)
        if body.get("model") in self.contrary_models and listing:
            outcome = "text" if outcome.startswith("skill:") else f"skill:{listing[0][0]}"
        return outcome

    def _decorate(self, content: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        """Add what real responses carry before the answer: thinking, a text preamble (an
        empty answer, a proxy's fault, stays empty)."""
        if not self.awkward or not content:
            return content
        out: list[dict[str, Any]] = []
        if rng.random() < 0.8:
            sig = "".join(
                rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
                for _ in range(rng.randint(40, 120))
            )
            out.append({"type": "thinking", "thinking": THINKING_TEXT, "signature": sig})
        if content and content[0]["type"] == "tool_use" and rng.random() < 0.6:
            out.append({"type": "text", "text": PREAMBLE})
        return out + content

    def _send_json_message(
        self, h: _Handler, rid: str, message: dict[str, Any], fault: str | None
    ) -> None:
        """``message`` (the whole answer, built in ``_handle_post``) as one JSON body."""
        payload = json.dumps(message, ensure_ascii=False).encode()
        self._start_body(h, rid, payload)
        if fault == "drop":
            h.wfile.write(payload[: len(payload) // 3])
            self._cut(h)
            return
        h.wfile.write(payload)

    @staticmethod
    def _cut(h: _Handler) -> None:
        """End the connection abruptly, as a dying proxy would: no terminating chunk."""
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_stream(
        self,
        h: _Handler,
        rid: str,
        message: dict[str, Any],
        fault: str | None,
        rng: random.Random,
    ) -> None:
        """``message`` as server-sent events, in fragments drawn from ``rng``."""
        content = message["content"]
        awkward = self.awkward
        h.start(
            200,
            {
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
                "Transfer-Encoding": "chunked",
                "request-id": rid,
            },
        )

        def send(event: str, data: dict[str, Any]) -> None:
            h.write_chunk(_frame(event, data))

        def maybe_ping(p: float = 0.12) -> None:
            if awkward and rng.random() < p:
                send("ping", {"type": "ping"})

        send(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    **message,
                    "content": [],
                    "stop_reason": None,
                    "usage": {**message["usage"], "output_tokens": 1},
                },
            },
        )
        maybe_ping(0.7)
        if fault == "stream_error":
            send(
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
            h.end_chunks()
            return

        frames_before_drop = rng.randint(1, 4) if fault == "drop" else -1
        sent = 0
        for index, block in enumerate(content):
            for event, data in self._block_frames(index, block, rng):
                send(event, data)
                sent += 1
                if sent == frames_before_drop:
                    self._cut(h)
                    return
                maybe_ping()
        send(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
        maybe_ping(0.05)
        send("message_stop", {"type": "message_stop"})
        h.end_chunks()

    def _block_frames(
        self, index: int, block: dict[str, Any], rng: random.Random
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        def delta(d: dict[str, Any]) -> tuple[str, dict[str, Any]]:
            return "content_block_delta", {
                "type": "content_block_delta",
                "index": index,
                "delta": d,
            }

        kind = block["type"]
        if kind == "thinking":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                },
            )
            for piece in self._pieces(block["thinking"], rng, 8, 40):
                yield delta({"type": "thinking_delta", "thinking": piece})
            yield delta({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in self._pieces(block["text"], rng, 3, 24):
                yield delta({"type": "text_delta", "text": piece})
        elif kind == "tool_use":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {
                        "type": "tool_use",
                        "id": block["id"],
                        "name": block["name"],
                        "input": {},
                    },
                },
            )
            raw = json.dumps(block["input"], ensure_ascii=False)
            if not self.awkward:
                yield delta({"type": "input_json_delta", "partial_json": raw})
            else:
                if rng.random() < 0.6:
                    yield delta({"type": "input_json_delta", "partial_json": ""})
                for piece in self._pieces(raw, rng, 1, 6):
                    yield delta({"type": "input_json_delta", "partial_json": piece})
        yield "content_block_stop", {"type": "content_block_stop", "index": index}

    def _pieces(self, text: str, rng: random.Random, lo: int, hi: int) -> Iterator[str]:
        if not self.awkward:
            yield text
            return
        i = 0
        while i < len(text):
            n = rng.randint(lo, hi)
            yield text[i : i + n]
            i += n

    # -- Message Batches ----------------------------------------------------------------------
    #
    # POST /v1/messages/batches, GET .../{id} (one poll), GET .../{id}/results (JSONL once
    # ended), POST .../{id}/cancel. Locks: a batch's own lock may be held while taking
    # ``self._lock`` (deciding results does), never the other way round.

    def _handle_batch(self, h: _Handler, rid: str, method: str, path: str, raw: bytes) -> bool:
        """Serve ``path`` if it is a Message Batches endpoint; False if it is not one."""
        route = _batch_route(method, path)
        if route is None:
            return False
        action, batch_id = route
        self._bump(BATCH_ACTION_STATS[action])
        if self.latency > 0:
            self._stopping.wait(self.latency)
        if not self._authorised(h):
            self._log_create(action, 401)
            self._error(h, rid, 401, "authentication_error", "invalid x-api-key")
            return True
        if action == "create":
            self._batch_create(h, rid, raw)
            return True
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            self._error(h, rid, 404, "not_found_error", f"message batch {batch_id} not found")
        elif action == "results":
            self._batch_results(h, rid, batch)
        else:
            with batch.lock:
                if action == "retrieve":
                    self._batch_poll(batch)
                elif batch.status == "in_progress":
                    batch.status = "canceling"
                    batch.cancel_initiated_at = datetime.now(timezone.utc)
                answer = batch.as_json()
            self._send_json(h, rid, answer)
        return True

    def _log_create(self, action: str, status: int) -> None:
        if action == "create":
            with self._lock:
                self.batch_create_log.append((time.monotonic(), status))

    def _batch_create(self, h: _Handler, rid: str, raw: bytes) -> None:
        """Create a batch, or refuse to (logged in ``batch_create_log`` before answering)."""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        problem = batch_problem(body)
        if problem is not None:
            self._log_create("create", 400)
            self._error(h, rid, 400, "invalid_request_error", problem)
            return
        with self._lock:
            refused = self.batch_create_refusals.pop(0) if self.batch_create_refusals else None
        if refused is not None:  # refused: no batch is made (whatever a real 5xx may mean)
            refusal = _create_refusal(refused)
            self._log_create("create", refusal.status)
            self._refuse(h, rid, refusal)
            return
        requests = [(item["custom_id"], item["params"]) for item in body["requests"]]
        with self._lock:
            hold = self.batch_holds.pop(0) if self.batch_holds else self.batch_polls
            batch = _Batch(
                f"msgbatch_fake_{len(self._batches) + 1}",
                requests,
                datetime.now(timezone.utc),
                hold=int(hold),
            )
            self._batches[batch.id] = batch
            self.stats["batches_created"] += 1
            self.stats["batch_requests"] += len(requests)
            self.batch_requests_log.extend(params for _, params in requests)
            self.batch_sizes.append(len(requests))
            self.batch_headers.append({k.lower(): v for k, v in h.headers.items()})
        with batch.lock:
            answer = batch.as_json()
        self._log_create("create", 200)
        self._send_json(h, rid, answer)

    def _batch_poll(self, batch: _Batch) -> None:
        """One retrieve (``batch.lock`` held): progress, or end the batch."""
        if batch.status == "ended":
            return
        if batch.status == "canceling":
            self._batch_end(batch, processed=batch.shown)
            return
        batch.polls += 1
        polls = max(batch.hold, 0)
        if batch.polls > polls:
            self._batch_end(batch, processed=len(batch.requests))
            return
        # Partial progress, as a real batch reports it; the sum always is the batch size.
        batch.shown = max(batch.shown, len(batch.requests) * batch.polls // (polls + 1))

    def _batch_end(self, batch: _Batch, processed: int) -> None:
        """Decide the first ``processed`` requests in submission order, cancel the rest, and
        keep the lines in a seeded shuffled order that never is the request order."""
        lines: list[dict[str, Any]] = []
        for index, (custom_id, params) in enumerate(batch.requests):
            result = self._batch_result(params) if index < processed else {"type": "canceled"}
            lines.append({"custom_id": custom_id, "result": result})
        order = list(range(len(lines)))
        random.Random(f"{self.seed}:{batch.id}").shuffle(order)
        if order == sorted(order) and len(order) > 1:
            order = order[1:] + order[:1]
        batch.results = [lines[i] for i in order]
        batch.status = "ended"
        batch.ended_at = datetime.now(timezone.utc)
        batch.results_url = f"{self.url}/v1/messages/batches/{batch.id}/results"
        for line in lines:
            self._bump("batch_results", line["result"]["type"])
            if line["result"]["type"] == "succeeded":  # errored ones are not billed
                usage = line["result"]["message"]["usage"]
                with self._lock:
                    tally = self.stats["batch_usage"]
                    for key in USAGE_FIELDS:
                        tally[key] += int(usage.get(key) or 0)

    def _batch_result(self, params: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` of one processed batch request."""
        query = extract_query(params)
        with self._lock:
            forced = self._batch_scripts.get(query)
            kind = forced.pop(0) if forced else self._draw_batch_fault()
        if kind == "expired":
            return {"type": "expired"}
        if kind is not None and kind.startswith("errored"):
            etype = kind.partition(":")[2] or "overloaded_error"
            return _errored(etype, BATCH_ERROR_MESSAGES.get(etype, f"{etype} (scripted)"))
        model = params["model"]
        if self.known_models is not None and model not in self.known_models:
            return _errored("not_found_error", f"model: {model}")
        limit = params.get("max_tokens")
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            return _errored("invalid_request_error", "max_tokens: Field required (an integer >= 1)")
        message, _ = self._answer(
            params, _is_trigger(params), f"msg_fake_{self._next_id()}", advance=True
        )
        if message["usage"]["output_tokens"] > limit:
            kept: list[dict[str, Any]] = []
            for block in message["content"]:
                if _estimate(json.dumps([*kept, block])) > limit:
                    break
                kept.append(block)
            message["content"] = kept
            message["stop_reason"] = "max_tokens"
            message["usage"]["output_tokens"] = limit
        return {"type": "succeeded", "message": message}

    def _draw_batch_fault(self) -> str | None:
        """``"errored:<type>"``, ``"expired"`` or None, from ``batch_faults`` (lock held)."""
        errored = float(self.batch_faults.get("errored", 0.0))
        expired = float(self.batch_faults.get("expired", 0.0))
        if errored <= 0 and expired <= 0:
            return None
        u = self._batch_rng.random()
        if u < errored:
            return "errored:" + self._batch_rng.choice(("overloaded_error", "api_error"))
        if u < errored + expired:
            return "expired"
        return None

    def _batch_results(self, h: _Handler, rid: str, batch: _Batch) -> None:
        with batch.lock:
            lines = list(batch.results) if batch.status == "ended" else None
        if lines is None:
            self._error(
                h,
                rid,
                400,
                "invalid_request_error",
                f"Message Batch {batch.id} has not ended: results are not available yet.",
            )
            return
        payload = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        self._start_body(h, rid, payload, "application/binary")
        h.wfile.write(payload)

    @staticmethod
    def _start_body(
        h: _Handler, rid: str, payload: bytes, content_type: str = "application/json"
    ) -> None:
        """A 200 answer's status line and headers for a body of known length."""
        h.start(
            200,
            {"Content-Type": content_type, "Content-Length": str(len(payload)), "request-id": rid},
        )

    @classmethod
    def _send_json(cls, h: _Handler, rid: str, obj: dict[str, Any]) -> None:
        payload = json.dumps(obj).encode()
        cls._start_body(h, rid, payload)
        h.wfile.write(payload)


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground (benchmarks, manual runs of Claude Code against it)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument(
        "--api-key", default="test-key", help="required key; pass an empty string to accept any"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-overlap", type=int, default=2)
    parser.add_argument("--clean", action="store_true", help="minimal streams (awkward=False)")
    for name in ("rpm", "itpm", "otpm"):
        parser.add_argument(f"--{name}", type=int, default=None, help=f"rate limit: {name}")
    parser.add_argument(
        "--minute", type=float, default=60.0, help="seconds a rate-limit minute lasts"
    )
    args = parser.parse_args(argv)
    limits = RateLimits(args.rpm, args.itpm, args.otpm, args.minute)
    api = FakeMessagesAPI(
        api_key=args.api_key or None,
        latency=args.latency,
        seed=args.seed,
        awkward=not args.clean,
        min_overlap=args.min_overlap,
        port=args.port,
        rate_limits=limits if (args.rpm or args.itpm or args.otpm) else None,
    )
    api.start()
    print(api.url, flush=True)
    done = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        done.set()

    # Explicit handlers: a background job started by a non-interactive shell ignores SIGINT,
    # and benchmarks stop the server with SIGTERM; both must still print the stats.
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        while not done.wait(3600):
            pass
    finally:
        api.stop()
        print(json.dumps(api.stats), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
