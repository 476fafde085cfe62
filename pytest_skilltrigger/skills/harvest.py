"""Eval entries from the author's own Claude Code sessions (``--trigger-harvest``).

Claude Code keeps every conversation as a JSONL file under ``~/.claude/projects/<folder>``,
``<folder>`` being the session's working folder with every character but letters and digits
written as ``-`` (a name past 200 characters is cut there and ends with a hash of the whole).
Read line by line as the pinned CLI writes them (``docs/how-to/own-install.md`` lists what is
read), each session becomes a row of turns: a prompt, the skills the model loaded (``Skill``
calls), whether the user interrupted, the answer's text. For each collected skill:

- **observed**: a prompt after which the model loaded the skill (should trigger);
- **missed**: a prompt after which it did not, and the user's next prompt forced it (typed
  ``/<skill>``, or asked to "use the X skill") (should trigger);
- **undone**: a load the user undid at once, interrupting the turn or saying "don't use X"
  next (should not trigger).

A prompt that itself forces a skill is never an entry: the model had no choice to make.
Texts pass through the project's redaction, and the home folder becomes ``~``. Nothing is
written here; :mod:`.harvest_file` writes and merges.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from pytest_skilltrigger.support.redact import redact

PROJECTS = os.path.join(".claude", "projects")
NAME_LIMIT = 200  # the longest folder name the CLI writes before it cuts and hashes
COMMAND_NAME_RE = re.compile(r"<command-name>/?([^<\s]+)</command-name>")
COMMAND_ARGS_RE = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
ASKED_RE = re.compile(
    r"\b(?:use|load|invoke|run|try)\s+(?:the\s+|your\s+|my\s+)?[`'\"]?/?([\w:.-]+?)[`'\"]?"
    r"\s+skill\b|\b(?:use|run|invoke)\s+[`'\"]?/([\w:.-]+)",
    re.IGNORECASE,
)
UNDONE_RE = re.compile(
    r"\b(?:don'?t|do\s+not|stop|never|no\s+need\s+to)\s+(?:use|using|load|loading|invoke)\s+"
    r"(?:the\s+)?[`'\"]?/?([\w:.-]+)",
    re.IGNORECASE,
)
SLASH_RE = re.compile(r"^/([\w:.-]+)(?:\s|$)")
INTERRUPTED = "[Request interrupted by user"
PERSONAL_PATH_RE = re.compile(r"(?:/home|/Users)/[^/\s\"']+|[A-Za-z]:\\Users\\[^\\\s\"']+")


class UnreadableSession(Exception):
    """A session file that is not the CLI's JSONL (malformed, cut short): skipped."""


@dataclass(frozen=True)
class Turn:
    """One prompt of a session and what followed it, to the next prompt."""

    line: int  # the prompt's line in the file (from 1)
    prompt: str
    day: str  # ISO date of the prompt
    forced: str | None = None  # the skill the prompt forced (typed /name, "use the X skill")
    loads: tuple[str, ...] = ()  # the skills the model loaded
    interrupted: bool = False
    answer: str = ""  # the assistant's text


@dataclass(frozen=True)
class Session:
    """A session file read: its path, its turns in order, and the names its listing showed
    (None when the file has no listing)."""

    path: str
    turns: tuple[Turn, ...]
    listed: frozenset[str] | None = None


@dataclass(frozen=True)
class Found:
    """One harvested entry: the skill, the prompt, whether it should trigger, why (observed,
    missed, undone), the earlier turns (Messages API turns), its date and where it came from."""

    skill: str
    prompt: str
    should_trigger: bool
    signal: str
    history: tuple[dict[str, str], ...]
    day: str
    source: str
    line: int

    def to_case(self) -> dict[str, Any]:
        """The entry in the eval-set format this plugin reads (a case naming its skill)."""
        case: dict[str, Any] = {
            "prompt": self.prompt,
            "should_trigger": self.should_trigger,
            "expected_skill": self.skill,
            "harvested": True,
            "signal": self.signal,
            "date": self.day,
            "source": {"file": self.source, "line": self.line},
        }
        if self.history:
            case["history"] = [dict(turn) for turn in self.history]
        return case


@dataclass(frozen=True)
class Week:
    """A skill's week: sessions that listed it, the model's loads, the user's forced loads."""

    sessions: int = 0
    loads: int = 0
    forced: int = 0


@dataclass(frozen=True)
class Harvest:
    """What a harvest found: entries, each skill's weeks, the files read and skipped."""

    found: tuple[Found, ...]
    weeks: Mapping[str, Mapping[str, Week]]
    read: int
    skipped: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()


# -- where the sessions are ---------------------------------------------------------------------


