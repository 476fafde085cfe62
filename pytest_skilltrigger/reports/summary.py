"""Per-skill results and their summary numbers.

Precision, recall and ``accuracy`` (run accuracy) are computed over all runs, as the reference
tool does: a run of a should-trigger query that triggered is a true positive, and so on.
Errored and skipped queries are counted apart and never enter these numbers.
``query_pass_rate`` is the share of the (not skipped) queries that passed: the number the
``--trigger-min-accuracy`` gate compares.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.options import DEFAULT_CONFIDENCE
from pytest_skilltrigger.model.outcome import QueryResult, Usage
from pytest_skilltrigger.model.prices import Price, maybe_cost_usd, price_of
from pytest_skilltrigger.model.stats import wilson

if TYPE_CHECKING:
    from pytest_skilltrigger.skills.catalog import Target


@dataclass(frozen=True)
class Summary:
    """One skill's summary numbers, typed until the JSON, Markdown or terminal renders them.

    ``cost_usd`` is None when a price is unknown; ``priced`` says whether a cost was asked
    for at all (a summary without a model has no cost key in the JSON).
    """

    total: int
    passed: int
    failed: int
    errors: int
    skipped: int
    precision: float | None
    recall: float | None
    accuracy: float | None
    query_pass_rate: float | None
    calls: int
    usage: Usage
    cost_usd: float | None = None
    priced: bool = False
    borderline: int = 0  # of ``failed``, those sampled to the end without a decision
    # the share of queries passed with its interval at ``confidence`` (Wilson)
    query_pass_interval: tuple[float, float] | None = None
    confidence: float = DEFAULT_CONFIDENCE
    # the run-level rates' intervals (Wilson, counting each query that contributes runs once:
    # the runs of one query are not independent, so the intervals are conservative)
    precision_interval: tuple[float, float] | None = None
    recall_interval: tuple[float, float] | None = None
    accuracy_interval: tuple[float, float] | None = None

    @property
    def counted(self) -> int:
        """The queries that count towards ``query_pass_rate`` (all but the skipped)."""
        return self.total - self.skipped

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
            "precision": self.precision,
            "precision_interval": _rounded_pair(self.precision_interval),
            "recall": self.recall,
            "recall_interval": _rounded_pair(self.recall_interval),
            "accuracy": self.accuracy,
            "accuracy_interval": _rounded_pair(self.accuracy_interval),
            # what --trigger-min-accuracy gates: the share of queries (not runs) that passed
            "query_pass_rate": self.query_pass_rate,
            "query_pass_interval": _rounded_pair(self.query_pass_interval),
            "confidence": self.confidence,
            "borderline": self.borderline,
            "calls": self.calls,
            **self.usage.to_dict(),
        }
        if self.priced:
            data["cost_usd"] = self.cost_usd
        return data


def summarize(
    results: Iterable[QueryResult], model: str | None = None, prices: dict[str, Price] | None = None
) -> Summary:
    """The summary of one skill's results (priced when ``model`` is given)."""
    results = list(results)
    tp = fp = fn = tn = 0
    usage = Usage()
    calls = 0
    # how many queries contribute runs to each rate's denominator (its interval's sample)
    triggered_queries = positive_queries = measured_queries = 0
    for r in results:
        usage = usage + r.usage
        calls += r.calls
        if r.passed is None:
            continue
        misses = r.runs_made - r.triggers
        measured_queries += 1
        triggered_queries += r.triggers > 0
        if r.should_trigger:
            tp, fn = tp + r.triggers, fn + misses
            positive_queries += 1
        else:
            fp, tn = fp + r.triggers, tn + misses
    decided = [r for r in results if r.passed is not None]
    passed = sum(1 for r in decided if r.passed)
    skipped = sum(1 for r in results if r.skipped)
    counted = len(results) - skipped
    total_runs = tp + fp + fn + tn
    confidence = results[0].rule.confidence if results else DEFAULT_CONFIDENCE
    return Summary(
        total=len(results),
        passed=passed,
        failed=len(decided) - passed,
        errors=sum(1 for r in results if r.errors and not r.skipped),
        skipped=skipped,
        precision=round(tp / (tp + fp), 4) if tp + fp else None,
        recall=round(tp / (tp + fn), 4) if tp + fn else None,
        accuracy=round((tp + tn) / total_runs, 4) if total_runs else None,
        query_pass_rate=round(passed / counted, 4) if counted else None,
        calls=calls,
        usage=usage,
        cost_usd=_rounded(_cost(results, model, prices)) if model is not None else None,
        priced=model is not None,
        borderline=sum(1 for r in results if r.borderline),
        query_pass_interval=wilson(passed, counted, confidence) if counted else None,
        confidence=confidence,
        precision_interval=_per_query(tp, tp + fp, triggered_queries, confidence),
        recall_interval=_per_query(tp, tp + fn, positive_queries, confidence),
        accuracy_interval=_per_query(tp + tn, total_runs, measured_queries, confidence),
    )


