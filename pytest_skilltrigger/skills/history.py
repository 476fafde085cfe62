"""The conversation before a query: an eval entry's ``history`` (a list of turns) or
``history_file`` (a Claude Code session JSONL), read and checked before any call.

Skills trigger mid-conversation as often as at the start, and an earlier turn changes what
the model does with the next request (a skill already loaded, a question the assistant
asked). A history is kept as canonical JSON text, the turns as the Messages API takes them
(``{"role": "user"|"assistant", "content": text or blocks}``): that text is part of the
context, so the store keeps a history's runs apart from the same query's without one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pytest_skilltrigger.support.errors import InputError

ROLES = ("user", "assistant")


def history_text(turns: list[dict[str, Any]]) -> str:
    """The canonical text of checked turns (the context's key hashes it)."""
    return json.dumps(turns, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def turns_of(text: str) -> list[dict[str, Any]]:
    """The turns a canonical history text holds."""
    turns: list[dict[str, Any]] = json.loads(text)
    return turns


def read_entry_history(item: dict[str, Any], where: str, name: str) -> str | None:
    """An eval entry's history (``history`` or ``history_file``, relative to the eval file
    at ``where``) as canonical text, None when it has neither; InputError naming the file
    and the entry (or the history file and its line) for anything that would not replay."""
    if "history" in item and "history_file" in item:
        raise InputError(where, f"{name}: give history or history_file, not both")
    if "history_file" in item:
        given = item["history_file"]
        if not isinstance(given, str) or not given.strip():
            raise InputError(where, f"{name}: history_file must be a path to a session file")
        path = os.path.join(os.path.dirname(os.path.abspath(where)), given)
        return history_text(read_session_file(path))
    if "history" not in item:
        return None
    turns = item["history"]
    if not isinstance(turns, list) or not turns:
        raise InputError(where, f"{name}: history must be a non-empty list of turns")
    checked = [_turn(turn, f"{name}: history turn {i + 1}", where) for i, turn in enumerate(turns)]
    _check_ending(checked, where, name)
    return history_text(checked)


def _turn(turn: Any, label: str, where: str) -> dict[str, Any]:
    """One turn, checked: a known role and text or content blocks."""
    if not isinstance(turn, dict):
        raise InputError(where, f"{label}: must be an object with role and content")
    role = turn.get("role")
    if role not in ROLES:
        raise InputError(where, f"{label}: role {role!r} is not user or assistant")
    content = turn.get("content")
    if isinstance(content, str) and content.strip():
        return {"role": role, "content": content}
    blocks_ok = isinstance(content, list) and content and all(_block(b) for b in content)
    if not blocks_ok:
        raise InputError(where, f"{label}: content must be text or a list of content blocks")
    return {"role": role, "content": content}


def _block(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("type"), str)


def _check_ending(turns: list[dict[str, Any]], where: str, name: str) -> None:
    """The query is the next user turn: the history cannot end on a tool call that waits
    for its result."""
    last = turns[-1]
    if last["role"] == "assistant" and isinstance(last["content"], list):
        if any(block.get("type") == "tool_use" for block in last["content"]):
            raise InputError(
                where, f"{name}: the history ends with a tool call that has no result yet"
            )


def read_session_file(path: str) -> list[dict[str, Any]]:
    """The turns of a Claude Code session JSONL, as the CLI resumes it: the chain of
    ``parentUuid`` links back from the last line, user and assistant lines only."""
    try:
        with open(path, encoding="utf-8-sig") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        raise InputError(path, "history file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"history file cannot be read ({exc})") from None
    records: dict[str, tuple[int, dict[str, Any]]] = {}
    last: str | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = _record(line, path, number)
        if record is None:
            continue
        records[record["uuid"]] = (number, record)
        last = record["uuid"]
    if last is None:
        raise InputError(path, "the history file holds no user or assistant line")
    return _chain(records, last, path)


def _record(line: str, path: str, number: int) -> dict[str, Any] | None:
    """One line of a session file; None for the kinds the CLI does not replay as turns."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(path, f"line {number}: not valid JSON ({exc.msg})") from None
    if not isinstance(record, dict) or record.get("type") not in ROLES:
        return None
    message = record.get("message")
    if not isinstance(message, dict) or not isinstance(record.get("uuid"), str):
        raise InputError(path, f"line {number}: a {record['type']} line needs message and uuid")
    if not record.get("timestamp"):
        raise InputError(path, f"line {number}: no timestamp (the CLI finds no conversation)")
    turn = _turn(
        {"role": message.get("role", record["type"]), "content": message.get("content")},
        f"line {number}",
        path,
    )
    return {**record, "turn": turn}


def _chain(
    records: dict[str, tuple[int, dict[str, Any]]], last: str, path: str
) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    at: str | None = last
    while at is not None:
        number, record = records[at]
        turns.append(record["turn"])
        parent = record.get("parentUuid")
        if parent is not None and parent not in records:
            raise InputError(
                path, f"line {number}: parentUuid {parent!r} is not a line of the file"
            )
        at = parent
        if len(turns) > len(records):
            raise InputError(path, f"line {number}: the parentUuid chain runs in a circle")
    turns.reverse()
    _check_ending(turns, path, "the session")
    return turns


def session_lines(turns: list[dict[str, Any]], cwd: str) -> list[dict[str, Any]]:
    """The turns as a Claude Code session JSONL's lines (what ``--resume`` reads): each with
    its uuid, its parent's and a timestamp, in the working folder ``cwd``."""
    lines = []
    parent = None
    for number, turn in enumerate(turns):
        uuid = f"00000000-0000-4000-8000-{number:012d}"
        lines.append(
            {
                "type": turn["role"],
                "message": turn,
                "uuid": uuid,
                "parentUuid": parent,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "sessionId": "00000000-0000-4000-8000-000000000000",
                "cwd": cwd,
                "isSidechain": False,
                "userType": "external",
            }
        )
        parent = uuid
    return lines
