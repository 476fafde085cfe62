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

Standard library only, so it can run anywhere the tests run::

    python -m tests.fake_messages_api --port 8765 --latency 0.25
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import re
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FAULT_KINDS", "FakeMessagesAPI", "decide", "extract_query", "parse_listing"]

#: Fault kinds understood by :attr:`FakeMessagesAPI.faults`, in the order rates are stacked.
FAULT_KINDS: tuple[str, ...] = ("429", "529", "500", "stream_error", "drop", "hang")

LISTING_RE = re.compile(r"^- (?P<name>[^\s:]+): (?P<desc>.+)$", re.MULTILINE)
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


BARE_RE = re.compile(r"^- (?P<name>[\w.-]+)$", re.MULTILINE)


def bare_names(body: dict[str, Any]) -> list[str]:
    """The skills a request lists as bare names (``- name``, no text: past the listing
    budget), in order, from its messages."""
    return [m.group("name") for text in _message_texts(body) for m in BARE_RE.finditer(text)]


def _listing_from(texts: list[str]) -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for text in texts:
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


def _has_tool_result(body: dict[str, Any]) -> bool:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    return False


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


def drafted_set(prompt: str) -> str:
    """A stand-in improve model's eval set for a draft request: ten should-trigger queries
    made of the skill's own description words, ten near misses made of each sibling skill's
    words (another skill's territory), in a code fence as models often answer."""
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
    for i, filler in enumerate(_DRAFT_FILLERS):
        pick = [words[(i + k) % len(words)] for k in range(3)] if words else ["help"]
        entries.append({"query": f"please {' '.join(pick)} {filler}", "should_trigger": True})
        near = [other[(2 * i + k) % len(other)] for k in range(3)]
        entries.append({"query": f"could you {' '.join(near)} {filler}", "should_trigger": False})
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

    def setup(self) -> None:
        api = self.server.api
        if api.tls is not None:
            self.request.do_handshake()
            api._bump("alpn", str(self.request.selected_alpn_protocol()))
        self.timeout = api.idle_timeout  # applied to the socket by StreamRequestHandler.setup
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
        where = f"requests.{i}"
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
    ``tls``              an ``ssl.SSLContext`` to serve HTTPS with (``url`` is then https).
    ``idle_timeout``     seconds an idle keep-alive connection is kept open (None: forever).

    Message Batches (``/v1/messages/batches``, ``?beta=true`` or not):

    ``batch_polls``      how many retrieves a batch stays ``in_progress`` (showing partial
                         counts); the retrieve after that ends it and decides every request.
    ``batch_holds``      the same for each next batch created, popped in creation order
                         (``[1, 10_000]``: the second batch stays in progress); after the list
                         runs out, ``batch_polls``.
    ``batch_create_refusals``  statuses the next creates are refused with, in order (429, 529,
                         500, 404...), with the error type the real API gives for each; such a
                         create makes no batch.
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
        self,
        *,
        api_key: str | None = "test-key",
        latency: float = 0.0,
        seed: int = 0,
        awkward: bool = True,
        min_overlap: int = 2,
        known_models: set[str] | None = None,
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.api_key = api_key
        self.latency = latency
        self.seed = seed
        self.awkward = awkward
        self.min_overlap = min_overlap
        self.known_models = known_models
        self.port = port
        self.tls = tls
        self.hang_seconds = 5.0
        # Seconds a keep-alive connection may sit idle before the server closes it (None: never),
        # as real front ends do; clients must notice and not send on a closed connection.
        self.idle_timeout: float | None = None
        # The SDK ignores ``retry-after: 0`` and backs off 0.5 s, 1 s, ...; set this (milliseconds)
        # to also send ``retry-after-ms`` on 429/5xx faults so retrying tests stay fast.
        self.retry_after_ms: float | None = None
        self.faults: dict[str, float] = {}
        self.proposals: list[str] = []
        self.drafts: list[str] = []
        # trigger rates spread over (0, 1), drawn afresh per request, and an improve model
        # that reads the prompt (see tests.graded_model); None: the keyword model
        self.graded: Any = None
        # models whose keyword decisions are reversed (a skill taken where the keyword model
        # would answer, and the other way round): a description that wins on one model of a
        # matrix loses on these
        self.contrary_models: set[str] = set()
        # input tokens added to every trigger request's prompt (a big CLAUDE.md, say), to reach
        # a long-prompt price tier; and the usage of every live answer sent, as billed
        self.prompt_padding = 0
        self.usages: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.stats: dict[str, Any] = {
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
        }
        self.batch_polls = 1
        self.batch_holds: list[int] = []
        # statuses the next batch creates are refused with, in order (429, 529, ...)
        self.batch_create_refusals: list[int] = []
        self.batch_faults: dict[str, float] = {}
        self.batch_requests_log: list[dict[str, Any]] = []
        self.batch_sizes: list[int] = []
        self.batch_headers: list[dict[str, str]] = []
        self._batches: dict[str, _Batch] = {}
        self._batch_scripts: dict[str, list[str]] = {}
        self._batch_rng = random.Random(seed + 2)
        self._lock = threading.Lock()
        self._fault_rng = random.Random(seed)
        self._shape_rng = random.Random(seed + 1)
        self._scripts: dict[str, list[str]] = {}
        self._script_pos: dict[str, int] = {}
        self._cache: set[str] = set()
        self._in_flight = 0
        self._ids = 0
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

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
        """Fix the answers to one exact query: ``"skill:<name>"``, ``"tool:<Name>"``, ``"text"``;
        with ``model``, only for requests to that model (a model matrix's models may differ).

        Outcomes cycle; only successful responses advance, so a retried fault sees the same one.
        """
        if model is not None:
            query = f"{model}\x00{query}"
        for outcome in outcomes:
            if not (outcome == "text" or outcome.startswith(("skill:", "tool:"))):
                raise ValueError(f"bad scripted outcome {outcome!r}")
        if not outcomes:
            raise ValueError("outcomes must not be empty")
        with self._lock:
            self._scripts[query] = list(outcomes)
            self._script_pos[query] = 0

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

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Input/cache token estimate; the prefix up to the last ``cache_control`` is cached."""
        segments: list[tuple[str, str | None]] = []  # (text, cache breakpoint lifetime)
        tools = body.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict):
                seg = {k: v for k, v in tool.items() if k != "cache_control"}
                segments.append((json.dumps(seg, sort_keys=True), _ttl(tool)))
        system = body.get("system")
        if isinstance(system, str):
            segments.append((system, None))
        elif isinstance(system, list):
            for block in system:
                if isinstance(block, dict):
                    text = str(block.get("text", ""))
                    if text.startswith(BILLING_HEADER):
                        continue  # per-request attribution, not part of the cached prompt
                    segments.append((text, _ttl(block)))
        messages = body.get("messages")
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            role = str(message.get("role"))
            if isinstance(content, str):
                segments.append((role + content, None))
            elif isinstance(content, list):
                for block in content:
                    if not isinstance(block, dict):
                        continue
                    text = block.get("text")
                    if not isinstance(text, str):
                        text = json.dumps(
                            {k: v for k, v in block.items() if k != "cache_control"},
                            sort_keys=True,
                        )
                    segments.append((role + text, _ttl(block)))
        total = (sum(_estimate(t) for t, _ in segments) or 1) + self.prompt_padding
        last = max((i for i, (_, c) in enumerate(segments) if c), default=-1)
        if last < 0:
            return {
                "input_tokens": total,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            }
        # As the real API does, every breakpoint is looked up: the longest prefix already
        # cached is read, the rest up to the last breakpoint is written.
        digest = hashlib.sha256(str(body.get("model")).encode())
        keys: dict[int, str] = {}
        for i, (text, marked) in enumerate(segments[: last + 1]):
            digest.update(text.encode("utf-8", "surrogatepass"))
            digest.update(b"\x00")
            if marked:
                keys[i] = digest.copy().hexdigest()
        with self._lock:
            hit = max((i for i, key in keys.items() if key in self._cache), default=-1)
            self._cache.update(keys.values())
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

    # -- request handling -----------------------------------------------------------------------

    def _error(
        self,
        h: _Handler,
        rid: str,
        status: int,
        etype: str,
        message: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        payload = json.dumps(
            {"type": "error", "error": {"type": etype, "message": message}, "request_id": rid}
        ).encode()
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(payload)),
            "request-id": rid,
            **(extra or {}),
        }
        if h.command == "HEAD":
            h.start(status, headers)
            return
        h.start(status, headers)
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
        if not self._authorised(h):
            self._error(h, rid, 401, "authentication_error", "invalid x-api-key")
            return
        if not isinstance(body, dict):
            self._error(
                h,
                rid,
                400,
                "invalid_request_error",
                "The request body is not valid JSON (an object is required).",
            )
            return
        model = body.get("model")
        if not isinstance(model, str) or not isinstance(body.get("messages"), list):
            self._error(
                h,
                rid,
                400,
                "invalid_request_error",
                "model: Field required"
                if not isinstance(model, str)
                else "messages: Field required",
            )
            return
        if self.known_models is not None and model not in self.known_models:
            self._error(h, rid, 404, "not_found_error", f"model: {model}")
            return
        if counting:
            self._send_json(h, rid, {"input_tokens": self._usage_uncached(body)})
            return

        trigger = _is_trigger(body)
        self._bump("trigger_calls" if trigger else "improve_calls")
        stream = bool(body.get("stream"))
        fault = self._draw_fault()
        if fault == "hang":
            self._stopping.wait(self.hang_seconds)
        if fault in ("429", "529", "500") or (fault == "stream_error" and not stream):
            status, etype, msg, extra = {
                "429": (
                    429,
                    "rate_limit_error",
                    "Number of requests has exceeded your rate limit",
                    {"retry-after": "0", "x-should-retry": "true"},
                ),
                "500": (500, "api_error", "Internal server error", {"x-should-retry": "true"}),
            }.get(fault, (529, "overloaded_error", "Overloaded", {"x-should-retry": "true"}))
            if self.retry_after_ms is not None:
                extra = {**extra, "retry-after-ms": str(self.retry_after_ms)}
            self._error(h, rid, status, etype, msg, extra)
            return

        message, rng = self._answer(body, trigger, f"msg_fake_{rid[9:]}", advance=fault is None)
        if fault is None:
            with self._lock:
                self.stats["output_tokens"] += message["usage"]["output_tokens"]
                self.usages.append({**message["usage"], "model": body.get("model")})
        if not stream:
            self._send_json_message(h, rid, message, fault)
        else:
            self._send_stream(h, rid, message, fault, rng)

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
            with self._lock:
                scripted = (
                    (self.drafts.pop(0) if advance else self.drafts[0]) if (self.drafts) else None
                )
            text = scripted if scripted is not None else drafted_set(_message_texts(body)[-1])
            if advance:
                self._bump("decisions", "draft")
            return [{"type": "text", "text": text}], "end_turn"
        if not trigger:
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
        if _has_tool_result(body):
            if advance:
                self._bump("decisions", "done")
            return [{"type": "text", "text": DONE_TEXT}], "end_turn"
        query = extract_query(body)
        outcome = self._scripted(query, advance, body.get("model"))
        if outcome is None and self.graded is not None:
            chosen = self.graded.choose(query, parse_listing(body))
            outcome = f"skill:{chosen}" if chosen else decide(query, [], self.min_overlap)
        if outcome is None:
            listing = parse_listing(body)
            outcome = decide(query, listing, self.min_overlap)
            if body.get("model") in self.contrary_models and listing:
                outcome = "text" if outcome.startswith("skill:") else f"skill:{listing[0][0]}"
        if advance:
            self._bump("decisions", outcome)
        if outcome == "text":
            return [{"type": "text", "text": TEXT_ANSWER}], "end_turn"
        kind, _, name = outcome.partition(":")
        if kind == "skill":
            tool, tool_input = "Skill", {"skill": name}
        else:
            tool, tool_input = name, _tool_input(name, query)
        block = {
            "type": "tool_use",
            "id": f"toolu_fake_{self._next_id():06d}",
            "name": tool,
            "input": tool_input,
        }
        return [block], "tool_use"

    def _decorate(self, content: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
        """Add what real responses carry before the answer: thinking, a text preamble."""
        if not self.awkward:
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
        if path == "/v1/messages/batches":
            if method != "POST":
                return False  # listing batches is not imitated: 404 like any unknown path
            action, batch_id = "create", ""
        else:
            m = BATCH_PATH_RE.fullmatch(path)
            if m is None:
                return False
            action = {
                ("GET", None): "retrieve",
                ("GET", "results"): "results",
                ("POST", "cancel"): "cancel",
            }.get((method, m["action"]), "")
            if not action:
                return False
            batch_id = m["id"]
            stat = {"retrieve": "batch_polls", "results": "batch_results_fetches"}
            self._bump(stat.get(action, "batch_cancels"))
        if action == "create":
            self._bump("batch_creates")
        if self.latency > 0:
            self._stopping.wait(self.latency)
        if not self._authorised(h):
            self._error(h, rid, 401, "authentication_error", "invalid x-api-key")
            return True
        if action == "create":
            self._batch_create(h, rid, raw)
            return True
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            self._error(h, rid, 404, "not_found_error", f"message batch {batch_id} not found")
            return True
        if action == "results":
            self._batch_results(h, rid, batch)
            return True
        with batch.lock:
            if action == "retrieve":
                self._batch_poll(batch)
            elif batch.status == "in_progress":
                batch.status = "canceling"
                batch.cancel_initiated_at = datetime.now(timezone.utc)
            answer = batch.as_json()
        self._send_json(h, rid, answer)
        return True

    def _batch_create(self, h: _Handler, rid: str, raw: bytes) -> None:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        problem = batch_problem(body)
        if problem is not None:
            self._error(h, rid, 400, "invalid_request_error", problem)
            return
        with self._lock:
            refused = self.batch_create_refusals.pop(0) if self.batch_create_refusals else None
        if refused is not None:  # refused: no batch is made (whatever a real 5xx may mean)
            etype = CREATE_REFUSAL_TYPES.get(refused, "api_error")
            message = BATCH_ERROR_MESSAGES.get(etype, f"{etype} (scripted)")
            retry = {"x-should-retry": "true"} if refused in (429, 529) else None
            self._error(h, rid, refused, etype, message, retry)
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
        lines = []
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
    args = parser.parse_args(argv)
    api = FakeMessagesAPI(
        api_key=args.api_key or None,
        latency=args.latency,
        seed=args.seed,
        awkward=not args.clean,
        min_overlap=args.min_overlap,
        port=args.port,
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