def _per_query(hits: int, runs: int, queries: int, confidence: float) -> tuple[float, float] | None:
    """A run-level rate's interval with each contributing query counted once (the rate over
    its runs, on as many observations as there are queries)."""
    if not runs or not queries:
        return None
    return wilson(round(hits / runs * queries), queries, confidence)


def _rounded_pair(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(v, 4) for v in pair]


def _rounded(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 6)


def _cost(results: list[QueryResult], model: str, prices: dict[str, Price] | None) -> float | None:
    """What the runs made now cost, each at the price of the model that answered it (the
    session's model when a run does not say), batch runs at the batch rate; None when any
    price is unknown."""
    total = 0.0
    for r in results:
        if r.shared:  # paid for through the result whose sampling it joined
            continue
        for o in r.outcomes:
            if o.from_store:
                continue
            cost = maybe_cost_usd(o.usage, price_of(o.model or model, prices), o.batch, o.requests)
            if cost is None:
                return None
            total += cost
    return total


def models_used(results: Iterable[QueryResult]) -> list[str]:
    """The models that answered these runs, most runs first."""
    counts: dict[str, int] = {}
    for r in results:
        for o in r.outcomes:
            if o.model:
                counts[o.model] = counts.get(o.model, 0) + 1
    return sorted(counts, key=lambda m: (-counts[m], m))


@dataclass(frozen=True)
class Variant:
    """Where an item's result belongs beyond its skill: its model in a matrix (None: the
    session's one model), the crowd it was asked among (None: none) and its permission mode
    in a matrix (None: the session's own)."""

    model: str | None = None
    crowd: int | None = None
    mode: str | None = None

    @property
    def base(self) -> bool:
        """Whether it is the skill's own session (a model's, alone, in the session's mode)."""
        return self.crowd is None and self.mode is None


@dataclass
class SkillResults:
    """What the controller gathered for one skill: typed results by eval-file index."""

    target: Target
    rows: dict[int, QueryResult] = field(default_factory=dict)
    model: str | None = None  # its model in a matrix (None: the session's one model)
    crowd: int | None = None  # the other installed skills it was asked among (--trigger-crowd)
    mode: str | None = None  # its permission mode in a matrix (None: the session's own)

    @property
    def variant(self) -> Variant:
        return Variant(self.model, self.crowd, self.mode)

    def results(self) -> list[QueryResult]:
        """The results in eval-file order (whatever order they arrived in)."""
        return [self.rows[i] for i in sorted(self.rows)]

    def report_rows(self) -> list[dict[str, Any]]:
        """The JSON rows: each result's summary, with the entry's extra keys."""
        return [row for _index, row in self.indexed_rows()]

    def indexed_rows(self) -> list[tuple[int, dict[str, Any]]]:
        """Each result's row with its eval-file index, in eval-file order."""
        extras = {e.index: e.extra for e in self.target.eval_set.entries}
        rows = []
        for i in sorted(self.rows):
            row = self.rows[i].summary_row()
            if extras.get(i):
                row["extra"] = extras[i]
            rows.append((i, row))
        return rows


class SessionResults:
    """Collects item results (decoded once, as they arrive from any process) per skill."""

    def __init__(self, targets: Iterable[Target] = (), models: Sequence[str] = ()) -> None:
        self._order = [t.skill.skill_md for t in targets]
        self._models = list(models)  # a matrix's models, in the order the user gave them
        self.skills: dict[tuple[str, Variant], SkillResults] = {}

    def add(
        self, target: Target, index: int, result: QueryResult, variant: Variant = Variant()
    ) -> None:
        key = (target.skill.skill_md, variant)
        skill = self.skills.get(key)
        if skill is None:
            skill = self.skills[key] = SkillResults(
                target, model=variant.model, crowd=variant.crowd, mode=variant.mode
            )
        skill.rows[index] = result

    @property
    def models(self) -> tuple[str, ...]:
        """The matrix's models in the user's order (empty: no matrix)."""
        return tuple(self._models)

    def first_model(self) -> str | None:
        """The matrix's first model (None: no matrix)."""
        return self._models[0] if self._models else None

    def all_results(self) -> Iterator[QueryResult]:
        for skill in self.skills.values():
            yield from skill.rows.values()

    def ordered(self) -> list[SkillResults]:
        """Skills in target order (then any others by path), whatever the arrival order."""
        rank = {k: i for i, k in enumerate(self._order)}
        models = {m: i for i, m in enumerate(self._models)}

        def place(key: tuple[str, Variant]) -> tuple[int, str, int, str, int, str]:
            skill_md, variant = key
            return (
                rank.get(skill_md, len(rank)),
                skill_md,
                models.get(variant.model or "", -1),
                variant.model or "",
                variant.crowd or 0,
                variant.mode or "",
            )

        keys = sorted(self.skills, key=place)
        return [self.skills[k] for k in keys]
