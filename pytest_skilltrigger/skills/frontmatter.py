"""The frontmatter of a SKILL.md as the rewriter needs it: where its ``---`` lines are, its
top-level entries, and reading it as YAML reads it (leniently, entry by entry, where it is not
valid YAML), so that a rewrite changes one value and keeps every other byte.

What Claude Code makes of a file (and so what is tested) is :mod:`.cli_frontmatter`'s; the
rewriter checks its result both ways.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_skilltrigger.support.errors import InputError

BOM = "\ufeff"
# A top-level ``key:`` line, as read leniently (optionally quoted key).
KEY_LINE_RE = re.compile(
    r"""^(?P<q>["']?)(?P<key>[A-Za-z0-9_][\w.-]*)(?P=q)[ \t]*:(?:[ \t]+(?P<rest>.*))?$"""
)
_BLOCK_HEADER_RE = re.compile(r"^(?P<kind>[|>])[+-]?[1-9]?[+-]?(?:[ \t]+#.*)?$")


@dataclass(frozen=True)
class FrontmatterSpan:
    """Character offsets of the frontmatter inside a decoded SKILL.md text.

    Shared with the rewriter so that reading and rewriting agree on where the YAML is.
    ``start`` is the first character after the opening ``---`` line, ``end`` the first
    character of the closing ``---`` line and ``body_start`` the first character after it.
    """

    start: int
    end: int
    body_start: int


@dataclass(frozen=True)
class ParsedYaml:
    """The mapping read from frontmatter text, and whether strict YAML could read it."""

    mapping: dict[str, Any]
    strict: bool
    warnings: tuple[str, ...]


def _is_marker(line: str) -> bool:
    """True for a ``---`` document-marker line (trailing blanks and line end tolerated)."""
    return line.rstrip("\r\n").rstrip(" \t") == "---"


def locate_frontmatter(text: str, where: str) -> FrontmatterSpan:
    """Find the frontmatter between the opening and closing ``---`` lines.

    Only a BOM may precede the opening line: Claude Code does not look further, so neither do
    we. Lines are split on ``\\n`` only so that CRLF files keep their ``\\r`` inside the line.
    """
    pos = 1 if text.startswith(BOM) else 0
    first_end = text.find("\n", pos)
    first = text[pos:] if first_end < 0 else text[pos : first_end + 1]
    if not _is_marker(first):
        raise InputError(where, "does not start with a '---' frontmatter line")
    if first_end < 0:
        raise InputError(where, "frontmatter is not closed by a '---' line")
    start = first_end + 1
    line_start = start
    while line_start < len(text):
        nl = text.find("\n", line_start)
        line_end = len(text) if nl < 0 else nl + 1
        if _is_marker(text[line_start:line_end]):
            return FrontmatterSpan(start, line_start, line_end)
        line_start = line_end
    raise InputError(where, "frontmatter is not closed by a '---' line")


def yaml_problem(exc: BaseException, line_offset: int = 0) -> str:
    """A one-line summary of a YAML error, with the line number in the whole file."""
    lines = str(exc).splitlines()
    problem = getattr(exc, "problem", None) or (lines[0] if lines else "")
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        problem = f"{problem} at line {mark.line + 1 + line_offset}"
    return problem or type(exc).__name__


def _strict_load(fm: str, loader: type[yaml.SafeLoader]) -> Any:
    """Load with ``loader``; any failure (YAML error, bad date, deep nesting) propagates."""
    return yaml.load(fm, Loader=loader)


def split_chunks(fm: str) -> list[tuple[int, list[str]]]:
    """Split frontmatter into top-level entries: (offset in ``fm``, key line + its lines).

    A line starting in column 0 (a key, a comment, anything) ends the previous entry, as it
    does in YAML for every scalar style used at the top level of a mapping. Lines are kept
    verbatim (a CRLF file keeps its ``\\r``) so the rewriter can compute offsets from them.
    """
    chunks: list[tuple[int, list[str]]] = []
    current: list[str] | None = None
    offset = 0
    for line in fm.split("\n"):
        line_start = offset
        offset += len(line) + 1
        bare = line.rstrip("\r")
        if bare.strip(" \t") == "" or bare[:1] in (" ", "\t"):
            if current is not None:
                current.append(line)
            continue
        current = None
        if bare.startswith("#"):
            continue
        current = [line]
        chunks.append((line_start, current))
    return chunks


def _fold_plain(rest: str, continuation: list[str]) -> str:
    """Join a plain scalar's lines as YAML does: single spaces, blank lines become ``\\n``."""
    value = rest
    blanks = 0
    for line in continuation:
        piece = line.strip(" \t\r")
        if not piece:
            blanks += 1
            continue
        if value:
            value += "\n" * blanks if blanks else " "
        value += piece
        blanks = 0
    return value


def _lenient_value(rest: str, continuation: list[str]) -> str:
    """Read a value by lines when YAML cannot: rest of the line, quotes and blocks handled."""
    header = _BLOCK_HEADER_RE.match(rest)
    if header:
        lines = [line.rstrip("\r") for line in continuation]
        while lines and not lines[-1].strip():
            lines.pop()
        indents = [len(line) - len(line.lstrip(" ")) for line in lines if line.strip()]
        cut = min(indents) if indents else 0
        content = [line[cut:] for line in lines]
        if header.group("kind") == "|":
            return "\n".join(content)
        return _fold_plain("", content)
    value = _fold_plain(rest.strip(" \t\r"), continuation)
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        try:
            loaded = yaml.safe_load(value)
        except Exception:  # any failure means "just strip the quotes"
            loaded = None
        value = loaded if isinstance(loaded, str) else value[1:-1]
    return value


def _lenient_load(fm: str, loader: type[yaml.SafeLoader]) -> dict[str, Any]:
    """Read each top-level entry on its own; fall back to lines for name and description.

    Entries that are valid YAML by themselves (nested ``metadata``, lists) keep their real
    values; only the broken ones are read by lines, and only ``name``/``description`` matter
    enough to guess at.
    """
    mapping: dict[str, Any] = {}
    for _, chunk in split_chunks(fm):
        text = "\n".join(chunk) + "\n"
        try:
            loaded = yaml.load(text, Loader=loader)
        except Exception:  # fall through to the line reading
            loaded = None
        if isinstance(loaded, dict):
            mapping.update(loaded)
            continue
        match = KEY_LINE_RE.match(chunk[0].rstrip("\r"))
        if match and match.group("key") in ("name", "description"):
            mapping[match.group("key")] = _lenient_value(match.group("rest") or "", chunk[1:])
    return mapping


def read_yaml_mapping(
    fm: str,
    where: str,
    line_offset: int = 1,
    loader: type[yaml.SafeLoader] = yaml.SafeLoader,
) -> ParsedYaml:
    """Read frontmatter text strictly, or leniently with a warning when strict YAML fails.

    ``line_offset`` is the number of file lines before ``fm`` (the opening ``---``), so that
    the warning points at the right line of SKILL.md.
    """
    try:
        loaded = _strict_load(fm, loader)
    except Exception as exc:  # YAML, date and recursion errors alike
        mapping = _lenient_load(fm, loader)
        if not mapping:
            raise InputError(
                where, f"frontmatter is not readable YAML ({yaml_problem(exc, line_offset)})"
            ) from None
        warning = (
            f"{where}: frontmatter is not valid YAML ({yaml_problem(exc, line_offset)}); "
            "read leniently"
        )
        return ParsedYaml(mapping, False, (warning,))
    if loaded is None:
        return ParsedYaml({}, True, ())
    if isinstance(loaded, dict):
        return ParsedYaml(loaded, True, ())
    mapping = _lenient_load(fm, loader)
    if not mapping:
        raise InputError(
            where, f"frontmatter is not a YAML mapping (it reads as {type(loaded).__name__})"
        )
    warning = f"{where}: frontmatter is not a YAML mapping; read leniently"
    return ParsedYaml(mapping, False, (warning,))


def decode_skill_md(raw: bytes, where: str) -> str:
    """Decode SKILL.md bytes as UTF-8, keeping a BOM as ``\\ufeff`` so bytes round-trip."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            where, f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
