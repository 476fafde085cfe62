"""A part of a session's items (``--trigger-shard=K/N``), for CI jobs that run one part each
and merge the parts' reports (``--trigger-merge``).

Items are ordered by a hash of their ids, then dealt round: the same item falls in the same
part on every machine that collects the same items, the parts differ in size by one at most,
and a skill's items spread over the parts (so each part pays a share of every skill rather
than all of a few).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_skilltrigger.support.errors import InputError

FLAG = "--trigger-shard"


@dataclass(frozen=True)
class Shard:
    """Part ``index`` (from 1) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, value: object) -> Shard:
        """``K/N`` with 1 <= K <= N; InputError otherwise."""
        text = str(value).strip()
        index, slash, count = text.partition("/")
        if not (slash and index.isdigit() and count.isdigit()):
            raise InputError(FLAG, f"takes K/N (part K of N, e.g. 2/4), got {text!r}")
        shard = cls(int(index), int(count))
        if not 1 <= shard.index <= shard.count:
            raise InputError(FLAG, f"K must be within 1..N, got {text!r}")
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def picks(self, ids: Iterable[str]) -> frozenset[str]:
        """The ids of this part, of all the ids collected."""
        ordered = sorted(set(ids), key=lambda i: (_hashed(i), i))
        return frozenset(ordered[self.index - 1 :: self.count])


def _hashed(item_id: str) -> str:
    return hashlib.sha256(item_id.encode("utf-8")).hexdigest()
