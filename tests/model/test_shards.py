"""A shard's part of the items: the parts cover every item once, differ in size by one at
most, and do not depend on the order the items were collected in."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_skilltrigger.model.shards import Shard
from pytest_skilltrigger.support.errors import InputError


@given(
    ids=st.sets(st.text(min_size=1, max_size=30), max_size=60),
    count=st.integers(min_value=1, max_value=9),
)
def test_the_parts_are_a_partition_of_even_sizes(ids: set[str], count: int) -> None:
    parts = [Shard(k, count).picks(ids) for k in range(1, count + 1)]
    assert set().union(*parts) == ids
    assert sum(len(p) for p in parts) == len(ids)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_the_same_item_falls_in_the_same_part_whatever_the_order() -> None:
    ids = [f"skills/s{n}/SKILL.md::s{n}[{i:02d}-q]" for n in range(5) for i in range(7)]
    shuffled = ids[:]
    random.Random(3).shuffle(shuffled)
    for k in (1, 2, 3):
        assert Shard(k, 3).picks(ids) == Shard(k, 3).picks(shuffled)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2", "takes K/N (part K of N, e.g. 2/4), got '2'"),
        ("0/3", "K must be within 1..N, got '0/3'"),
        ("4/3", "K must be within 1..N, got '4/3'"),
        ("a/b", "takes K/N (part K of N, e.g. 2/4), got 'a/b'"),
    ],
)
def test_a_bad_shard_is_one_line(text: str, problem: str) -> None:
    with pytest.raises(InputError) as raised:
        Shard.parse(text)
    assert str(raised.value) == f"--trigger-shard: {problem}"


def test_a_shard_reads_as_given() -> None:
    assert str(Shard.parse(" 2/4 ")) == "2/4"
