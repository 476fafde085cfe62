"""The files a session writes, checked before any call and written at its end.

Every path the run may write (``--trigger-json``, ``--trigger-report``,
``--trigger-results-dir``, the store, ``GITHUB_STEP_SUMMARY`` and, with improvement rounds,
each SKILL.md) is checked at configure time without creating anything: a path that cannot be
written is a one-line input error before any call, not a traceback after all of them. Only
the controller writes; every write is atomic but the step summary's, which is appended to as
GitHub expects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.reports.json_report import write_report
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.support.atomic import atomic_write_text, write_problem
from pytest_skilltrigger.support.errors import InputError


@dataclass(frozen=True)
class Outputs:
    """Where a session's results go (None: not written)."""

    json_path: str | None = None
    report_path: str | None = None
    results_dir: str | None = None
    step_summary: str | None = None
    store_path: str | None = None

    def check(self, rewritten: Sequence[Target] = ()) -> None:
        """Raise :class:`InputError` for the first path that cannot be written; ``rewritten``
        are the skills whose SKILL.md the improvement rounds may rewrite (through a temporary
        file beside it)."""
        files = [
            ("--trigger-json", self.json_path),
            ("--trigger-store", self.store_path),
            ("GITHUB_STEP_SUMMARY", self.step_summary),
            ("--trigger-report", self.report_path),
            *(("SKILL.md", t.skill.skill_md) for t in rewritten),
        ]
        folders = [
            ("--trigger-results-dir", self.results_dir),
            *(("SKILL.md", t.skill.path) for t in rewritten),
        ]
        for label, path in files:
            problem = path and write_problem(path)
            if problem:
                raise InputError(path, f"{problem} ({label})")
        for label, path in folders:
            problem = path and write_problem(path, folder=True)
            if problem:
                raise InputError(path, f"{problem} ({label})")

    def write_json(self, data: dict[str, Any]) -> None:
        if self.json_path:
            write_report(self.json_path, data)

    def write_page(self, page: str) -> None:
        if self.report_path:
            atomic_write_text(self.report_path, page)

    def append_step_summary(self, markdown: str) -> None:
        """Append to GitHub's job summary (its folder is made if missing)."""
        if not self.step_summary:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.step_summary)), exist_ok=True)
        with open(self.step_summary, "a", encoding="utf-8") as handle:
            handle.write(markdown)
