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
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.model.formatting import display_path
from pytest_skilltrigger.reports.json_report import dumps
from pytest_skilltrigger.reports.stopped import StoppedRun
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.plugin_eval.write import (
    CaseSkill,
    check_plugin_eval,
    write_plugin_eval,
)
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
    pr_comment_path: str | None = None
    #: pytest's ``--junit-xml`` (written here only for a session stopped at its start,
    #: whose end pytest's own writer never reaches)
    junit_path: str | None = None

    def check(self, rewritten: Sequence[Target] = ()) -> None:
        """Raise :class:`InputError` for the first path that cannot be written; ``rewritten``
        are the skills whose SKILL.md the improvement rounds may rewrite (through a temporary
        file beside it)."""
        files = [
            ("--trigger-json", self.json_path),
            ("--trigger-pr-comment", self.pr_comment_path),
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
            write_json(self.json_path, data)

    def write_pr_comment(self, markdown: str) -> None:
        if self.pr_comment_path:
            atomic_write_text(self.pr_comment_path, markdown)

    def write_stopped(self, stopped: StoppedRun, comment: str) -> None:
        """A session stopped at its start: the JSON with the reason, the JUnit XML of one
        error case, the step summary and the PR comment saying it."""
        self.write_json(stopped.to_json())
        if self.junit_path:
            atomic_write_text(self.junit_path, stopped.junit_xml())
        self.append_step_summary(stopped.markdown())
        self.write_pr_comment(comment)

    def write_page(self, page: str) -> None:
        if self.report_path:
            atomic_write_text(self.report_path, page)

    def write_results_folder(self, page: str, data: dict[str, Any]) -> None:
        """With ``--trigger-results-dir``, a new time-stamped folder holding the page and
        the JSON."""
        if not self.results_dir:
            return
        folder = stamped_folder(self.results_dir)
        atomic_write_text(os.path.join(folder, "report.html"), page)
        write_json(os.path.join(folder, "results.json"), data)

    def append_step_summary(self, markdown: str) -> None:
        """Append to GitHub's job summary (its folder is made if missing)."""
        if not self.step_summary:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.step_summary)), exist_ok=True)
        with open(self.step_summary, "a", encoding="utf-8") as handle:
            handle.write(markdown)


def write_json(path: str, report: dict[str, Any]) -> None:
    """Write a JSON report atomically, as people read it (see ``json_report.dumps``)."""
    atomic_write_text(path, dumps(report) + "\n")


def stamped_folder(results_dir: str) -> str:
    """A new time-stamped folder inside ``results_dir`` (two runs in the same second get
    their own: ``20261202-101500``, ``20261202-101500-1``)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    os.makedirs(results_dir, exist_ok=True)
    for n in range(1000):
        candidate = os.path.join(results_dir, stamp + (f"-{n}" if n else ""))
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{results_dir}: no free folder name for {stamp}")


def export_plugin_eval(targets: Sequence[Target], folder: str) -> str:
    """``--trigger-export-plugin-eval``: every target's eval set as ``claude plugin eval`` cases in
    ``folder``, each skill's checked before the first file is written; what was written, in
    a line."""

    check_plugin_eval(folder, [(target.name, target.eval_set) for target in targets])
    written = [
        path
        for target in targets
        for path in write_plugin_eval(
            folder, target.name, target.eval_set, skill=_case_skill(target)
        )
    ]
    names = ", ".join(t.name for t in targets)
    return (
        f"skilltrigger: wrote {len(written)} claude plugin eval cases for {names} into "
        f"{display_path(folder)}; no call was made"
    )


def _case_skill(target: Target) -> CaseSkill:
    """What the cases need of the skill: the other names the CLI loads it by in its listing
    (its frontmatter name, a plugin skill's bare name), on which a case passes as an item
    does, and its plugin's root (its cases end at the skill's call)."""
    context = target.context()
    skill = target.skill
    candidates = [skill.alias, skill.name, skill.folder]
    aliases = tuple(
        name
        for name in dict.fromkeys(c for c in candidates if c)
        if name != target.name and context.resolve(name) == target.name
    )
    return CaseSkill(aliases, skill.plugin.root if skill.plugin is not None else None)
