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
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.skills.history import read_entry_history
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
_WRAPPED = "evals"
_EXCERPT = 60

_Named = tuple["EvalEntry", str]
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
    """

    path: str
    entries: tuple[EvalEntry, ...]
    meta: dict[str, Any] = field(default_factory=dict, hash=False)


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


def load_eval_set(path: str | os.PathLike[str]) -> EvalSet:
    """Read, parse and validate the eval set at ``path``.

    Errors name the file as the caller spelled it (usually relative, which reads better in a
    terminal); :attr:`EvalSet.path` is absolute so later stages never depend on the cwd.
    """
    where = os.fspath(path)
    data, duplicates = load_json(where, "a JSON eval set")
    entries, meta = _parse(data, where, duplicates)
    return EvalSet(path=os.path.abspath(where), entries=tuple(entries), meta=meta)


def load_json(where: str, expected: str) -> tuple[Any, dict[int, str]]:
    """An eval file's JSON, with the objects that hold a key twice (see :func:`_pairs_hook`,
    for :func:`check_duplicate_key`); one-line errors name the file (``expected`` says what
    an empty one should have held)."""
    text = read_text(where)
    if not text.strip():
        raise InputError(where, f"the file is empty; expected {expected}")
    duplicates: dict[int, str] = {}
    try:
        data = json.loads(text, object_pairs_hook=_pairs_hook(duplicates))
    except json.JSONDecodeError as exc:
        raise InputError(
            where, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise InputError(where, "not usable JSON: nested too deeply") from None
    return data, duplicates


def parse_eval_set(data: object, where: str) -> tuple[list[EvalEntry], dict[str, Any]]:
    """Detect the shape of already-parsed JSON ``data`` and return ``(entries, meta)``.

    ``where`` only names the source in error messages. Exposed separately so that callers
    holding JSON from elsewhere (a test, an API) get the same shapes and the same checks.
    """
    return _parse(data, where, {})


# --- reading -------------------------------------------------------------------------------


def read_text(where: str) -> str:
    """Read the file as UTF-8, dropping a BOM that Windows editors like to add.

    A UTF-16 file with a BOM (what PowerShell's ``>`` writes) is accepted too: it is
    unambiguous, and refusing it would only make the user re-save the same content.
    """
    try:
        with open(where, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise InputError(where, "no such file") from None
    except IsADirectoryError:
        raise InputError(where, "is a folder, not an eval set file") from None
    except OSError as exc:
        raise InputError(where, f"cannot read the file: {exc.strerror or exc}") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(
            where, f"not UTF-8 text (undecodable byte at offset {exc.start}); save it as UTF-8"
        ) from None


def _pairs_hook(duplicates: dict[int, str]) -> Any:
    """Build a JSON object hook that records objects holding the same key twice.

    ``json`` silently keeps the last value of a repeated key, which would quietly drop, say,
    the first of two ``should_trigger`` lists. The hook cannot know which entry it is in, so
    it only notes ``id(obj) -> key``; :func:`_parse` reports it with the entry's name (the ids
    stay valid because every parsed object is alive until parsing is done).
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj and id(obj) not in duplicates:
                duplicates[id(obj)] = key
            obj[key] = value
        return obj

    return hook


# --- shape detection -----------------------------------------------------------------------


def _parse(
    data: object, where: str, duplicates: dict[int, str]
) -> tuple[list[EvalEntry], dict[str, Any]]:
    """Dispatch on the shape of ``data``; see the module docstring for why it is strict."""
    if isinstance(data, list):
        named = _entries_from_objects(data, where, "", duplicates)
        meta: dict[str, Any] = {}
    elif isinstance(data, dict):
        check_duplicate_key(data, where, "the top-level object", duplicates)
        named, meta = _parse_object(data, where, duplicates)
    else:
        raise InputError(where, f"{_unknown_shape()}; found a JSON {_json_type(data)}")
    if not named:
        raise InputError(where, "the eval set has no entries")
    check_unique(named, where)
    return [entry for entry, _ in named], meta


def _parse_object(
    data: dict[str, Any], where: str, duplicates: dict[int, str]
) -> tuple[list[_Named], dict[str, Any]]:
    """Handle the object shapes: two string lists, the same nested once, or ``evals``."""
    if _WRAPPED in data and isinstance(data[_WRAPPED], list):
        if _POSITIVE in data or _NEGATIVE in data:
            raise InputError(
                where, f'has both "{_WRAPPED}" and "{_POSITIVE}"/"{_NEGATIVE}"; keep only one'
            )
        entries = _entries_from_objects(data[_WRAPPED], where, f' (in "{_WRAPPED}")', duplicates)
        return entries, {k: v for k, v in data.items() if k != _WRAPPED}

    if "query" in data:
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

    keys = ", ".join(f'"{k}"' for k in list(data)[:8]) or "none"
    raise InputError(where, f"{_unknown_shape()}; found an object with keys {keys}")


def _unknown_shape() -> str:
    return (
        'unknown eval set shape: expected a list of {"query", "should_trigger"} objects, '
        'an object with "evals" holding such a list, or an object with '
        '"should_trigger" and "should_not_trigger" lists of query strings'
    )


def entry_name(index: int, where: str = "") -> str:
    """How an error names an entry: by the number its item's id carries (``pdf[03-...]`` is
    ``entry [03]``), and where in the file it is when the file has several lists."""
    return f"entry [{index:02d}]{where}"


def _entries_from_objects(
    items: list[Any], where: str, label: str, duplicates: dict[int, str]
) -> list[_Named]:
    """Validate a list of ``{"query", "should_trigger", ...}`` objects, in file order."""
    entries: list[_Named] = []
    for position, item in enumerate(items):
        name = entry_name(position, label)
        if not isinstance(item, dict):
            raise InputError(
                where,
                f"{name}: must be an object with query and should_trigger, got {_describe(item)}",
            )
        check_duplicate_key(item, where, name, duplicates)
        query = check_query(item.get("query"), "query" in item, where, name)
        if _POSITIVE not in item:
            raise InputError(where, f"{name}: has no should_trigger (true or false)")
        verdict = item[_POSITIVE]
        if not isinstance(verdict, bool):
            raise InputError(
                where, f"{name}: should_trigger must be true or false, got {_excerpt(verdict)}"
            )
        history = read_entry_history(item, where, name)
        extra = {k: v for k, v in item.items() if k not in ("query", _POSITIVE, "history")}
        entries.append((EvalEntry(len(entries), query, verdict, extra, history), name))
    return entries


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
            entries.append((EvalEntry(len(entries), query, key == _POSITIVE, {}), name))
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
