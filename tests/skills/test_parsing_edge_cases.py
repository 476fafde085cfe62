"""Parsing edge cases found in review: an eval set's query that is not valid Unicode is bad
input, and YAML's typed scalars in SKILL.md frontmatter read as the text written (also when
the frontmatter is read leniently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skilltrigger.skills.evalset import parse_eval_set
from pytest_skilltrigger.support.errors import InputError


def test_lone_surrogate_query_is_bad_input() -> None:
    with pytest.raises(InputError, match="entry 1: query is not valid Unicode"):
        parse_eval_set([{"query": "bad \ud800 x", "should_trigger": True}], "evals.json")


@pytest.mark.parametrize("written", ["yes", "On", "2024-01-01", "1.0", "true"])
def test_yaml_typed_scalars_read_as_the_text_written(tmp_path: Path, written: str) -> None:
    from pytest_skilltrigger.skills.skill import read_skill

    folder = tmp_path / "typed"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\nname: typed\ndescription: {written}\n---\nbody\n")
    assert read_skill(folder).description == written


@pytest.mark.parametrize("written", ["yes", "2024-01-01", "1.0"])
def test_typed_scalars_read_as_text_also_in_leniently_read_frontmatter(
    tmp_path: Path, written: str
) -> None:
    from pytest_skilltrigger.skills.skill import read_skill

    folder = tmp_path / "typed"
    folder.mkdir()
    broken = f"---\nname: {written}\nlicense: a: b\ndescription: {written}\n---\nbody\n"
    (folder / "SKILL.md").write_text(broken)
    skill = read_skill(folder)
    assert (skill.name, skill.description) == (written, written)
    assert any("read leniently" in w for w in skill.warnings)
