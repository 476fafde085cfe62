"""The project's files, as Claude Code's read-only tools answer the model (the API backend's
``--trigger-within=turn``).

A run that looks around first gets each read-only call answered from the folder the session
stands in, in the shape the pinned CLI sends back (observed on its follow-up requests):

- ``Read``: the file's lines as ``{n}\\t{line}`` joined by newlines (numbered from 1, a final
  newline giving a last empty line, a BOM dropped, ``\\r`` stripped), ``offset`` (1-based)
  and ``limit``; a file over 256 KB, a directory, a binary file or a missing one is an error
  result (``is_error``), an empty one a reminder; an image or a PDF its bytes as a block.
  Past about 25,000 tokens (four characters a token) the lines are cut as the CLI cuts them.
- ``Glob``: the matching paths relative to the folder, oldest first, at most 100.
- ``Grep``: ``Found N files`` and the paths (newest first), or ``path:n:line`` lines, or
  counts, as ``output_mode`` asks; at most 250 entries.
- A tool the request does not offer (Glob and Grep are not, by default; no LS exists) is an
  error result naming it, as the CLI answers a call to a tool it has not got.

Nothing is ever written and no command is run; a path outside the folder (a symlink leading
out included) is refused with an error result, as the CLI's default permissions refuse it.
The error texts are this plugin's own words, in the CLI's shapes.
"""

from __future__ import annotations

import base64
import fnmatch
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_READ_BYTES = 256 * 1024
READ_TOKEN_CAP = 25_000
GLOB_LIMIT = 100
GREP_LIMIT = 250
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
BINARY_EXTENSIONS = frozenset(
    (
        ".zip .tar .gz .bz2 .7z .rar .xz .tgz .iso .zst .whl .exe .dll .so .dylib .bin .o .a "
        ".obj .lib .msi .deb .rpm .dmg .apk .doc .docx .xls .xlsx .ppt .pptx .odt .ods .odp "
        ".epub .ttf .otf .woff .woff2 .eot .pyc .pyo .class .jar .wasm .sqlite .sqlite3 .db "
        ".parquet .npy .npz .pickle .psd .mp3 .mp4 .mov .avi .mkv .webm .wav .ogg .flac .dat "
        ".data .bmp .ico .tiff .tif .heic .avif"
    ).split()
)
EMPTY_FILE = "Warning: the file exists but is empty."
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv"})


@dataclass(frozen=True)
class ToolAnswer:
    """A tool_result's content and whether it is an error."""

    content: str | list[dict[str, Any]]
    is_error: bool = False

    def block(self, tool_use_id: str) -> dict[str, Any]:
        """The ``tool_result`` block, keys in the CLI's order."""
        block: dict[str, Any] = {"tool_use_id": tool_use_id, "type": "tool_result"}
        block["content"] = self.content
        if self.is_error:
            block["is_error"] = True
        return block