def folder_name(cwd: str) -> str:
    """The folder name the CLI keeps a working folder's sessions under."""
    name = re.sub(r"[^A-Za-z0-9]", "-", cwd)
    if len(name) <= NAME_LIMIT:
        return name
    return f"{name[:NAME_LIMIT]}-{_base36(abs(_java_hash(cwd)))}"


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 units, as a signed 32-bit number."""
    value = 0
    for unit in text.encode("utf-16-le").hex(" ", 2).split():
        value = (31 * value + int(unit[2:] + unit[:2], 16)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


def session_files(home: str, project: str | None) -> tuple[list[str], list[str]]:
    """The session files to read, and their folders: those of ``project`` and of the
    folders below it (None: every project's)."""
    root = os.path.join(home, PROJECTS)
    if not os.path.isdir(root):
        return [], []
    names = sorted(os.listdir(root))
    if project is not None:
        own = folder_name(os.path.abspath(project))
        names = [n for n in names if n == own or n.startswith(own + "-")]
    folders = [os.path.join(root, n) for n in names if os.path.isdir(os.path.join(root, n))]
    files = [
        os.path.join(folder, file)
        for folder in folders
        for file in sorted(os.listdir(folder))
        if file.endswith(".jsonl")
    ]
    return files, folders


# -- reading one session ------------------------------------------------------------------------


def read_session(path: str, project: str | None = None) -> Session | None:
    """The session in ``path``; None when it was held in a folder outside ``project`` (a
    folder whose name only looks like one below it). UnreadableSession for a file that is
    not the CLI's JSONL."""
    records = list(_records(path))
    cwd = next((r.get("cwd") for _n, r in records if isinstance(r.get("cwd"), str)), None)
    if project is not None and cwd is not None and not _inside(cwd, project):
        return None
    reader = _TurnReader()
    for number, record in records:
        reader.add(number, record)
    return Session(path, tuple(reader.turns()), reader.listed)


def _records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableSession(f"cannot be read ({exc})") from None
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            cut = number == len(lines)  # the last line, with no newline after it
            raise UnreadableSession(
                f"line {number} is {'cut short' if cut else 'not JSON'}"
            ) from None
        if not isinstance(record, dict):
            raise UnreadableSession(f"line {number} is not a JSON object")
        yield number, record


def _inside(cwd: str, project: str) -> bool:
    cwd, project = os.path.abspath(cwd), os.path.abspath(project)
    return cwd == project or cwd.startswith(project.rstrip(os.sep) + os.sep)


class _TurnReader:
    """Turns from a session's lines in file order (a branch the user abandoned stays a turn
    of its own: it was typed)."""

    def __init__(self) -> None:
        self._turns: list[dict[str, Any]] = []
        self.listed: frozenset[str] | None = None

    def add(self, number: int, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "attachment":
            self._listing(record.get("attachment"))
        elif kind == "user" and not record.get("isSidechain"):
            self._user(number, record)
        elif kind == "assistant" and not record.get("isSidechain") and self._turns:
            self._assistant(record)

    def turns(self) -> Iterator[Turn]:
        for turn in self._turns:
            yield Turn(
                turn["line"],
                turn["prompt"],
                turn["day"],
                turn["forced"],
                tuple(turn["loads"]),
                turn["interrupted"],
                "\n".join(turn["answer"]).strip(),
            )

    def _listing(self, attachment: Any) -> None:
        if isinstance(attachment, dict) and attachment.get("type") == "skill_listing":
            names = attachment.get("names")
            if isinstance(names, list):
                self.listed = (self.listed or frozenset()) | {str(n) for n in names}

    def _user(self, number: int, record: dict[str, Any]) -> None:
        if record.get("isMeta") or record.get("isCompactSummary"):
            return
        content = (record.get("message") or {}).get("content")
        if isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict) and "text" in b]
            if any(isinstance(t, str) and t.startswith(INTERRUPTED) for t in texts):
                if self._turns:
                    self._turns[-1]["interrupted"] = True
                return
            if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
                return
            content = "\n".join(t for t in texts if isinstance(t, str))
        if isinstance(content, str) and content.strip():
            self._prompt(number, content, str(record.get("timestamp") or ""))

    def _prompt(self, number: int, content: str, stamp: str) -> None:
        typed = COMMAND_NAME_RE.search(content)
        if typed is not None and "<command-message>" in content:
            args = COMMAND_ARGS_RE.search(content)
            prompt = f"/{typed.group(1)} {args.group(1) if args else ''}".strip()
            forced: str | None = typed.group(1)
        else:
            prompt = content.strip()
            forced = _asked_for(prompt)
        self._turns.append(
            {
                "line": number,
                "prompt": prompt,
                "day": stamp[:10],
                "forced": forced,
                "loads": [],
                "interrupted": False,
                "answer": [],
            }
        )

    def _assistant(self, record: dict[str, Any]) -> None:
        content = (record.get("message") or {}).get("content")
        turn = self._turns[-1]
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                turn["answer"].append(block["text"])
            if block.get("type") == "tool_use" and block.get("name") == "Skill":
                called = (block.get("input") or {}).get("skill")
                if isinstance(called, str) and called:
                    turn["loads"].append(called.lstrip("/"))


