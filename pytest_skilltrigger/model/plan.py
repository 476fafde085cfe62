"""How a query is sampled: the plan a sampling follows, and how many runs it makes next.

A value type shared by the engine (the sampler, message batches), the optimizer and the
pytest layer (which builds each item's plan); the verdict rule it applies is
:mod:`pytest_skilltrigger.model.verdict`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_skilltrigger.model.outcome import RunOutcome
from pytest_skilltrigger.model.verdict import runs_still_needed


@dataclass(frozen=True)
class SamplingPlan:
    """How each query is sampled: runs per query, threshold, early stopping.

    ``fresh`` asks for an independent measurement: stored runs are not reused, a sampling of
    the same query already made in this session is not joined, and its runs are not stored
    (they must not become the runs a later cached rerun of the description reuses). The
    optimizer re-measures its winner this way, see :mod:`pytest_skilltrigger.optimizer.loop`.
    """

    runs: int = 3
    threshold: float = 0.5
    curtail: bool = True
    fresh: bool = False
    # what the calls are counted under (see ``cost.PHASES``); not part of what makes two
    # samplings the same: a later submission that joins a sampling pays nothing
    phase: str = field(default="items", compare=False)



def wave_size(outcomes: Sequence[RunOutcome], plan: SamplingPlan) -> int:
    """How many runs of a query to make next: none after an error or once the verdict is
    decided (exact early stopping), else as many as cannot be wasted. Live runs and message
    batches both sample in these waves."""
    if any(o.status == "error" for o in outcomes):
        return 0
    if not plan.curtail:
        return max(0, plan.runs - len(outcomes))
    triggers = sum(1 for o in outcomes if o.triggered)
    return runs_still_needed(triggers, len(outcomes) - triggers, plan.runs, plan.threshold)


# (context key, query, runs, threshold, early stopping, fresh): what makes two samplings the same
QueryIdent = tuple[str, str, int, float, bool, bool]
