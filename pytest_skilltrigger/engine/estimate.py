"""What a session may cost, known before its first call: the header's estimate.

Why a range and not one figure: the verdict rule decides how many runs a query takes. A
clear-cut query (the model always or never picks the skill) is settled in the rule's fewest
runs; a borderline one is sampled to its most. The low end also assumes the prompt cache does
its job (each request's shared prefix written once per context, read afterwards), the high end
that nothing is cached, which is what the budget guard reserves. Stored runs (``--trigger-cache
use``) lower both; the estimate does not look into the store, so it errs on the high side.

With ``--optimize-description`` the improvement rounds add an upper bound of their own: each
round screens its candidates on the train queries, measures the survivor by the rule, races it
(at most ``--race-runs`` more runs) and measures it on the held-out queries; the acceptance
race at the end measures two descriptions afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_skilltrigger.backends.base import TriggerBackend
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import Price, cost_usd, format_usd, rate_of
from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
from pytest_skilltrigger.model.verdict import Rule
from pytest_skilltrigger.skills.catalog import Target

# The output a decision typically takes (a Skill call or the first words of an answer: the
# stream is read only until the decision shows), for the low end; the high end keeps the
# backend's budgeting figure.
TYPICAL_OUTPUT_TOKENS = 100


@dataclass(frozen=True)
class Estimate:
    """The calls and dollars a session may take (``None`` dollars: the model has no price)."""

    model: str
    queries: int
    fewest_calls: int
    most_calls: int
    fewest_usd: float | None
    most_usd: float | None
    round_calls: int = 0  # the improvement rounds' most, on top
    round_usd: float | None = None

    def line(self) -> str:
        """``up to 610 calls (146 if every query is clear-cut), about $0.55 to $2.30 on M``."""
        calls = f"up to {self.most_calls:,} calls"
        if self.fewest_calls < self.most_calls:
            calls += f" ({self.fewest_calls:,} if every query is clear-cut)"
        if self.most_usd is None:
            cost = f"cost unknown ({self.model} is not in the price table)"
        else:
            low, high = format_usd(self.fewest_usd), format_usd(self.most_usd)
            cost = f"about {low} to {high} on {self.model}" if low != high else (
                f"about {high} on {self.model}")  # fmt: skip
        text = f"estimate for {self.queries} queries: {calls}, {cost}"
        if self.round_calls:
            rounds = f"; the improvement rounds up to {self.round_calls:,} more calls"
            if self.round_usd is not None:
                rounds += f" (at most {format_usd(self.round_usd)})"
            text += rounds
        return text


def combined(estimates: Sequence[Estimate]) -> Estimate:
    """A model matrix's estimate: every model's calls and dollars added up."""
    first = estimates[0]
    if len(estimates) == 1:
        return first

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    return Estimate(
        " and ".join(e.model for e in estimates), first.queries,
        sum(e.fewest_calls for e in estimates), sum(e.most_calls for e in estimates),
        total([e.fewest_usd for e in estimates]), total([e.most_usd for e in estimates]),
        sum(e.round_calls for e in estimates), total([e.round_usd for e in estimates]),
    )  # fmt: skip


def fewest_runs(rule: Rule) -> int:
    """The runs a clear-cut query takes: every run the same, until the rule stops."""
    runs = 0
    while True:
        more = rule.next_runs(runs, 0)
        if more <= 0:
            return runs
        runs += more


def estimate_session(
    targets: Sequence[Target], settings: Settings, backend: TriggerBackend, price: Price | None,
    optimizer: OptimizerSettings | None = None, model: str | None = None,
) -> Estimate:  # fmt: skip
    """The range of calls and dollars the targets' items may take, and the rounds' most with
    ``optimizer`` (see the module); ``model`` is the items' model in a matrix, so the contexts
    sized are the ones the items send (in capture mode: the captures they use)."""
    rule = settings.rule
    low_runs, high_runs = fewest_runs(rule), rule.max_runs
    rate = rate_of(settings.batch)
    queries = fewest_calls = most_calls = 0
    low_usd = high_usd = 0.0
    for target in targets:
        context = target.context().on_model(model)
        if not context.model_invocable:  # never listed: its items make no call
            continue
        entries = target.eval_set.entries
        queries += len(entries)
        fewest_calls += low_runs * len(entries)
        most_calls += high_runs * len(entries)
        if price is None:
            continue
        for n, entry in enumerate(entries):
            whole = backend.estimate(context, entry.query)
            own = len(entry.query.encode("utf-8")) // 3 + 1
            prefix = max(0, whole.input_tokens - own)
            # the shared prefix written to the cache by the context's first request only
            output = min(whole.output_tokens, TYPICAL_OUTPUT_TOKENS)
            cached = Usage(input_tokens=own, output_tokens=output, cache_read_input_tokens=prefix)
            low_usd += cost_usd(cached, price) * low_runs * rate
            if n == 0:
                low_usd += cost_usd(Usage(cache_creation_input_tokens=prefix), price) * rate
            high_usd += cost_usd(whole, price) * high_runs * rate
    estimate = Estimate(
        backend.model, queries, fewest_calls, most_calls,
        low_usd if price else None, high_usd if price else None,
    )  # fmt: skip
    if optimizer is None:
        return estimate
    return _with_rounds(estimate, targets, settings, optimizer)


def _with_rounds(
    estimate: Estimate, targets: Sequence[Target], settings: Settings, opt: OptimizerSettings
) -> Estimate:
    """The improvement rounds' upper bound, on top of the items' (see the module)."""
    most = settings.rule.max_runs
    screen = 0  # runs per train query over the screening's stages
    alive, runs = opt.candidates_per_round, 1
    while alive > 1:
        screen += alive * runs
        alive, runs = (alive + 1) // 2, runs * 2
    calls = 0
    for target in targets:
        if not target.context().model_invocable:
            continue
        size = len(target.eval_set.entries)
        test = round(size * opt.holdout)
        train = size - test
        per_round = train * (screen + most) + opt.race_runs + test * most
        acceptance = 2 * (test or train) * most + opt.race_runs
        calls += per_round * max(0, opt.max_iterations - 1) + acceptance
    per_call = (estimate.most_usd / estimate.most_calls) if (
        estimate.most_usd is not None and estimate.most_calls) else None  # fmt: skip
    return Estimate(
        estimate.model, estimate.queries, estimate.fewest_calls, estimate.most_calls,
        estimate.fewest_usd, estimate.most_usd, calls,
        per_call * calls if per_call is not None else None,
    )  # fmt: skip
