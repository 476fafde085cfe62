"""What a session may cost, known before its first call: the header's estimate.

Why a range and not one figure: the verdict rule decides how many runs a query takes. A
clear-cut query (the model always or never picks the skill) is settled in the rule's fewest
runs; a borderline one is sampled to its most. The low end also assumes the prompt cache does
its job (each request's shared prefix written once per context, read afterwards, where the
model's layout puts the listing before the query), the high end that nothing is cached,
which is what the budget guard reserves. Stored runs (``--trigger-cache use``) lower both: a
sampling they decide costs nothing, and one they start counts only the runs still to make.

What is sized is every sampling the items will make, as the pytest layer lists them: each
trigger entry and each routing entry, once per model of a matrix, each in its model's lane
(its backend sizes the request, its model's price prices it). With ``--trigger-optimize``
the rounds' own upper bound (:mod:`pytest_skilltrigger.optimizer.spend_bound`) is added with
:meth:`Estimate.with_rounds`: the rounds run on the first model, their acceptance race on every
model, each call priced as the dearest of its model's with every description of its listing
that a round may rewrite at the longest allowed (1,024 characters).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_skilltrigger.backends.base import TriggerBackend, turn_estimate
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import Price, cost_usd, did_you_mean, format_usd, rate_of
from pytest_skilltrigger.model.request_layouts import listing_shared
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.model.verdict import Rule
from pytest_skilltrigger.skills.skill import MAX_DESCRIPTION

Sampling = tuple[TriggerContext, str]  # a context (on its model) and the query sampled in it

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
    asks: int = 0  # the rounds' most requests to the improve model (priced when made)
    # each model's dearest call with the longest description a round may try (model order)
    call_usd: tuple[float | None, ...] = ()
    # the input tokens the calls count toward an input-token rate limit (cache reads do not)
    fewest_input: int = 0
    most_input: int = 0
    stored: int = 0  # samplings (a query on a model) that their stored runs decide: no call
    samplings: int = 0  # every model's queries (a matrix samples each query on each model)
    per_run: int = 1  # the most requests one run sends (a turn's looking around, its bound)

    def minutes_at(self, limits: Mapping[str, float]) -> tuple[float, float]:
        """How long the calls take at most at these limits a minute (requests and input
        tokens), the fewest and the most of them."""
        rpm, itpm = limits.get("requests"), limits.get("input-tokens")

        def minutes(calls: int, tokens: int) -> float:
            return max(calls / rpm if rpm else 0.0, tokens / itpm if itpm else 0.0)

        return minutes(self.fewest_calls, self.fewest_input), minutes(
            self.most_calls, self.most_input
        )

    def line(self) -> str:
        """``up to 610 calls (146 if every query is clear-cut), about $0.55 to $2.30 on M``."""
        if self.stored and self.stored == self.samplings and not self.round_calls:
            return f"estimate for {_queries(self.queries)}: no call, stored runs decide every one"
        calls = f"up to {self.most_calls:,} calls"
        if self.fewest_calls < self.most_calls:
            calls += f" ({self.fewest_calls:,} if every query is clear-cut)"
        if self.most_usd is None:
            hint = did_you_mean(self.model)
            hint = f"; {hint}" if hint else ""
            cost = f"cost unknown ({self.model} is not in the price table{hint})"
        else:
            low, high = format_usd(self.fewest_usd), format_usd(self.most_usd)
            cost = (
                f"about {low} to {high} on {self.model}"
                if low != high
                else (f"about {high} on {self.model}")
            )
        text = f"estimate for {_queries(self.queries)}: {calls}, {cost}"
        if self.stored:
            text += f"; stored runs decide {self.stored} of {self.samplings}"
        if self.round_calls:
            rounds = f"; the improvement rounds up to {self.round_calls:,} more calls"
            if self.round_usd is not None:
                rounds += f" (at most {format_usd(self.round_usd)})"
            text += rounds + f" and {self.asks:,} requests to the improve model"
        if self.per_run > 1:  # the most counts every run looking around to the bound
            text += (
                f"; the most counts {self.per_run} calls a run (a run may look around first), "
                "the fewest one"
            )
        return text

    def with_rounds(self, first: int, each_other: int, asks: int) -> Estimate:
        """This estimate with the improvement rounds' most on top: ``first`` calls on the
        first model, ``each_other`` on each other model of a matrix, ``asks`` requests to
        the improve model."""
        counts = [first] + [each_other] * max(0, len(self.call_usd) - 1)
        usd = None
        if self.call_usd and None not in self.call_usd:
            usd = sum((u or 0.0) * n for u, n in zip(self.call_usd, counts, strict=True))
        return replace(self, round_calls=sum(counts), round_usd=usd, asks=asks)


def _queries(count: int) -> str:
    return f"{count} query" if count == 1 else f"{count} queries"


def combined(estimates: Sequence[Estimate]) -> Estimate:
    """A model matrix's estimate: every model's calls and dollars added up."""
    first = estimates[0]
    if len(estimates) == 1:
        return first

    def total(values: list[float | None]) -> float | None:
        return None if any(v is None for v in values) else sum(v or 0.0 for v in values)

    return Estimate(
        " and ".join(e.model for e in estimates),
        first.queries,
        sum(e.fewest_calls for e in estimates),
        sum(e.most_calls for e in estimates),
        total([e.fewest_usd for e in estimates]),
        total([e.most_usd for e in estimates]),
        call_usd=tuple(usd for e in estimates for usd in e.call_usd),
        fewest_input=sum(e.fewest_input for e in estimates),
        most_input=sum(e.most_input for e in estimates),
        stored=sum(e.stored for e in estimates),
        samplings=sum(e.samplings for e in estimates),
        per_run=max(e.per_run for e in estimates),
    )


def _room_to_grow(context: TriggerContext) -> int:
    """The tokens a request may gain in the rounds: the description tested may be proposed
    up to the longest allowed (in characters, as wide in bytes as its own are on average),
    and so may a sibling improved before it. Every sibling is counted, whatever the order:
    the bound stays an upper one, if a loose one in a large folder."""
    extra = 0
    for description in [context.description, *(s.description for s in context.siblings)]:
        size = len(description.encode("utf-8"))
        width = size / len(description) if description else 1.0
        extra += max(0, int(MAX_DESCRIPTION * max(width, 1.0)) - size) // 3
    return extra


def _room(room: dict[TriggerContext, int], context: TriggerContext) -> int:
    """A context's room to grow (see :func:`_room_to_grow`), worked out once."""
    if context not in room:
        room[context] = _room_to_grow(context)
    return room[context]


