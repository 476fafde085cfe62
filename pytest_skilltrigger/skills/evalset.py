"""Find and read trigger eval sets in every shape found in public skill repositories.

Skill authors already have eval sets written for the reference scripts and for other tools;
the plugin must read them as they are, without asking anyone to convert a file. So this
module accepts every shape in the survey (see ``eval-set-formats.md``) and turns each into
one flat, ordered tuple of :class:`EvalEntry`.

It is strict where leniency would silently change what gets measured: a ``should_trigger``
of ``"yes"`` or ``1``, an empty query, a query listed twice, or a key given twice in one
object are errors, because guessing would test something other than what the author meant.
Every error is a single-line :class:`~pytest_skilltrigger.support.errors.InputError` naming the file
and the entry, raised before anything is returned, so a caller never sees a partial set.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pytest_skilltrigger.skills.history import read_entry_history
from pytest_skilltrigger.skills.set_formats import load_data
from pytest_skilltrigger.support.errors import InputError

EVAL_SET_NAMES = (
    "trigger-eval.json",
    "trigger-evals.json",
    "trigger_eval.json",
    "trigger_evals.json",
    "eval_set.json",
)
"""File names of eval sets, most common first; the first one found wins."""

_POSITIVE = "should_trigger"
_NEGATIVE = "should_not_trigger"
_EXCERPT = 60
# what public sets call an entry's request, its list of entries, and the skill it is about
QUERY_KEYS = ("query", "prompt", "intent")
WRAPPERS = ("evals", "cases", "tests", "routes")
NAMING_KEYS = ("expected_skill", "expected", "expect", "skill", "skills", "target")
COMMAND_KEYS = ("expected_command",)
NO_SKILL = "none"  # what some sets write for "no skill" in place of null

_Named = tuple["SetEntry", str]
"""An entry with the name errors use for it (``entry 4``, ``should_not_trigger entry 2``)."""


@dataclass(frozen=True)
class EvalEntry:
    """One query of an eval set.

    ``index`` is the 0-based position in file order, so that reports and the train/test split
    can refer back to the file. ``extra`` holds every other key of the entry (``id``,
    ``reason``, earlier results such as ``got``/``pass``): useful in reports, never an input.
    """

    index: int
    query: str
    should_trigger: bool
    # Left out of the hash (a dict is unhashable) so entries can still key dicts and sets.
    extra: dict[str, Any] = field(default_factory=dict, hash=False)
    #: the conversation before the query (``history`` or ``history_file``), as canonical
    #: JSON text (:mod:`.history`); None: the query opens the session
    history: str | None = None


@dataclass(frozen=True)
class EvalSet:
    """A whole eval set: its absolute path (a ``str``), its entries and its top-level metadata.

    ``meta`` keeps the keys of object-shaped files other than the query lists (``skill_name``,
    ``purpose``, ...), so that a report can show what the author wrote about the set.
    ``model`` is the model the set says to run it on (``model: haiku``), ``min_accuracy`` the
    share of its queries it says must pass (its ``targets``), when it says so.
    """

    path: str
    entries: tuple[EvalEntry, ...]
    meta: dict[str, Any] = field(default_factory=dict, hash=False)
    model: str | None = None
    min_accuracy: float | None = None


@dataclass(frozen=True)
class SetEntry:
    """One entry as a set file gives it, before it is placed with a skill: whether the
    skill it is about should trigger (``expects``; None: the entry names which skill should,
    a routing entry), the skills it names (``names``: none for a routing entry whose answer
    is no skill, or an entry about the set's own skill), and for a routing entry naming
    commands, ``commands``."""

    index: int
    query: str
    expects: bool | None
    names: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, hash=False)
    history: str | None = None
    label: str = ""  # how errors and warnings name it (``entry [03]``)
    commands: bool = False


@dataclass(frozen=True)
class Document:
    """A set file as read: its path (as the caller gave it, for messages), its entries in
    file order, its other keys."""

    path: str
    entries: tuple[SetEntry, ...]
    meta: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class SkillNames:
    """The names a skill is called by in set files (its id, folder, frontmatter name,
    ``plugin:name``), and every skill name known beside it (for an entry naming another)."""

    own: frozenset[str]
    known: frozenset[str] = frozenset()


def find_eval_set(skill_folder: str | os.PathLike[str]) -> str | None:
    """Return the absolute path of the skill's eval set, or ``None`` if it has none.

    ``evals/`` is searched before the skill folder itself because that is where most
    repositories keep it; within a folder the names are tried in :data:`EVAL_SET_NAMES` order,
    so the result is the same on every machine whatever else lies around.
    """
    base = os.path.abspath(os.fspath(skill_folder))
    for folder in (os.path.join(base, "evals"), base):
        for name in EVAL_SET_NAMES:
            candidate = os.path.join(folder, name)
            if os.path.isfile(candidate):
                return candidate
    return None


def load_eval_set(path: str | os.PathLike[str], names: SkillNames | None = None) -> EvalSet:
    """Read, parse and validate the eval set at ``path``, as the set of the skill ``names``
    names (None: a file of plain ``should_trigger`` entries, where a skill's name is an
    error).

    Errors name the file as the caller spelled it (usually relative, which reads better in a
    terminal); :attr:`EvalSet.path` is absolute so later stages never depend on the cwd.
    """
    document = load_document(path)
    entries = for_skill(document, names)
    return EvalSet(os.path.abspath(document.path), tuple(entries), document.meta)


def load_document(path: str | os.PathLike[str]) -> Document:
    """A set file's entries as it gives them (see :class:`SetEntry`), in any format."""
    where = os.fspath(path)
    data, duplicates = load_data(where, "a JSON eval set")
    named, meta = _parse(data, where, duplicates)
    entries = tuple(replace(entry, label=name) for entry, name in named)
    return Document(where, entries, meta)


def parse_eval_set(data: object, where: str) -> tuple[list[EvalEntry], dict[str, Any]]:
    """Detect the shape of already-parsed JSON ``data`` and return ``(entries, meta)``.

    ``where`` only names the source in error messages. Exposed separately so that callers
    holding JSON from elsewhere (a test, an API) get the same shapes and the same checks.
    """
    named, meta = _parse(data, where, {})
    labelled = [replace(entry, label=name) for entry, name in named]
    return for_skill(Document(where, tuple(labelled), meta), None), meta


def for_skill(document: Document, names: SkillNames | None) -> list[EvalEntry]:
    """A set file's entries as one skill's (``names``), in file order, numbered anew: a
    plain entry as it is; one naming skills (a routing entry, or one that says which skill
    it is about) should trigger when it names this one. Entries about another skill are
    left out; a name that is no skill's is an error naming the file and the entry."""
    entries: list[tuple[EvalEntry, str]] = []
    for entry in document.entries:
        should = _should_trigger(entry, document.path, names)
        if should is None:
            continue
        made = EvalEntry(len(entries), entry.query, should, entry.extra, entry.history)
        entries.append((made, entry.label))
    if not entries:
        raise InputError(document.path, "the eval set has no entries for this skill")
    check_unique(entries, document.path)
    return [entry for entry, _ in entries]


def _should_trigger(entry: SetEntry, where: str, names: SkillNames | None) -> bool | None:
    """Whether the skill ``names`` names should trigger for ``entry`` (None: the entry is
    about another skill)."""
    if entry.expects is not None and (not entry.names or entry.commands):
        return entry.expects  # (a command it names is what the skill should do, not a skill)
    if names is None:
        if entry.expects is not None:
            return entry.expects  # it names its skill: the file is that skill's
        raise InputError(
            where,
            f"{entry.label}: should_trigger must be true or false, got "
            f"{_excerpt(entry.names[0] if entry.names else None)}",
        )
    unknown = [n for n in entry.names if n not in names.own | names.known]
    if unknown and not entry.commands:
        shown = ", ".join(sorted(names.own | names.known)) or "none"
        raise InputError(
            where,
            f"{entry.label}: names {_excerpt(unknown[0])}, which is no skill here (true, false, "
            f"null, or one of: {shown})",
        )
    mine = bool(set(entry.names) & names.own)
    if entry.expects is not None:
        return entry.expects if mine else None
    return mine


# --- shape detection -----------------------------------------------------------------------


def _parse(
    data: object, where: str, duplicates: dict[int, str]
) -> tuple[list[_Named], dict[str, Any]]:
    """Dispatch on the shape of ``data``; see the module docstring for why it is strict."""
    if isinstance(data, list):
        named = _entries_from_objects(data, where, "", duplicates)
        meta: dict[str, Any] = {}
    elif isinstance(data, dict):
        check_duplicate_key(data, where, "the top-level object", duplicates)
        named, meta = _parse_object(data, where, duplicates)
    else:
        raise InputError(where, f"{_unknown_shape()}; found a {_json_type(data)}")
    if not named:
        raise InputError(where, "the eval set has no entries")
    return named, meta


def _parse_object(
    data: dict[str, Any], where: str, duplicates: dict[int, str]
) -> tuple[list[_Named], dict[str, Any]]:
    """Handle the object shapes: entries under a wrapper (``evals``, ``cases``, ``tests``,
    ``routes``), two string lists, or the same nested once."""
    wrapper = next((k for k in WRAPPERS if isinstance(data.get(k), list)), None)
    if wrapper is not None:
        if _POSITIVE in data or _NEGATIVE in data:
            raise InputError(
                where, f'has both "{wrapper}" and "{_POSITIVE}"/"{_NEGATIVE}"; keep only one'
            )
        entries = _entries_from_objects(data[wrapper], where, f' (in "{wrapper}")', duplicates)
        return entries, {k: v for k, v in data.items() if k != wrapper}

    if any(k in data for k in QUERY_KEYS):
        raise InputError(
            where, "holds a single entry; an eval set is a JSON list of entries, wrap it in [ ]"
        )
    if _POSITIVE in data or _NEGATIVE in data:
        entries = _entries_from_lists(data, where, "")
        return entries, {k: v for k, v in data.items() if k not in (_POSITIVE, _NEGATIVE)}

    nested = [
        k for k, v in data.items() if isinstance(v, dict) and (_POSITIVE in v or _NEGATIVE in v)
    ]
    if len(nested) > 1:
        names = ", ".join(f'"{k}"' for k in nested)
        raise InputError(where, f"several keys hold should_trigger lists ({names}); keep only one")
    if nested:
        key = nested[0]
        inner = data[key]
        check_duplicate_key(inner, where, f'the object under "{key}"', duplicates)
        entries = _entries_from_lists(inner, where, f"{key}.")
        meta = {k: v for k, v in data.items() if k != key}
        for k, v in inner.items():
            if k not in (_POSITIVE, _NEGATIVE):
                meta.setdefault(k, v)
        return entries, meta

    keys = ", ".join(f'"{k}"' for k in list(data)[:8])
    found = f"an object with keys {keys}" if keys else "an empty object"
    raise InputError(where, f"{_unknown_shape()}; found {found}")


def _unknown_shape() -> str:
    return (
        'unknown eval set shape: expected a list of {"query", "should_trigger"} objects, '
        'an object with "evals", "cases" or "tests" holding such a list, or an object with '
        '"should_trigger" and "should_not_trigger" lists of query strings'
    )


def entry_name(index: int, where: str = "") -> str:
    """How an error names an entry: by the number its item's id carries (``pdf[03-...]`` is
    ``entry [03]``), and where in the file it is when the file has several lists."""
    return f"entry [{index:02d}]{where}"


def _entries_from_objects(
    items: list[Any], where: str, label: str, duplicates: dict[int, str]
) -> list[_Named]:
    """Validate a list of entry objects, in file order."""
    entries: list[_Named] = []
    for position, item in enumerate(items):
        name = entry_name(position, label)
        if not isinstance(item, dict):
            raise InputError(
                where,
                f"{name}: must be an object with query and should_trigger, got {_describe(item)}",
            )
        check_duplicate_key(item, where, name, duplicates)
        entries.append((_entry(item, len(entries), where, name), name))
    return entries


def _entry(item: dict[str, Any], index: int, where: str, name: str) -> SetEntry:
    """One entry object: its query (``query``, ``prompt`` or ``intent``), what it expects
    (``should_trigger`` true or false, or the skill that should trigger: a name, a list of
    names, null or ``"none"``; or ``expected_skill``, ``expected``), the skills it names."""
    key = next((k for k in QUERY_KEYS if k in item), "query")
    query = check_query(item.get(key), key in item, where, name)
    about = next((k for k in (*NAMING_KEYS, *COMMAND_KEYS) if k in item), None)
    used = {key, _POSITIVE, "history", "history_file"}
    if _POSITIVE in item:
        expects, named = _expectation(item[_POSITIVE], where, name)
    elif about is None:
        raise InputError(
            where,
            f"{name}: has no should_trigger (true or false) or expected_skill (the skill to "
            "choose, or null)",
        )
    else:
        expects, named = None, ()
    if about is not None and (expects is not None or _POSITIVE not in item):
        named = _names(item[about], where, f"{name}: {about}")
        used.add(about)
    history = read_entry_history(item, where, name)
    extra = {k: v for k, v in item.items() if k not in used}
    commands = about in (*COMMAND_KEYS, "target")
    return SetEntry(index, query, expects, named, extra, history, name, commands)


def _expectation(value: Any, where: str, name: str) -> tuple[bool | None, tuple[str, ...]]:
    """``should_trigger``'s value: a boolean, or the skill that should trigger (routing)."""
    if isinstance(value, bool):
        return value, ()
    if value is None or isinstance(value, (str, list)):
        return None, _names(value, where, f"{name}: should_trigger")
    raise InputError(
        where,
        f"{name}: should_trigger must be true or false (or a skill), got {_excerpt(value)}",
    )


def _names(value: Any, where: str, label: str) -> tuple[str, ...]:
    """The skills a value names: a name, a list of names, or none (null, ``"none"``)."""
    if value is None or (isinstance(value, str) and value.strip().lower() == NO_SKILL):
        return ()
    if isinstance(value, str) and value.strip():
        return (value.strip(),)
    if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
        return tuple(v.strip() for v in value if v.strip().lower() != NO_SKILL)
    raise InputError(where, f"{label} must name a skill (or be null), got {_excerpt(value)}")


def _entries_from_lists(data: dict[str, Any], where: str, prefix: str) -> list[_Named]:
    """Flatten the two lists of query strings, in the order their keys appear in the file.

    Both lists are required: a misspelt ``should_not_triger`` would otherwise pass unnoticed
    as metadata and the set would silently test positives only.
    """
    for key in (_POSITIVE, _NEGATIVE):
        if key not in data:
            present = _POSITIVE if key == _NEGATIVE else _NEGATIVE
            raise InputError(
                where, f'has "{prefix}{present}" but no "{prefix}{key}" list (use [] if none)'
            )
        if not isinstance(data[key], list):
            raise InputError(
                where,
                f'"{prefix}{key}" must be a list of query strings, got {_json_type(data[key])}',
            )
    entries: list[_Named] = []
    for key in (k for k in data if k in (_POSITIVE, _NEGATIVE)):
        for position, item in enumerate(data[key]):
            name = entry_name(len(entries), f" ({prefix}{key} #{position + 1})")
            if not isinstance(item, str):
                raise InputError(
                    where,
                    f"{name}: must be a query string, got {_describe(item)}",
                )
            query = check_query(item, True, where, name)
            entries.append((SetEntry(len(entries), query, key == _POSITIVE), name))
    return entries


# --- checks --------------------------------------------------------------------------------


def check_query(value: Any, present: bool, where: str, name: str) -> str:
    """Return the query unchanged (never stripped or normalised) once it is a real string."""
    if not present:
        raise InputError(where, f"{name}: has no query")
    if not isinstance(value, str):
        raise InputError(where, f"{name}: query must be a string, got {_describe(value)}")
    if not value.strip():
        raise InputError(where, f"{name}: query is empty")
    if not is_valid_unicode(value):  # a lone surrogate (e.g. "\ud800") cannot be sent or stored
        raise InputError(where, f"{name}: query is not valid Unicode (lone surrogate)")
    return value


def is_valid_unicode(text: str) -> bool:
    """False for text holding lone surrogates (bad JSON escapes, undecodable argv bytes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_duplicate_key(obj: Any, where: str, name: str, duplicates: dict[int, str]) -> None:
    key = duplicates.get(id(obj))
    if key is not None:
        raise InputError(where, f'{name}: key "{key}" appears twice; JSON would keep only the last')


def check_unique(named: Sequence[tuple[Any, str]], where: str) -> None:
    """Reject a query listed twice: it would be counted twice, or contradict itself.

    Queries differing only in surrounding whitespace are the same request to the model; the
    same query after different histories is not.
    """
    seen: dict[tuple[str, str | None], str] = {}
    for entry, name in named:
        key = (entry.query.strip(), getattr(entry, "history", None))
        if key in seen:
            raise InputError(
                where, f"{name} repeats the query of {seen[key]}: {_excerpt(entry.query)}"
            )
        seen[key] = name


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _describe(value: Any) -> str:
    """Name a wrong value's JSON type and show it, e.g. ``number 12`` or ``null``."""
    if value is None or isinstance(value, bool):
        return _excerpt(value)
    return f"{_json_type(value)} {_excerpt(value)}"


def _excerpt(value: Any) -> str:
    """Render a value as short one-line JSON for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _EXCERPT:
        text = text[: _EXCERPT - 1] + "…"
    return text
