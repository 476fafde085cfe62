"""A SKILL.md or a command file, read as the pinned Claude Code CLI reads it.

Why not plain YAML: the listing line the model sees is what the CLI makes of the file, and the
CLI is lenient in its own way. Observed with 2.1.328 on over a hundred files (the table is in
``docs/explanation/context.md``):

- the frontmatter is the text between a first line of ``---`` and the next ``---`` anywhere,
  even inside a line or a quoted value;
- it is parsed as YAML 1.2 (``yes`` and dates are text; a repeated key keeps its last value);
  when that fails, it is parsed once more after a rewrite that double-quotes each
  ``key: value`` line whose value holds ``": "`` or a YAML indicator, and turns leading tabs
  into spaces; when that fails too, the frontmatter counts as empty (the skill is still
  listed);
- a value is turned into text as JavaScript's ``String()`` does; the description is trimmed,
  ``when_to_use`` is not; a missing description is the body's first line.

Nothing here decides what a skill *is* (:mod:`.skill` does); this module only says what the
CLI reads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from pytest_skilltrigger.skills.frontmatter import BOM, yaml_problem

# the CLI's fence: ``---`` at the very start, then up to the next ``---`` wherever it is
_FENCE = re.compile(r"---\s*\n(.*?)---\s*\n?", re.S)
# a line the rescue may quote: a plain key (letters, ``_``, ``-``), then its value; JavaScript's
# ``.`` matches no line end, so a line that ends in ``\r`` (a CRLF file) never matches
_RESCUE_LINE = re.compile(r"([A-Za-z_-]+):\s+(\S[^\r\n\u2028\u2029]*)")
_RESCUE_TRIGGERS = re.compile(r"[{}\[\]*&#!|>%@`]|: ")
_LEADING_TABS = re.compile(r"^\t+", re.M)
# a tab between a key's colon and its value: YAML 1.2 takes it as a separator, PyYAML not
_TAB_AFTER_KEY = re.compile(r"^( *[A-Za-z0-9_.-]+:)\t[ \t]*", re.M)
_HEADING = re.compile(r"^#+\s+")
# what JavaScript's ``trim()`` removes (Python's ``strip()`` removes more: NEL, \x1c-\x1f)
JS_SPACE = (
    " \t\n\x0b\x0c\r\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
BODY_LINE_LIMIT = 100  # a body line used as the text is cut to 97 characters and "..."

How = Literal["yaml", "rescued", "ignored", "none"]


@dataclass(frozen=True)
class CliFrontmatter:
    """What the CLI reads of a file: its frontmatter mapping, its body, and how it got them
    (``yaml``: valid as written; ``rescued``: valid after the CLI's rewrite; ``ignored``:
    not readable, so empty; ``none``: no frontmatter fence). ``problem`` is the YAML error
    of the text as written, when it has one."""

    mapping: dict[str, Any]
    body: str
    how: How
    problem: str | None = None
    raw: str = ""  # the frontmatter's text, as the fence cut it

    def quoted_lines(self) -> list[str]:
        """The lines the CLI's rewrite quoted (``rescued``): what the file should say."""
        if self.how != "rescued":
            return []
        before = self.raw.split("\n")
        after = rescued(self.raw).split("\n")
        return [new for old, new in zip(before, after, strict=True) if old != new and '"' in new]

    @property
    def description(self) -> str | None:
        """The description as the CLI reads it: text, trimmed; None when it has none (a
        missing, empty, null, list or mapping value)."""
        value = self.mapping.get("description")
        if isinstance(value, (dict, list)) or value is None:
            return None
        return js_string(value).strip(JS_SPACE) or None

    @property
    def when_to_use(self) -> str | None:
        """``when_to_use`` as the CLI appends it: its text untrimmed (a list joined with
        commas, a mapping ``[object Object]``); None when missing or empty."""
        value = self.mapping.get("when_to_use")
        if value is None:
            return None
        return js_string(value) or None

    @property
    def body_line(self) -> str | None:
        """The body's first non-empty line, as the CLI shows it in place of a missing
        description (a heading's ``#`` marks dropped, a long line cut); None for no text."""
        for line in self.body.split("\n"):  # the CLI's lines: a lone CR ends none
            text = line.strip(JS_SPACE)
            if not text:
                continue
            text = _HEADING.sub("", text)
            if len(text) > BODY_LINE_LIMIT:
                text = text[: BODY_LINE_LIMIT - 3] + "..."
            return text
        return None