class ProjectFiles:
    """The folder a session stands in, answering read-only tool calls."""

    def __init__(
        self, root: str, offered: frozenset[str] = frozenset({"Read"}), *, read_suffix: str = ""
    ) -> None:
        self.root = os.path.realpath(root)
        self.offered = offered
        # what the user's CLI adds after a file's lines, when a capture recorded it (see
        # :mod:`~pytest_skilltrigger.backends.capture`); nothing of it is kept in this project
        self.read_suffix = read_suffix

    def answer(self, tool: str, tool_input: dict[str, Any]) -> ToolAnswer:
        """The answer to one read-only call."""
        if tool not in self.offered:
            return ToolAnswer(
                f"<tool_use_error>Error: no tool named {tool} here</tool_use_error>", True
            )
        handler = {"Read": self._read, "Glob": self._glob, "Grep": self._grep}.get(tool)
        if handler is None:
            return ToolAnswer(
                f"<tool_use_error>Error: {tool} is not a read-only tool</tool_use_error>", True
            )
        return handler(tool_input)

    # -- paths --------------------------------------------------------------------------------

    def _inside(self, given: str) -> str | None:
        """The real path of ``given`` (relative to the folder, or absolute) when it lies
        inside the folder; None when it leads out."""
        path = os.path.realpath(os.path.join(self.root, os.path.expanduser(given)))
        if path == self.root or path.startswith(self.root + os.sep):
            return path
        return None

    def _refused(self, given: str) -> ToolAnswer:
        full = os.path.abspath(os.path.join(self.root, given))
        return ToolAnswer(
            f"Reading {full} needs a permission this session has not been given.", True
        )

    def _relative(self, path: str) -> str:
        return os.path.relpath(path, self.root)

    # -- Read -----------------------------------------------------------------------------

    def _read(self, tool_input: dict[str, Any]) -> ToolAnswer:
        given = str(tool_input.get("file_path") or "")
        if not given:
            return ToolAnswer(_tool_error("InputValidationError: file_path is missing"), True)
        path = self._inside(given)
        if path is None:
            return self._refused(given)
        if not os.path.exists(path):
            return ToolAnswer(
                f"File does not exist: {given}. The working directory is {self.root}.", True
            )
        if os.path.isdir(path):
            return ToolAnswer(f"EISDIR: illegal operation on a directory, read '{path}'", True)
        answer = _read_file(path, tool_input)
        if self.read_suffix and isinstance(answer.content, str) and not answer.is_error:
            return ToolAnswer(answer.content + self.read_suffix)
        return answer

    # -- Glob -----------------------------------------------------------------------------

    def _glob(self, tool_input: dict[str, Any]) -> ToolAnswer:
        pattern = str(tool_input.get("pattern") or "")
        base = self._inside(str(tool_input.get("path") or "."))
        if base is None:
            return self._refused(str(tool_input.get("path")))
        if not os.path.isdir(base):
            return ToolAnswer(f"Directory does not exist: {tool_input.get('path')}", True)
        if os.path.isabs(pattern):
            pattern = self._relative(pattern) if self._inside(pattern) else pattern
        found = [p for p in self._files(base) if _glob_match(self._relative_to(p, base), pattern)]
        found.sort(key=lambda p: (os.path.getmtime(p), p))
        if not found:
            return ToolAnswer("No files found")
        shown = [self._relative(p) for p in found[:GLOB_LIMIT]]
        if len(found) > GLOB_LIMIT:
            shown.append(
                f"(Showing {GLOB_LIMIT} of {len(found)} matching files; "
                f"{len(found) - GLOB_LIMIT} more are not listed: narrow the pattern)"
            )
        return ToolAnswer("\n".join(shown))

    def _relative_to(self, path: str, base: str) -> str:
        return os.path.relpath(path, base).replace(os.sep, "/")

    def _files(self, base: str) -> Iterator[str]:
        """Every file below ``base`` (hidden ones included), not following links out."""
        for folder, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                path = os.path.join(folder, name)
                if self._inside(path) is not None:
                    yield path

    # -- Grep -----------------------------------------------------------------------------

    def _grep(self, tool_input: dict[str, Any]) -> ToolAnswer:
        flags = re.IGNORECASE if tool_input.get("-i") else 0
        try:
            regex = re.compile(str(tool_input.get("pattern") or ""), flags)
        except re.error as exc:
            return ToolAnswer(
                f"Search failed: the pattern is not a regular expression ({exc})", True
            )
        given = str(tool_input.get("path") or ".")
        base = self._inside(given)
        if base is None:
            return self._refused(given)
        if not os.path.exists(base):
            return ToolAnswer(f"Path does not exist: {given}", True)
        files = [base] if os.path.isfile(base) else list(self._files(base))
        wanted = str(tool_input.get("glob") or "")
        if wanted:
            files = [p for p in files if _glob_match(os.path.basename(p), wanted)]
        matches = {path: _matching_lines(path, regex) for path in files}
        matches = {path: lines for path, lines in matches.items() if lines}
        mode = str(tool_input.get("output_mode") or "files_with_matches")
        limit = int(tool_input.get("head_limit") or GREP_LIMIT)
        if mode == "content":
            return _grep_content(matches, self._relative, limit, single=os.path.isfile(base))
        if mode == "count":
            return _grep_count(matches, self._relative)
        return _grep_files(matches, self._relative, limit)


def _read_file(path: str, tool_input: dict[str, Any]) -> ToolAnswer:
    """A file's answer: its numbered lines, or its bytes for an image or a PDF."""
    extension = os.path.splitext(path)[1].lower()
    size = os.path.getsize(path)
    if extension in IMAGE_TYPES or extension == ".pdf":
        return _media(path, extension)
    if extension in BINARY_EXTENSIONS:
        return ToolAnswer(
            f"<tool_use_error>This tool cannot read binary files: {path} is a {extension} "
            "file.</tool_use_error>",
            True,
        )
    if size > MAX_READ_BYTES and not tool_input.get("allow_large"):
        return ToolAnswer(
            f"File content ({size / 1024:.1f}KB) is over the {MAX_READ_BYTES // 1024}KB a read "
            "may return: read a part with offset and limit.",
            True,
        )
    with open(path, "rb") as handle:
        raw = handle.read()
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    if not text:
        return ToolAnswer(
            "<system-reminder>Warning: the file exists but is empty.</system-reminder>"
        )
    return ToolAnswer(_numbered(text, tool_input))


