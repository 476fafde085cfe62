"""Parsing edge cases found in review: an eval set's query that is not valid Unicode is bad
input, and YAML's typed scalars in SKILL.md frontmatter read as the pinned CLI reads them
(YAML 1.2: ``yes`` and dates are text, a number is written as JavaScript writes it), also when
the CLI's rewrite reads the frontmatter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skilltrigger.skills.evalset import parse_eval_set
from pytest_skilltrigger.support.errors import InputError


def test_lone_surrogate_query_is_bad_input() -> None:
    with pytest.raises(InputError, match=r"entry \[00\]: query is not valid Unicode"):
        parse_eval_set([{"query": "bad \ud800 x", "should_trigger": True}], "evals.json")


@pytest.mark.parametrize(
    "written,read",
    [
        ("yes", "yes"),
        ("On", "On"),
        ("2024-01-01", "2024-01-01"),
        ("1.0", "1"),
        ("true", "true"),
        ("0x1A", "26"),
        ("1e3", "1000"),
        ("1.50", "1.5"),
        ("1_000", "1_000"),
        (".inf", "Infinity"),
    ],
)
def test_yaml_typed_scalars_read_as_the_cli_reads_them(
    tmp_path: Path, written: str, read: str
) -> None:
    """Each as the pinned CLI listed it (a probe of 2.1.328)."""
    from pytest_skilltrigger.skills.skill import read_skill

    folder = tmp_path / "typed"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\nname: typed\ndescription: {written}\n---\nbody\n")
    assert read_skill(folder).description == read


@pytest.mark.parametrize("written", ["yes", "2024-01-01", "1.5"])
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
    assert any("reads it after quoting its values" in w for w in skill.warnings)
