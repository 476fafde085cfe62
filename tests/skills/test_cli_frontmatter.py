"""A SKILL.md is read as the pinned Claude Code CLI reads it: the builtin listing line of
every file of the experiment equals the line the CLI sent for it.

``data/cli_frontmatter.json`` holds 130 files (broken frontmatters: unquoted colons, tabs, bad
indentation, repeated keys, unclosed quotes, a BOM, CRLF, ``---`` inside a value, no closing
fence; odd values: numbers, lists, empty or missing descriptions; the keys that change the
listing) with the line Claude Code 2.1.328 listed each as, or none. The slow test lists them
again with the pinned CLI, so the table cannot drift from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.skills.neighbours import listed_skill
from pytest_skilltrigger.skills.skill import read_skill
from pytest_skilltrigger.support.errors import InputError
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_request, listing_lines
from tests.fake_messages_api import FakeMessagesAPI

DATA = json.loads((Path(__file__).parent / "data" / "cli_frontmatter.json").read_text("utf-8"))
ROWS: list[dict[str, Any]] = DATA["rows"]


def write(root: Path, row: dict[str, Any]) -> Path:
    folder = root / ".claude" / "skills" / row["folder"]
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(row["text"].encode("utf-8"))
    return folder


@pytest.mark.parametrize("row", ROWS, ids=[r["case"] for r in ROWS])
def test_the_builtin_listing_line_is_the_clis(tmp_path: Path, row: dict[str, Any]) -> None:
    opened = row["text"].removeprefix("\ufeff").split("\n", 1)[0].strip() == "---"
    if row["listed"] and row["line"].endswith(": ---") and opened:
        # a frontmatter that never closes: the CLI lists '---', which tests nothing the
        # author wrote, so reading it is a one-line error before any call
        with pytest.raises(InputError, match="frontmatter is not closed"):
            read_skill(write(tmp_path, row))
        return
    skill = read_skill(write(tmp_path, row))
    if not row["listed"]:
        assert not skill.model_invocable, skill.unlisted_reason
        return
    assert skill.model_invocable, skill.unlisted_reason
    assert listed_skill(skill).line == row["line"]


def test_the_experiment_covers_the_broken_frontmatters_the_issue_names() -> None:
    """At least twelve files a strict YAML reader refuses, of each kind asked for."""
    import yaml

    def strict(text: str) -> bool:
        try:
            yaml.safe_load(text.split("---", 2)[1])
        except Exception:
            return False
        return True

    broken = [r["case"] for r in ROWS if not strict(r["text"].removeprefix("\ufeff"))]
    assert len(broken) >= 12
    for kind in ("colon", "tab", "dup", "unclosed", "bom", "crlf", "continuation"):
        assert any(kind in case for case in (r["case"] for r in ROWS)), kind


@pytest.mark.slow
def test_the_table_is_what_the_pinned_cli_lists(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """Every listed row again, against the CLI, forty skills a run (short texts: the listing
    budget of the default model keeps all of them)."""
    listed = [r for r in ROWS if r["listed"]]
    for start in range(0, len(listed), 40):
        batch = listed[start : start + 40]
        project = tmp_path / f"project{start}"
        for row in batch:
            write(project, row)
        lines = listing_lines(cli_request(claude_bin, fake_api, project, tmp_path / f"h{start}"))
        for row in batch:
            assert row["line"] in lines, row["case"]
