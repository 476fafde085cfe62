"""The rounds' files: a time-stamped folder per run, never shared, and each proposal's
exchange kept with secrets removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.conclusion.outputs import stamped_folder
from pytest_skilltrigger.conclusion.round_files import RoundFiles
from pytest_skilltrigger.optimizer.proposer import Proposal


def test_two_runs_in_one_second_get_their_own_folders(tmp_path: Path) -> None:
    first, second = stamped_folder(str(tmp_path / "r")), stamped_folder(str(tmp_path / "r"))
    assert first != second and Path(first).is_dir() and Path(second).is_dir()
    assert Path(second).name.startswith(Path(first).name)


def test_a_proposal_is_kept_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-secret-value-123456")
    files = RoundFiles(None, str(tmp_path))
    proposal = Proposal(
        "prompt with sk-ant-secret-value-123456",
        "answer",
        ["New text.", "Other text."],
        problems=["too long"],
    )
    files.save_proposal("pdf", 2, proposal)
    assert files.results_dir is not None
    folder = Path(files.results_dir) / "pdf" / "iteration-2"
    assert (folder / "prompt.txt").read_text() == "prompt with [REDACTED]"
    assert (folder / "description.txt").read_text() == "New text.\n\nOther text."
    assert not (folder / "repair_prompt.txt").exists()
    counts = json.loads((folder / "counts.json").read_text())
    assert counts["problems"] == ["too long"] and counts["descriptions"] == 2
