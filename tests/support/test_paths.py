"""Path containment: a path is within a folder when it is the folder or lies below it, never
because it merely shares the folder's name as a prefix."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.support.paths import within


@pytest.mark.parametrize(
    "path,folder",
    [
        ("/p/skills", "/p/skills"),
        ("/p/skills/pdf", "/p/skills"),
        ("/p/skills/pdf/SKILL.md", "/p/skills"),
        ("/p/skills/pdf", "/p/skills/"),
        ("/p", "/"),
        ("/", "/"),
    ],
)
def test_the_folder_itself_and_what_lies_below_it_are_within(path: str, folder: str) -> None:
    assert within(path, folder)


@pytest.mark.parametrize(
    "path,folder",
    [
        ("/p/skills-old", "/p/skills"),  # a shared prefix is not containment
        ("/p/skillsx/pdf", "/p/skills"),
        ("/p", "/p/skills"),  # a parent is not within its child
        ("/q/skills", "/p/skills"),
        ("/p/other", "/p/skills"),
    ],
)
def test_siblings_parents_and_shared_prefixes_are_not_within(path: str, folder: str) -> None:
    assert not within(path, folder)
