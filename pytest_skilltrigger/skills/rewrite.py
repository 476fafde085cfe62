"""Rewriting only the ``description`` of a SKILL.md, leaving every other byte alone.

The user's SKILL.md is theirs: comments, key order, extra keys, blank lines, CRLF and a BOM
must survive an improvement run, so the file is never re-serialised. Instead the old value's
exact extent is found (with YAML's own event marks when the file is valid YAML, by lines when
it only reads leniently) and only that text is replaced. Every candidate rendering is checked
by reading the result back; if nothing reads back exactly, there is no new text. Text in, text
out: writing it to disk is :mod:`.write_back`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_skilltrigger.skills.cli_frontmatter import read_as_cli
from pytest_skilltrigger.skills.frontmatter import (
    KEY_LINE_RE,
    locate_frontmatter,
    read_yaml_mapping,
    split_chunks,
)
from pytest_skilltrigger.skills.skill import description_problems
from pytest_skilltrigger.support.errors import InputError

# Characters PyYAML refuses to read unescaped (its Reader's printable check).
_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
_ESCAPES = {
    "\0": "\\0",
    "\x07": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\x0b": "\\v",
    "\x0c": "\\f",
    "\r": "\\r",
    "\x1b": "\\e",
    '"': '\\"',
    "\\": "\\\\",
    "\x85": "\\N",
    "\u2028": "\\L",
    "\u2029": "\\P",
    "\ufeff": "\\uFEFF",
}
# Characters YAML treats as line breaks: never emitted raw outside a double-quoted escape.
_BREAKS = ("\n", "\r", "\x85", "\u2028", "\u2029")


@dataclass(frozen=True)
class _Extent:
    """Where the old value sits, in offsets of the whole text, and how it was written.

    ``style`` is None (plain), ``'``, ``"``, ``|`` or ``>``; ``lead`` is what must precede an
    inline value (a space when the extent starts right after the colon); ``indent`` is the
    content indentation to reuse for a block scalar; ``comment`` is a comment on a block
    scalar's header line (``|  # why``), which lies inside the extent and is carried over.
    """

    start: int
    end: int
    style: str | None
    lead: str
    indent: int
    comment: str = ""


def _double_quoted(value: str) -> str:
    """A YAML double-quoted scalar for ``value``: one line, every risky character escaped."""
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif _NON_PRINTABLE.match(ch):
            code = ord(ch)
            if code <= 0xFF:
                out.append(f"\\x{code:02X}")
            elif code <= 0xFFFF:
                out.append(f"\\u{code:04X}")
            else:
                out.append(f"\\U{code:08X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _single_line_safe(value: str) -> bool:
    """True when ``value`` can appear raw on one line (plain or single-quoted)."""
    return (
        not any(b in value for b in _BREAKS)
        and not _NON_PRINTABLE.search(value)
        and ("\ufeff" not in value)
    )


def _plain(value: str) -> str | None:
    """``value`` as a plain scalar, or None when it obviously cannot be one.

    Subtler cases (``: ``, `` #``, indicators, ``true``, ``1.5``) are left to the read-back
    check, which is the only test that cannot be wrong.
    """
    if not _single_line_safe(value) or value != value.strip(" \t") or "\t" in value:
        return None
    return value


def _single_quoted(value: str) -> str | None:
    """``value`` as a single-quoted scalar, or None when it holds line breaks/non-printables."""
    if not _single_line_safe(value) or "\t" in value:
        return None
    return "'" + value.replace("'", "''") + "'"


def _literal_block(value: str, indent: int, eol: str) -> str | None:
    """``value`` as a ``|`` block (``|-``/``|``/``|+`` by its trailing newlines), or None.

    The returned text has no final line end: the line end that followed the old value stays.
    """
    if any(b in value for b in _BREAKS[1:]) or _NON_PRINTABLE.search(value) or "\ufeff" in value:
        return None
    stripped = value.rstrip("\n")
    trailing = len(value) - len(stripped)
    if not stripped:
        return None
    chomp = "-" if trailing == 0 else "" if trailing == 1 else "+"
    pad = " " * indent
    lines = [pad + line if line else "" for line in stripped.split("\n")]
    return "|" + chomp + eol + eol.join(lines) + eol * max(trailing - 1, 0)


def _folded_one_line(value: str, indent: int, eol: str) -> str | None:
    """A one-line ``value`` under a ``>-`` header (keeps a folded original folded)."""
    if not _single_line_safe(value) or value[:1] in (" ", "\t"):
        return None
    return ">-" + eol + " " * indent + value


def _eol_at(text: str, pos: int) -> str:
    """The line-end style of the line holding ``pos`` (CRLF files stay CRLF)."""
    nl = text.find("\n", pos)
    if nl < 0:
        nl = text.rfind("\n")
    return "\r\n" if nl > 0 and text[nl - 1] == "\r" else "\n"


def _description_events(fm: str, where: str) -> tuple[yaml.ScalarEvent, yaml.ScalarEvent]:
    """The top-level ``description`` key's event and its value's, as PyYAML parses them.

    Events (not nodes) are used so that an alias (``description: *x``) is seen as such
    instead of pointing at the anchored text elsewhere. The last top-level ``description``
    wins, as it does when YAML builds the mapping.
    """
    depth = 0
    is_key = True
    found: tuple[yaml.ScalarEvent, yaml.ScalarEvent] | None = None
    events = iter(yaml.parse(fm))
    for event in events:
        if isinstance(event, yaml.CollectionStartEvent):
            is_key = not is_key if depth == 1 else is_key
            depth += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif depth == 1 and isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            if is_key and isinstance(event, yaml.ScalarEvent) and event.value == "description":
                found = (event, _scalar_value(next(events), where))
            else:
                is_key = not is_key
    if found is None:
        raise InputError(where, "frontmatter has no 'description' to replace")
    return found


def _scalar_value(event: yaml.Event, where: str) -> yaml.ScalarEvent:
    if not isinstance(event, yaml.ScalarEvent):
        raise InputError(where, "'description' is not a plain text value; cannot rewrite it")
    return event


def _index(mark: object) -> int:
    """Where an event starts or ends in the parsed text (PyYAML's parser always says)."""
    index = getattr(mark, "index", None)
    assert isinstance(index, int)
    return index


def _strict_extent(text: str, fm_start: int, fm: str, where: str) -> _Extent:
    """The description value's extent from PyYAML's own event marks (exact for all styles)."""
    key, value = _description_events(fm, where)
    start = fm_start + _index(value.start_mark)
    end = fm_start + _index(value.end_mark)
    if value.style is None and value.value == "" and start == end:
        # ``description:`` with nothing after it: write right after the colon.
        colon = text.index(":", fm_start + _index(key.end_mark)) + 1
        return _Extent(colon, colon, None, " ", 2)
    indent = 2
    comment = ""
    if value.style in ("|", ">"):
        segment = text[start:end]
        end = start + len(segment.rstrip(" \t\r\n"))
        comment = _header_comment(segment.split("\n")[0])
        for line in segment.split("\n")[1:]:
            if line.strip(" \t\r"):
                indent = len(line) - len(line.lstrip(" "))
                break
    return _Extent(start, end, value.style, "", indent, comment)


_HEADER_COMMENT_RE = re.compile(r"[ \t]+#.*$")
_LINE_BREAK_RE = re.compile("[\r\n\x85\u2028\u2029]")


def _header_comment(header: str) -> str:
    """The comment (with the spaces before it) on a block scalar's header line, or ''.

    A tab before it becomes a space: PyYAML refuses a tab after a block indicator, and the
    rewritten entry must be valid YAML.
    """
    header = _LINE_BREAK_RE.split(header, maxsplit=1)[0]  # YAML breaks lines at these too
    match = _HEADER_COMMENT_RE.search(header)
    if not match:
        return ""
    comment = match.group(0)
    return comment if "\t" not in comment else " " + comment.lstrip(" \t")


def _lenient_extent(text: str, fm_start: int, fm: str, where: str) -> _Extent:
    """The description's extent by lines, for frontmatter that only reads leniently.

    The value runs from just after ``description:`` to the end of the last non-blank line of
    its entry (its indented continuation lines); the last such entry wins, as in YAML.
    """
    found: _Extent | None = None
    for offset, chunk in split_chunks(fm):
        match = KEY_LINE_RE.match(chunk[0].rstrip("\r"))
        if not match or match.group("key") != "description":
            continue
        lines = list(chunk)
        while len(lines) > 1 and not lines[-1].strip(" \t\r"):
            lines.pop()
        line_pos = fm_start + offset
        colon = line_pos + chunk[0].index(":") + 1
        end = line_pos + len("\n".join(lines).rstrip("\r"))
        rest = (match.group("rest") or "").lstrip()
        style = rest[:1] if rest[:1] in ("|", ">", "'", '"') else None
        comment = _header_comment(rest) if style in ("|", ">") else ""
        indent = 2
        for line in lines[1:]:
            if line.strip(" \t\r"):
                indent = max(len(line) - len(line.lstrip(" ")), 1)
                break
        found = _Extent(colon, end, style, " ", indent, comment)
    if found is None:
        raise InputError(where, "frontmatter has no 'description' to replace")
    return found


def _candidates(new: str, extent: _Extent, eol: str) -> list[str]:
    """Renderings of ``new`` to try, the original's style first, double-quoted last."""
    makers: list[Callable[[], str | None]] = []
    if extent.style is None:
        makers.append(lambda: _plain(new))
    elif extent.style == "'":
        makers.append(lambda: _single_quoted(new))
    elif extent.style in ("|", ">"):
        if extent.style == ">" and "\n" not in new:
            makers.append(lambda: _folded_one_line(new, extent.indent, eol))
        makers.append(lambda: _literal_block(new, extent.indent, eol))
    makers.append(lambda: _double_quoted(new))
    renderings = [r for r in (make() for make in makers) if r is not None]
    if extent.comment:  # with the header comment first; without it if it cannot come along
        renderings = [_with_comment(r, extent.comment, eol) for r in renderings] + renderings
    return list(dict.fromkeys(renderings))


def _with_comment(rendered: str, comment: str, eol: str) -> str:
    """Keep the old header comment: at the end of a block header, or after an inline value."""
    if rendered[:1] in ("|", ">"):
        header, sep, rest = rendered.partition(eol)
        return header + comment + sep + rest
    return rendered + comment


def _same(a: object, b: object) -> bool:
    """Equality that also accepts values equal only by repr (``.nan`` is not equal to itself)."""
    return a == b or repr(a) == repr(b)


@dataclass(frozen=True)
class _Original:
    """What a rewrite must keep of the file: every other key as it was (and, when the
    frontmatter was valid YAML, valid YAML), and the body to the byte."""

    mapping: dict[str, Any]
    strict: bool
    body: str
    where: str
    when_to_use: str | None = None  # as the CLI reads it: a rewrite must keep it

    def reads_back(self, new_text: str, new: str, extent: _Extent) -> bool:
        """True when ``new_text`` reads back with exactly ``new`` and all else unchanged,
        as YAML reads it and as the pinned Claude Code CLI reads it."""
        cli = read_as_cli(new_text)
        if cli.description != new or cli.when_to_use != self.when_to_use:
            return False
        try:
            span = locate_frontmatter(new_text, self.where)
            parsed = read_yaml_mapping(new_text[span.start : span.end], self.where)
        except InputError:
            return False
        if new_text[span.body_start :] != self.body or (self.strict and not parsed.strict):
            return False
        got = parsed.mapping.get("description")
        if not isinstance(got, str) or got != new or not self._keeps_the_rest(parsed.mapping):
            return False
        if parsed.strict:
            return True
        # The description entry itself must now be valid YAML, even if other keys are not.
        line_start = new_text.rfind("\n", 0, extent.start) + 1
        return _entry_reads_back(new_text[line_start : span.end], new)

    def _keeps_the_rest(self, mapping: dict[str, Any]) -> bool:
        others = (k for k in self.mapping if k != "description")
        if any(k not in mapping or not _same(mapping[k], self.mapping[k]) for k in others):
            return False
        return not self.strict or set(mapping) == set(self.mapping)


def _entry_reads_back(frontmatter: str, new: str) -> bool:
    """Whether the first entry of ``frontmatter`` (the description's) is valid YAML on its
    own and reads ``new``."""
    chunks = split_chunks(frontmatter)
    if not chunks:
        return False
    try:
        loaded = yaml.safe_load("\n".join(chunks[0][1]) + "\n")
    except Exception:  # not valid YAML: reject this rendering
        return False
    return isinstance(loaded, dict) and loaded.get("description") == new


def replace_description(text: str, new_description: str, where: str) -> str:
    """Return ``text`` with only the description's value replaced by ``new_description``.

    ``text`` is the decoded file (a leading BOM stays in it). Raises InputError when the new
    description breaks the Agent Skills limits or no rendering reads back exactly.
    """
    problems = description_problems(new_description)
    if problems:
        raise InputError(where, "refusing to write the description: " + "; ".join(problems))
    span = locate_frontmatter(text, where)
    fm = text[span.start : span.end]
    parsed = read_yaml_mapping(fm, where)
    body = text[span.body_start :]
    if parsed.strict:
        try:
            extent = _strict_extent(text, span.start, fm, where)
        except yaml.YAMLError as exc:  # pragma: no cover - safe_load already succeeded
            raise InputError(where, f"frontmatter cannot be rewritten ({exc})") from None
    else:
        extent = _lenient_extent(text, span.start, fm, where)
    eol = _eol_at(text, extent.start)
    original = _Original(parsed.mapping, parsed.strict, body, where, read_as_cli(text).when_to_use)
    for rendered in _candidates(new_description, extent, eol):
        new_text = text[: extent.start] + extent.lead + rendered + text[extent.end :]
        if original.reads_back(new_text, new_description, extent):
            return new_text
    raise InputError(where, "cannot write this description so that it reads back exactly")