def fewest_runs(rule: Rule) -> int:
    """The runs a clear-cut query takes: every run the same, until the rule stops."""
    runs = 0
    while True:
        more = rule.next_runs(runs, 0)
        if more <= 0:
            return runs
        runs += more


def estimate_session(
    samplings: Sequence[Sampling],
    settings: Settings,
    backend: TriggerBackend,
    price: Price | None,
    to_go: Sequence[tuple[int, int]] | None = None,
) -> Estimate:
    """The range of calls and dollars of these samplings on one model (see the module): a
    context's shared prefix is written to the cache by its first request only. ``to_go``
    gives each sampling's fewest and most runs still to make (what its stored runs leave);
    without it every sampling is fresh."""
    rule = settings.rule
    fresh = (fewest_runs(rule), rule.max_runs)
    rate = rate_of(settings.batch)
    queries = stored = low_calls = high_calls = low_input = high_input = 0
    looking = 1  # the most requests a run may send
    low_usd = high_usd = dearest = 0.0
    room: dict[TriggerContext, int] = {}  # each context seen: its room to grow, once
    written: set[TriggerContext] = set()  # each context whose first request is counted
    for index, (context, query) in enumerate(samplings):
        if not context.model_invocable:  # never listed: its items make no call
            continue
        queries += 1
        low_runs, high_runs = to_go[index] if to_go is not None else fresh
        whole = backend.estimate(context, query)
        most = turn_estimate(whole, context)  # a turn's follow-ups at most, as reserved
        if price is not None:  # the rounds' dearest call, whatever the items' runs stored
            grown = replace(most, input_tokens=most.input_tokens + _room(room, context))
            dearest = max(dearest, cost_usd(grown, price) * rate)
        if not high_runs:  # decided by its stored runs
            stored += 1
            continue
        # a run judged within the turn sends a request for each round of looking around
        per_run = context.within.most_requests if context.within is not None else 1
        looking = max(looking, per_run)
        low_calls, high_calls = low_calls + low_runs, high_calls + high_runs * per_run
        own = len(query.encode("utf-8")) // 3 + 1
        prefix = max(0, whole.input_tokens - own)
        if not listing_shared(context.model or backend.model):
            prefix, own = 0, whole.input_tokens  # the listing comes after the query
        first_request = context not in written
        written.add(context)
        low_input += own * low_runs + (prefix if first_request else 0)
        high_input += most.input_tokens * high_runs
        if price is None:
            continue
        output = min(whole.output_tokens, TYPICAL_OUTPUT_TOKENS)
        cached = Usage(input_tokens=own, output_tokens=output, cache_read_input_tokens=prefix)
        low_usd += cost_usd(cached, price) * low_runs * rate
        if first_request:  # its first request writes the shared prefix to the cache
            low_usd += cost_usd(Usage(cache_creation_input_tokens=prefix), price) * rate
        high_usd += cost_usd(most, price) * high_runs * rate
    return Estimate(
        backend.model,
        queries,
        low_calls,
        high_calls,
        low_usd if price else None,
        high_usd if price else None,
        call_usd=(dearest if price else None,),
        fewest_input=low_input,
        most_input=high_input,
        stored=stored,
        samplings=queries,
        per_run=looking,
    )