def _asked_for(prompt: str) -> str | None:
    """The skill a prompt forces: typed as ``/name`` (kept as text when the CLI did not know
    the command), or asked for ("use the X skill")."""
    typed = SLASH_RE.match(prompt)
    if typed is not None:
        return typed.group(1)
    asked = ASKED_RE.search(prompt)
    return (asked.group(1) or asked.group(2)) if asked else None


# -- what the sessions say about each skill -----------------------------------------------------


@dataclass(frozen=True)
class Names:
    """The names a collected skill is called by (its id, its alias, the name after a
    plugin's prefix), lower-cased."""

    skill: str
    called: frozenset[str]

    @classmethod
    def of(cls, skill: str, aliases: Iterable[str] = ()) -> Names:
        names = {skill, *aliases}
        names |= {n.rpartition(":")[2] for n in names}
        return cls(skill, frozenset(n.lower() for n in names if n))

    def match(self, name: str | None) -> bool:
        return name is not None and name.lower().strip("`'\"/") in self.called


def harvest(
    home: str, project: str | None, skills: Sequence[Names], scrub: Sequence[str] = ()
) -> Harvest:
    """Entries and weeks for ``skills`` from the sessions of ``project`` (None: all)."""
    files, folders = session_files(home, project)
    found: list[Found] = []
    weeks: dict[str, dict[str, Counter[str]]] = {s.skill: {} for s in skills}
    skipped: list[str] = []
    read = 0
    clean = _Scrubber(home, scrub)
    for path in files:
        try:
            session = read_session(path, project)
        except UnreadableSession as exc:
            skipped.append(f"{clean(path)}: {exc}; skipped")
            continue
        if session is None:
            continue
        read += 1
        for names in skills:
            found += _entries(session, names, clean)
            _count(session, names, weeks[names.skill])
    return Harvest(
        tuple(found),
        {
            skill: {w: Week(**c) for w, c in sorted(by.items()) if any(c.values())}
            for skill, by in weeks.items()
        },
        read,
        tuple(skipped),
        tuple(clean(f) for f in folders),
    )


def _entries(session: Session, names: Names, clean: _Scrubber) -> Iterator[Found]:
    turns = session.turns
    for at, turn in enumerate(turns):
        if turn.forced is not None:
            continue  # the prompt chose for the model
        after = turns[at + 1] if at + 1 < len(turns) else None
        loaded = any(names.match(n) for n in turn.loads)
        undone = loaded and (turn.interrupted or _undoes(after, names))
        if loaded:
            signal = "undone" if undone else "observed"
        elif after is not None and names.match(after.forced):
            signal = "missed"
        else:
            continue
        history = _history(turns[:at], clean)
        yield Found(
            names.skill,
            clean(turn.prompt),
            signal != "undone",
            signal,
            history,
            turn.day,
            clean(session.path),
            turn.line,
        )


def _undoes(after: Turn | None, names: Names) -> bool:
    if after is None:
        return False
    return any(names.match(m.group(1)) for m in UNDONE_RE.finditer(after.prompt))


def _history(turns: Sequence[Turn], clean: _Scrubber) -> tuple[dict[str, str], ...]:
    """The earlier turns as the Messages API takes them: each prompt and the answer's text."""
    history: list[dict[str, str]] = []
    for turn in turns:
        history.append({"role": "user", "content": clean(turn.prompt)})
        history.append({"role": "assistant", "content": clean(turn.answer) or "(no text)"})
    return tuple(history)


def _count(session: Session, names: Names, weeks: dict[str, Counter[str]]) -> None:
    if not session.turns:
        return
    week = _week(session.turns[0].day)
    counts = weeks.setdefault(week, Counter())
    if session.listed is None or any(names.match(n) for n in session.listed):
        counts["sessions"] += 1
    counts["loads"] += sum(names.match(n) for t in session.turns for n in t.loads)
    counts["forced"] += sum(names.match(t.forced) for t in session.turns)


def _week(day: str) -> str:
    try:
        year, week, _ = date.fromisoformat(day).isocalendar()
    except ValueError:
        return "undated"
    return f"{year}-W{week:02d}"


class _Scrubber:
    """Redaction for what a harvest keeps: secrets (the project's redaction), the home
    folder as ``~``, any other user's home folder as ``~``."""

    def __init__(self, home: str, also: Sequence[str] = ()) -> None:
        self.home = os.path.abspath(home).rstrip(os.sep)
        self.also = tuple(also)

    def __call__(self, text: str) -> str:
        text = redact(text, self.also)
        if self.home and self.home != os.sep:
            text = text.replace(self.home, "~")
            # the folder names sessions are kept under spell the home out too
            text = text.replace(folder_name(self.home), "~")
        return PERSONAL_PATH_RE.sub("~", text)
