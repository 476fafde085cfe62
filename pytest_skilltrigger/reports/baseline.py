"""Comparing a run with an earlier ``--trigger-json``: what regressed, what improved.

Queries are matched by skill name and query text, so reordering the eval file does not
matter. A query that passed before and now fails or errors is a regression; one that failed
before and now passes is an improvement. Queries new to the eval set are neither.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.support.errors import InputError


@dataclass(frozen=True)
class Change:
    skill: str
    query: str
    before: str
    after: str


def _verdicts(report: dict[str, Any]) -> dict[tuple[str, str], str]:
    out = {}
    for skill in report.get("skills", []):
        for row in skill.get("results", []):
            verdict = {True: "pass", False: "fail"}.get(row.get("pass"), "error")
            if row.get("skipped"):
                verdict = "skipped"
            out[(skill.get("skill_name", ""), row.get("query", ""))] = verdict
    return out


def load_baseline(path: str) -> dict[str, Any]:
    """Read an earlier JSON report; InputError when it is not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read baseline: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(path, f"baseline is not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        raise InputError(path, "baseline is not a --trigger-json report (no 'skills' list)")
    return data


def compare(baseline: dict[str, Any], current: dict[str, Any]) -> tuple[list[Change], list[Change]]:
    """(regressions, improvements) of ``current`` against ``baseline``."""
    before = _verdicts(baseline)
    regressed, improved = [], []
    for key, after in _verdicts(current).items():
        old = before.get(key)
        if old is None or after == "skipped" or old == "skipped":
            continue
        if old == "pass" and after != "pass":
            regressed.append(Change(key[0], key[1], old, after))
        elif old != "pass" and after == "pass":
            improved.append(Change(key[0], key[1], old, after))
    return regressed, improved
