"""Routing eval sets, read strictly: every bad entry is one line naming the file and entry.

A routing set is a set of a folder of skills whose entries name the skill that should be
chosen first (``expected_skill``, or ``should_trigger`` naming it); it is found where such a
folder keeps it, beside the skills or in the ``evals/`` above them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.skills.discovery import discover_skills
from pytest_skilltrigger.skills.set_places import place_sets
from pytest_skilltrigger.support.errors import InputError

SKILLS = ("csv-cleaner", "spreadsheet-charts")


def folder_of_skills(root: Path) -> Path:
    for name in SKILLS:
        (root / name).mkdir(parents=True)
        (root / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {name} work.\n---\n"
        )
    return root


def write(folder: Path, data: object, name: str = "routing-eval.json") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def routing_of(root: Path):  # type: ignore[no-untyped-def]
    placed = place_sets(discover_skills(root), [str(root)])
    return placed.routing


def test_entries_in_file_order_with_the_folder_holding_the_skills(tmp_path: Path) -> None:
    folder_of_skills(tmp_path)
    path = write(
        tmp_path,
        [
            {"query": "plot it", "expected_skill": "spreadsheet-charts"},
            {"query": "what is a TSV?", "expected_skill": None, "note": "kept aside"},
        ],
        "evals/routing-eval.json",
    )
    (routing,) = routing_of(tmp_path)
    assert routing.path == str(path)
    assert routing.folder == str(tmp_path)  # the folder above evals/
    assert routing.skills == SKILLS
    assert [(e.index, e.query, e.expected_skill) for e in routing.entries] == [
        (0, "plot it", "spreadsheet-charts"),
        (1, "what is a TSV?", None),
    ]


@pytest.mark.parametrize(
    "data,problem",
    [
        ({"query": "x"}, "holds a single entry"),
        ([], "has no entries"),
        (["plot it"], "entry [00]: must be an object"),
        ([{"query": "plot it"}], "entry [00]: has no should_trigger (true or false) or expected"),
        ([{"query": "plot it", "expected_skill": 3}], "expected_skill must name a skill"),
        ([{"query": "plot it", "expected_skill": "pdf"}], "names 'pdf', which is no skill here"),
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
    folder_of_skills(tmp_path)
    path = write(tmp_path, data)
    with pytest.raises(InputError) as caught:
        routing_of(tmp_path)
    message = str(caught.value)
    assert message.startswith(str(path)) and problem in message and "\n" not in message


def test_no_routing_set_is_none(tmp_path: Path) -> None:
    folder_of_skills(tmp_path)
    assert routing_of(tmp_path) == []
