"""This process's part of a session that several processes run (xdist workers).

The limits a user sets are the session's, not each process's: each worker keeps its part of
the runs in flight and of the budget, so together they hold.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProcessShare:
    """Process ``index`` of ``count`` (``gw3`` of 4 is ``ProcessShare(3, 4)``);
    ``limits_path`` is the file where the processes keep the rate limits they share;
    ``spent_usd`` what the session spent before the processes started (the controls, drafts),
    which the budget they share no longer holds."""

    index: int
    count: int
    limits_path: str | None = None
    spent_usd: float = 0.0

    def part_of(self, total: int) -> int:
        """This process's part of ``total`` (at least one): the remainder goes to the first."""
        return max(1, total // self.count + (1 if self.index < total % self.count else 0))

    def part_of_budget(self, budget_usd: float) -> float:
        return max(0.0, budget_usd - self.spent_usd) / max(1, self.count)