def _numbered(text: str, tool_input: dict[str, Any]) -> str:
    """``{n}\\t{line}`` lines from ``offset`` (1-based; 0 numbers from 0), ``limit`` of them
    (0 or none: to the end), cut past the token cap."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    offset = _whole(tool_input.get("offset"), 1)
    limit = _whole(tool_input.get("limit"), 0)
    start = max(offset - 1, 0)
    chosen = lines[start : start + limit] if limit else lines[start:]
    first = offset if offset > 0 else 0
    tokens = sum(len(line) + 8 for line in chosen) // 4
    if tokens > READ_TOKEN_CAP and len(chosen) > 1:
        keep = max(int(len(chosen) * READ_TOKEN_CAP / tokens * 0.85), 1)
        chosen = chosen[:keep]
    return "\n".join(f"{first + n}\t{line}" for n, line in enumerate(chosen))


def _whole(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def _media(path: str, extension: str) -> ToolAnswer:
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    if extension == ".pdf":
        size = os.path.getsize(path)
        return ToolAnswer(
            [
                {"type": "text", "text": f"PDF file read: {path} ({size} bytes)"},
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": "application/pdf", "data": data},
                },
            ]
        )
    source = {"type": "base64", "data": data, "media_type": IMAGE_TYPES[extension]}
    return ToolAnswer([{"type": "image", "source": source}])


def _glob_match(relative: str, pattern: str) -> bool:
    """A glob as the CLI's matches it: a pattern without ``/`` at any depth, ``**`` any
    folders, ``{a,b}`` alternatives, case-sensitive."""
    for alternative in _braces(pattern):
        if "/" not in alternative:
            if fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], alternative):
                return True
        elif re.fullmatch(_glob_regex(alternative), relative):
            return True
    return False


def _braces(pattern: str) -> list[str]:
    found = re.search(r"\{([^{}]*)\}", pattern)
    if found is None:
        return [pattern]
    head, tail = pattern[: found.start()], pattern[found.end() :]
    return [x for part in found.group(1).split(",") for x in _braces(head + part + tail)]


def _glob_regex(pattern: str) -> str:
    out = ""
    parts = re.split(r"(\*\*/|\*\*|\*|\?)", pattern)
    for part in parts:
        out += {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
    return out


def _matching_lines(path: str, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_READ_BYTES * 4)
    except OSError:
        return []
    if b"\0" in raw[:8192]:
        return []
    text = raw.decode("utf-8", "replace")
    return [(n, line) for n, line in enumerate(text.split("\n"), 1) if regex.search(line)]


def _grep_files(matches: dict[str, list[tuple[int, str]]], shown: Any, limit: int) -> ToolAnswer:
    if not matches:
        return ToolAnswer("No files found")
    paths = sorted(matches, key=lambda p: (-os.path.getmtime(p), p))
    listed = paths[:limit] if limit else paths
    noun = "file" if len(listed) == 1 else "files"
    note = f" limit: {limit}" if limit and len(paths) > limit else ""
    return ToolAnswer(f"Found {len(listed)} {noun}{note}\n" + "\n".join(shown(p) for p in listed))


def _grep_content(
    matches: dict[str, list[tuple[int, str]]], shown: Any, limit: int, single: bool
) -> ToolAnswer:
    if not matches:
        return ToolAnswer("No matches found")
    lines = [
        f"{n}:{line}" if single else f"{shown(path)}:{n}:{line}"
        for path in sorted(matches, key=shown)
        for n, line in matches[path]
    ]
    cut = limit and len(lines) > limit
    text = "\n".join(lines[:limit] if limit else lines)
    return ToolAnswer(
        text + (f"\n\n[Showing results with pagination = limit: {limit}]" if cut else "")
    )


def _grep_count(matches: dict[str, list[tuple[int, str]]], shown: Any) -> ToolAnswer:
    if not matches:
        return ToolAnswer("No matches found\n\nFound 0 total occurrences across 0 files.")
    rows = [
        f"{shown(path)}:{len(lines)}"
        for path, lines in sorted(matches.items(), key=lambda kv: shown(kv[0]))
    ]
    total = sum(len(lines) for lines in matches.values())
    return ToolAnswer(
        "\n".join(rows) + f"\n\nFound {total} total occurrences across {len(matches)} files."
    )


def _tool_error(text: str) -> str:
    return f"<tool_use_error>{text}</tool_use_error>"
