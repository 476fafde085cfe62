"""Routing eval sets, read strictly: every bad entry is one line naming the file and entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.skills.routing_set import find_routing_set, load_routing_set
from pytest_skilltrigger.support.errors import InputError

SKILLS = ("csv-cleaner", "spreadsheet-charts")


def write(folder: Path, data: object, name: str = "routing-eval.json") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_entries_in_file_order_with_the_folder_holding_the_skills(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {"query": "plot it", "expected_skill": "spreadsheet-charts"},
            {"query": "what is a TSV?", "expected_skill": None, "note": "kept aside"},
        ],
        "evals/routing-eval.json",
    )
    assert find_routing_set(str(tmp_path)) == str(path)
    routing = load_routing_set(str(path), SKILLS)
    assert routing.folder == str(tmp_path)  # the folder above evals/
    assert [(e.index, e.query, e.expected_skill) for e in routing.entries] == [
        (0, "plot it", "spreadsheet-charts"),
        (1, "what is a TSV?", None),
    ]


@pytest.mark.parametrize(
    "data,problem",
    [
        ({"query": "x"}, "must be a JSON list"),
        ([], "holds no entries"),
        (["plot it"], "entry [00]: must be an object"),
        ([{"query": "plot it"}], "entry [00]: has no expected_skill"),
        ([{"query": "plot it", "expected_skill": 3}], "expected_skill must be a skill name"),
        ([{"query": "plot it", "expected_skill": "pdf"}], "unknown skill 'pdf'"),
        (
            [{"query": "a", "expected_skill": None}, {"query": "a", "expected_skill": None}],
            "entry [01]",
        ),
        ('[{"query": "a", "query": "b", "expected_skill": null}]', "entry [00]"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_file(
    tmp_path: Path, data: object, problem: str
) -> None:
    path = write(tmp_path, data)
    with pytest.raises(InputError) as caught:
        load_routing_set(str(path), SKILLS)
    message = str(caught.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message


def test_no_routing_set_is_none(tmp_path: Path) -> None:
    assert find_routing_set(str(tmp_path)) is None
