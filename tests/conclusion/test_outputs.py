"""The files a session writes: every path checked before any call, nothing created while
checking; written at the end only by the controller."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_skilltrigger.conclusion.outputs import Outputs
from pytest_skilltrigger.support.errors import InputError


def test_paths_that_can_be_written_pass_and_nothing_is_created(tmp_path: Path) -> None:
    outputs = Outputs(
        json_path=str(tmp_path / "new" / "deeper" / "out.json"),
        report_path=str(tmp_path / "page.html"),
        results_dir=str(tmp_path / "results"),
        step_summary=str(tmp_path / "summary.md"),
        store_path=str(tmp_path / "store" / "results.sqlite"),
    )
    outputs.check()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("field", ["json_path", "report_path", "step_summary", "store_path"])
def test_a_file_path_that_is_a_folder_is_one_line_naming_the_option(
    tmp_path: Path, field: str
) -> None:
    with pytest.raises(InputError) as caught:
        Outputs(**{field: str(tmp_path)}).check()
    assert str(tmp_path) in str(caught.value) and "is a folder" in str(caught.value)


def test_a_results_folder_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "taken"
    file.write_text("x")
    with pytest.raises(InputError, match="--trigger-results-dir"):
        Outputs(results_dir=str(file)).check()


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(InputError, match="not writable"):
        Outputs(json_path=str(locked / "out.json")).check()


def test_writes_and_the_step_summary_appends(tmp_path: Path) -> None:
    outputs = Outputs(
        json_path=str(tmp_path / "out.json"),
        report_path=str(tmp_path / "page.html"),
        step_summary=str(tmp_path / "gh" / "summary.md"),
    )
    outputs.write_json({"version": 1, "skills": []})
    outputs.write_page("<p>page</p>")
    outputs.append_step_summary("one\n")
    outputs.append_step_summary("two\n")
    assert json.loads((tmp_path / "out.json").read_text()) == {"version": 1, "skills": []}
    assert (tmp_path / "page.html").read_text() == "<p>page</p>"
    assert (tmp_path / "gh" / "summary.md").read_text() == "one\ntwo\n"
    Outputs().write_json({})  # nothing asked, nothing written
