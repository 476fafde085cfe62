"""The tutorial works as written: every ``pytest`` command of ``docs/tutorial.md``, in its
order, in a project laid out as the tutorial says (``skills/pdf`` with a SKILL.md and no eval
set), against the local Messages API. Each collects the skill's items, and the CI gate and the
baseline command gate as the tutorial says they do.

The commands are read from the page itself, so a page that drifts from what works fails here.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "tutorial.md"
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
SKILL_MD = """---
name: pdf
description: >-
  Merge, split, rotate and extract pages from PDF documents, and fill PDF forms.
  Use when the user works with .pdf files.
---

# PDF tools

Use pypdf to merge and split documents.
"""


def tutorial_commands() -> list[list[str]]:
    """The ``pytest ...`` lines of the page's code blocks, in order, as arguments."""
    commands = []
    for block in FENCE.findall(TUTORIAL.read_text(encoding="utf-8")):
        for line in block.splitlines():
            if line.startswith("pytest "):
                commands.append(shlex.split(line)[1:])
    return commands


@pytest.fixture(autouse=True)
def _not_inside_an_outer_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def test_the_tutorials_commands_collect_and_gate_as_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    commands = tutorial_commands()
    assert len(commands) >= 5, commands
    skill = pytester.path / "skills" / "pdf"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD, encoding="utf-8")
    for args in commands:
        if "--trigger-baseline=main-results.json" in args:
            # the tutorial keeps the main branch's JSON: here, the gate run's
            shutil.copy(pytester.path / "trigger-results.json", pytester.path / "main-results.json")
        result = pytester.runpytest_subprocess(*args, timeout=600)
        output = result.stdout.str()
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (args, output)
        assert re.search(r"collected [1-9]\d* items", output), (args, output)
        if "--trigger-draft" in args:
            drafted = json.loads((skill / "evals" / "trigger-eval.json").read_text())
            assert len(drafted) >= 16
        if "--trigger-min-accuracy=0.9" in args:
            assert "failed" not in result.parseoutcomes()  # misses are xfails: the gate decides
            assert json.loads((pytester.path / "trigger-results.json").read_text())["skills"]
        if "--trigger-baseline=main-results.json" in args:
            result.stdout.fnmatch_lines(["baseline main-results.json: * compared, *"])
        if "--trigger-optimize" in args:
            assert "<html" in (pytester.path / "report.html").read_text()
