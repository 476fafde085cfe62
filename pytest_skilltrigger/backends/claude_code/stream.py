"""Reading the CLI's ``stream-json`` output: a pure function over JSON lines, so it is tested
on recorded output. The first-choice rule is the one the API backend uses
(:class:`~pytest_skilltrigger.backends.first_choice.FirstChoice`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_skilltrigger.backends.first_choice import FirstChoice, StreamError, choice_of
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.turn import LOOKING, READ_ONLY_TOOLS, TurnRule, step_text

# Tools whose input must be seen before deciding: a Read of a SKILL.md is a skill being used.
INSPECTED_TOOLS = frozenset({"Skill", "Read"})
# Statuses retrying cannot fix; the CLI would retry a 401 ten times over minutes.
FATAL_STATUSES = frozenset({401, 403, 404})
# a skill's SKILL.md in a run's workspace: the project's or the user's (the private config
# folder), and a plugin's (``plugins/<n>-<plugin>/skills/<folder>``, as the workspace lays it)
SKILL_FILE_RE = re.compile(r"(?:^|/)(?:\.claude|config)/skills/([^/]+)/SKILL\.md$")
PLUGIN_SKILL_FILE_RE = re.compile(r"(?:^|/)plugins/\d+-([^/]+)/skills/([^/]+)/SKILL\.md$")
UNDECIDED = "claude exited before the model chose anything"


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
    requests: int = 0  # API requests the stream showed (one ``message_start`` each)
    model: str | None = None  # the model the init event named
    last_problem: str | None = None  # what went wrong last before that, if anything
    turn_over: bool = False  # decided at the turn's ``result``: nothing of the query still runs
    path: list[str] = field(default_factory=list)  # the read-only calls gone past, in words


def read_stream(
    lines: Iterable[str], passes: str | None = None, rule: TurnRule | None = None
) -> CliVerdict:
    """Consume ``--output-format stream-json`` lines until the first decision, then return.

    Decides on the first tool call of the main conversation, from the raw stream events
    (thinking and text preambles skipped, the ``skill`` input assembled from fragments) or
    from a complete ``assistant`` message, whichever comes first. A ``Read`` of
    ``.claude/skills/<name>/SKILL.md`` counts as ``skill:<name>``. A message that ends without
    a tool, or a successful ``result`` without one, is ``text``. An API error reported by the
    CLI, an error result, or output that ends undecided is an error, never a miss.
    ``passes``: a file whose Read is not the decision (the run's way into a subfolder's
    skills), the model's next choice is. ``rule`` (``--trigger-within=turn``): the read-only
    calls the CLI runs itself and the run goes on past, up to its bound (then the outcome is
    :data:`~pytest_skilltrigger.model.turn.LOOKING`).
    """
    reader = _StreamReader(passes, rule)
    for raw in lines:
        msg = _json_line(raw)
        if msg is not None and reader.take(msg):
            return reader.verdict
    return reader.undecided()


def _json_line(raw: str) -> dict[str, Any] | None:
    """One line of output as a JSON object, or None for anything else (a log line)."""
    line = raw.strip()
    if not line.startswith("{"):
        return None
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


class _StreamReader:
    """The state of one CLI run's output: each ``take`` reads one line and says whether the
    verdict is decided."""

    def __init__(self, passes: str | None = None, rule: TurnRule | None = None) -> None:
        self.passes = passes
        self.rule = rule
        self.inspected = INSPECTED_TOOLS | (READ_ONLY_TOOLS if rule is not None else frozenset())
        self.bounded = False  # the bound of read-only calls was reached
        self.gone_past: set[str] = set()  # the read-only calls gone past, by tool_use id
        self.block_id = ""  # the id of the streamed tool call being read
        self.verdict = CliVerdict()
        self.choice = FirstChoice(self.inspected)
        self.earlier = Usage()  # the usage of requests before the current one
        # the usage so far of a request whose Read was let through (None: none is)
        self.passing: Usage | None = None

    def take(self, msg: dict[str, Any]) -> bool:
        kind = msg.get("type")
        if kind == "system":
            return self._system(msg)
        if msg.get("parent_tool_use_id"):
            return False  # a subagent's conversation, not the model's first choice
        if kind == "stream_event":
            return self._event(msg.get("event"))
        if kind == "assistant":
            return self._assistant(msg)
        if kind == "result":
            return self._result(msg)
        return False

    def _system(self, msg: dict[str, Any]) -> bool:
        """The init line (what the run was shown), or a request the CLI retries."""
        verdict = self.verdict
        subtype = msg.get("subtype")
        if subtype == "init":
            skills = msg.get("skills")
            if isinstance(skills, list):
                verdict.skills = tuple(str(s) for s in skills)
            verdict.cli_version = msg.get("claude_code_version")
            if isinstance(msg.get("model"), str):
                verdict.model = msg["model"]
            return self._servers(msg.get("mcp_servers"))
        if subtype in ("hook_response", "informational"):
            return self._hook(msg)
        if subtype == "api_retry":
            verdict.requests += 1  # a request that failed and that the CLI retries
            status = msg.get("error_status")
            verdict.last_problem = f"API error {status} ({msg.get('error')}), retried by the CLI"
            if status in FATAL_STATUSES:
                verdict.error = f"API error {status}: {msg.get('error')}"
                verdict.fatal = True
                return True
        return False

    def _servers(self, servers: Any) -> bool:
        """The project's MCP servers as the CLI started them: one that failed makes the run
        an error (its tools and instructions are missing from what the model is shown)."""
        listed = servers if isinstance(servers, list) else []
        failed = [
            str(s.get("name"))
            for s in listed
            if isinstance(s, dict) and s.get("status") == "failed"
        ]
        if failed:
            self.verdict.error = f"the project's MCP server {', '.join(failed)} failed to start"
        return bool(failed)

    def _hook(self, msg: dict[str, Any]) -> bool:
        """A hook of the project's that failed, or blocked the prompt: the run is an error
        (the CLI would go on, or answer nothing, and read as "did not trigger")."""
        event = msg.get("hook_event") or msg.get("hook_name") or "a"
        if msg.get("subtype") == "hook_response" and msg.get("outcome") == "error":
            said = str(msg.get("stderr") or msg.get("output") or "").strip()[-300:]
            code = msg.get("exit_code")
            what = "blocked the prompt" if code == 2 else f"failed (exit {code})"
            self.verdict.error = f"the project's {event} hook {what}: {said or 'no output'}"
            return True
        if msg.get("prevent_continuation"):  # blocked, also without its hook's event
            text = str(msg.get("content") or "blocked").splitlines()[0]
            self.verdict.error = f"the prompt was not sent: {text}"
            return True
        return False

    def _event(self, event: Any) -> bool:
        """A raw API stream event, fed to the first-choice rule."""
        if not isinstance(event, dict):
            return False
        name = str(event.get("type"))
        if name == "message_start":
            # another request (a retry, a follow-up): count it, keep what it cost so far
            self.verdict.requests += 1
            self.earlier = self.earlier + (self.passing or self.choice.usage)
            self.passing = None
            self.choice = FirstChoice(self.inspected)  # a retried request starts afresh
        if self.passing is not None:  # the rest of the Read let through: only its cost
            self._passing_usage(name, event)
            return False
        if not self.choice.wants(name):
            return False
        block = event.get("content_block") if name == "content_block_start" else None
        if isinstance(block, dict) and block.get("type") == "tool_use":
            self.block_id = str(block.get("id") or "")
        try:
            decision = self.choice.feed(name, event)
        except StreamError as exc:
            self.verdict.last_problem = f"stream error: {exc}"  # the CLI retries or reports it
            self.choice = FirstChoice(self.inspected)
            return False
        if decision is None:
            return False
        if self._passed(decision.chosen, decision.tool_input, self.block_id):
            self.passing = decision.usage  # the next request decides
            return False
        self.verdict.usage = self.earlier + decision.usage
        self.verdict.chosen = self._chosen(decision.chosen, decision.tool_input)
        return True

    def _passing_usage(self, name: str, event: dict[str, Any]) -> None:
        """The final output count of the request whose Read was let through."""
        out = (event.get("usage") or {}).get("output_tokens") if name == "message_delta" else None
        if self.passing is not None and isinstance(out, int):
            self.passing = replace(self.passing, output_tokens=out)

    def _assistant(self, msg: dict[str, Any]) -> bool:
        """A complete message: an API error the CLI reports, or its first tool call."""
        verdict = self.verdict
        given = msg.get("message")
        message: dict[str, Any] = given if isinstance(given, dict) else {}
        if msg.get("error") or msg.get("is_api_error_message"):
            status = msg.get("api_error_status")
            text = _text_of(message) or str(msg.get("error"))
            label = f"API error {status}" if status else f"API error ({msg.get('error')})"
            verdict.error = f"{label}: {text}"
            verdict.fatal = status in FATAL_STATUSES
            verdict.request_id = msg.get("request_id")
            return True
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                tool_input = block.get("input")
                tool_input = tool_input if isinstance(tool_input, dict) else {}
                chosen = choice_of(str(block.get("name")), tool_input)
                if self._passed(chosen, tool_input, str(block.get("id") or "")):
                    return False
                verdict.chosen = self._chosen(chosen, tool_input)
                streamed = self.choice.usage != Usage()
                verdict.usage = self.earlier + (
                    self.choice.usage if streamed else Usage.from_dict(message.get("usage"))
                )
                verdict.requests = max(verdict.requests, 1)
                return True
        return False

    def _passed(self, chosen: str, tool_input: dict[str, Any] | None, call_id: str = "") -> bool:
        """Whether the run goes on past a call: the Read of the file the run lets through
        (a subfolder's way in), or in a turn a read-only call within the bound (its step
        kept once: a call is seen in the stream's events and again in the whole message)."""
        if self.passes is not None and chosen == "tool:Read" and tool_input:
            path = str(tool_input.get("file_path") or "").replace("\\", "/")
            if path == self.passes or path.endswith("/" + self.passes):
                return True
        if self.rule is None or not self._looks(chosen, tool_input):
            return False
        if call_id and call_id in self.gone_past:
            return True
        if len(self.verdict.path) >= self.rule.bound:
            self.bounded = True  # the choice is: still looking around
            return False
        tool = chosen.partition(":")[2]
        self.verdict.path.append(step_text(tool, tool_input, self.rule.root))
        self.gone_past.add(call_id)
        return True

    def _looks(self, chosen: str, tool_input: dict[str, Any] | None) -> bool:
        kind, _, tool = chosen.partition(":")
        return self.rule is not None and kind == "tool" and self.rule.looks(tool, tool_input)

    def _chosen(self, chosen: str, tool_input: dict[str, Any] | None) -> str:
        """The run's choice (:data:`LOOKING` past the bound)."""
        return LOOKING if self.bounded else _chosen(chosen, tool_input)

    def _result(self, msg: dict[str, Any]) -> bool:
        """The run's last line: an error result, or an answer without a tool call."""
        verdict = self.verdict
        verdict.turn_over = True
        if msg.get("is_error") or msg.get("subtype") != "success":
            status = msg.get("api_error_status")
            detail = msg.get("result") or msg.get("subtype") or "error result"
            errors = msg.get("errors")
            if isinstance(errors, list) and errors:
                detail = f"{detail}: {'; '.join(str(e) for e in errors[:3])}"
            verdict.error = f"API error {status}: {detail}" if status else str(detail)
            verdict.fatal = status in FATAL_STATUSES
            return True
        verdict.chosen = "text"
        verdict.usage = Usage.from_dict(msg.get("usage"))
        verdict.requests = max(verdict.requests, 1)
        return True

    def undecided(self) -> CliVerdict:
        """The verdict of output that ended before any decision: an error, never a miss."""
        verdict = self.verdict
        verdict.undecided = True
        verdict.usage = self.earlier + self.choice.usage
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
        match = PLUGIN_SKILL_FILE_RE.search(path)
        if match:
            return f"skill:{match.group(1)}:{match.group(2)}"
    return chosen


def _text_of(message: dict[str, Any]) -> str:
    parts = [
        str(b.get("text"))
        for b in message.get("content") or []
        if isinstance(b, dict) and b.get("type") == "text"
    ]
    return " ".join(parts).strip()
