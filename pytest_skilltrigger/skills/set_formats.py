"""The file formats eval sets are kept in, read into the data their shapes are read from:
JSON (most sets), YAML (``skill-tests.yaml`` beside a skill), CSV (``eval.csv``,
``prompts.csv``: a header row naming the columns) and JSON Lines (one entry a line, with
``//`` or ``#`` comment lines between them).

Every problem is a one-line :class:`~pytest_skilltrigger.support.errors.InputError` naming
the file (and the line where the format has lines), before anything is returned.
"""

from __future__ import annotations

import csv
import io
import json
import os
from typing import Any

import yaml

from pytest_skilltrigger.skills.frontmatter import yaml_problem
from pytest_skilltrigger.support.errors import InputError

YAML_SUFFIXES = (".yaml", ".yml")
CSV_SUFFIX = ".csv"
JSONL_SUFFIX = ".jsonl"
# the values a CSV cell may give ``should_trigger`` (a spreadsheet writes TRUE, a script true)
_CSV_BOOLEANS = {"true": True, "false": False}
# CSV columns that hold the query and the expectation, by the names public sets give them
_CSV_QUERY = ("query", "prompt", "question", "input")
_CSV_EXPECTED = ("should_trigger", "trigger", "expected")


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
    it only notes ``id(obj) -> key``; the shape reader reports it with the entry's name (the
    ids stay valid because every parsed object is alive until parsing is done).
    """

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj: dict[str, Any] = {}
        for key, value in pairs:
            if key in obj and id(obj) not in duplicates:
                duplicates[id(obj)] = key
            obj[key] = value
        return obj

    return hook


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


def load_data(where: str, expected: str) -> tuple[Any, dict[int, str]]:
    """A set file's data, by its format (its name's suffix), with the objects that hold a
    key twice (JSON only, see :func:`load_json`)."""
    lower = where.lower()
    if lower.endswith(YAML_SUFFIXES):
        return _load_yaml(where, expected), {}
    if lower.endswith(CSV_SUFFIX):
        return _load_csv(where), {}
    if lower.endswith(JSONL_SUFFIX):
        return _load_jsonl(where, expected), {}
    return load_json(where, expected)


def _load_yaml(where: str, expected: str) -> Any:
    text = read_text(where)
    if not text.strip():
        raise InputError(where, f"the file is empty; expected {expected}")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(where, f"not valid YAML: {yaml_problem(exc)}") from None
    except (ValueError, RecursionError) as exc:  # a bad date, deep nesting
        raise InputError(where, f"not usable YAML: {exc}") from None


def _load_jsonl(where: str, expected: str) -> list[Any]:
    """One JSON value a line; blank lines and comment lines (``//``, ``#``) skipped."""
    rows = []
    for number, line in enumerate(read_text(where).splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("//", "#")):
            continue
        try:
            rows.append(json.loads(stripped))
        except json.JSONDecodeError as exc:
            raise InputError(where, f"line {number}: not valid JSON: {exc.msg}") from None
    if not rows:
        raise InputError(where, f"the file holds no entry; expected {expected}")
    return rows


def _load_csv(where: str) -> list[dict[str, Any]]:
    """The rows of a CSV set as entry objects: its query column as ``query``, its
    expectation as ``should_trigger`` (``true`` or ``false`` in any case; any other text is
    a skill's name, or ``none``), its other columns kept."""
    text = read_text(where)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    query = next((c for c in _CSV_QUERY if c in columns), None)
    expected = next((c for c in _CSV_EXPECTED if c in columns), None)
    if query is None or expected is None:
        shown = ", ".join(columns) or "none"
        raise InputError(
            where,
            f"a CSV eval set needs a header with a query column ({' or '.join(_CSV_QUERY)}) and "
            f"a should_trigger column; its columns are: {shown}",
        )
    rows = []
    for row in reader:
        number = reader.line_num
        cells = {(k or "").strip().lower(): v for k, v in row.items()}
        if None in row.values() or "" in cells:
            raise InputError(where, f"line {number}: the row does not have the header's columns")
        entry: dict[str, Any] = {k: v for k, v in cells.items() if k not in (query, expected)}
        entry["query"] = cells[query]
        entry["should_trigger"] = _csv_expected(cells[expected], where, number)
        rows.append(entry)
    return rows


def _csv_expected(value: str, where: str, number: int) -> bool | str | None:
    """A CSV cell's expectation: a boolean, ``none`` (no skill), or a skill's name."""
    cell = (value or "").strip()
    if cell.lower() in _CSV_BOOLEANS:
        return _CSV_BOOLEANS[cell.lower()]
    if not cell:
        raise InputError(where, f"line {number}: should_trigger is empty (true or false)")
    return None if cell.lower() == "none" else cell


def set_format(path: str) -> str:
    """The format a set file is read as: ``json``, ``yaml``, ``csv`` or ``jsonl``."""
    suffix = os.path.splitext(path.lower())[1]
    return {".yaml": "yaml", ".yml": "yaml", ".csv": "csv", ".jsonl": "jsonl"}.get(suffix, "json")