# the values of ``disable-model-invocation`` that keep a skill or command out of the listing
_TRUE = frozenset({"true", "yes", "1"})


def disables_model(mapping: dict[str, Any]) -> bool:
    """Whether ``disable-model-invocation`` keeps the item out of the listing (true, yes or 1
    in any case, quoted or not; the spelling with underscores does nothing)."""
    return js_string(mapping.get("disable-model-invocation")).lower() in _TRUE


def read_as_cli(text: str) -> CliFrontmatter:
    """Read a decoded SKILL.md (or command file) as the pinned CLI reads it."""
    text = text.removeprefix(BOM)
    fence = _FENCE.match(text)
    if fence is None:
        return CliFrontmatter({}, text, "none")
    raw, body = fence.group(1), text[fence.end() :]
    try:
        return CliFrontmatter(_mapping(_load(raw)), body, "yaml", raw=raw)
    except _NotAMapping:
        return CliFrontmatter({}, body, "ignored", "it is not a mapping of keys", raw)
    except Exception as exc:  # any YAML failure: the CLI tries its rewrite
        problem = yaml_problem(exc, 1)
    try:
        return CliFrontmatter(_mapping(_load(rescued(raw))), body, "rescued", problem, raw)
    except Exception:  # the rewrite fails too: the frontmatter is empty
        return CliFrontmatter({}, body, "ignored", problem, raw)


def rescued(raw: str) -> str:
    """The CLI's second try at a frontmatter YAML refused: each ``key: value`` line whose
    value holds ``": "`` or a YAML indicator gets the value double-quoted (unless it is
    quoted already, or a flow list), then leading tabs become two spaces each."""
    lines = []
    for line in raw.split("\n"):
        match = _RESCUE_LINE.fullmatch(line)
        if match is not None and _needs_quotes(match.group(2)):
            key, value = match.groups()
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            line = f'{key}: "{escaped}"'
        lines.append(line)
    return _LEADING_TABS.sub(lambda m: "  " * len(m.group(0)), "\n".join(lines))


def _needs_quotes(value: str) -> bool:
    stripped = value.rstrip()
    quoted = len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "\"'"
    if quoted:
        return False
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            if isinstance(_load(stripped), list):
                return False
        except Exception:  # not a valid flow list: quoted like any other value
            pass
    return bool(_RESCUE_TRIGGERS.search(value))


class _NotAMapping(Exception):
    pass


def _mapping(loaded: Any) -> dict[str, Any]:
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise _NotAMapping
    return {str(k): v for k, v in loaded.items()}


def js_string(value: Any) -> str:
    """``value`` as JavaScript's ``String()`` writes it (the CLI's reading of a YAML value
    where text is wanted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _js_number(value)
    if isinstance(value, list):
        return ",".join("" if v is None else js_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return repr(value)


class _Yaml12Loader(yaml.SafeLoader):
    """PyYAML read as YAML 1.2's core schema reads: only ``true``/``false`` are booleans,
    no dates, no sexagesimal or underscored numbers (``yes``, ``2024-01-01`` stay text)."""


_Yaml12Loader.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
):
    _Yaml12Loader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first)
    )


def _int_12(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = str(loader.construct_scalar(node))  # type: ignore[arg-type]
    if text.startswith("0o"):
        return int(text[2:], 8)
    return int(text, 0) if text.startswith("0x") else int(text, 10)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _int_12)


def _load(text: str) -> Any:
    text = _TAB_AFTER_KEY.sub(r"\1 ", text)
    return yaml.load(text, Loader=_Yaml12Loader)  # a SafeLoader: no object is built
