"""What one run and one sampled query produced, as plain values.

These records cross process boundaries (xdist reports, the SQLite store, the JSON report), so
each has ``to_dict`` / ``from_dict`` using only JSON-able builtins.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.formatting import chosen_label
from pytest_skilltrigger.model.stats import prob_at_least
from pytest_skilltrigger.model.turn import path_text
from pytest_skilltrigger.model.verdict import Rule, Verdict, rule_from_dict

Status = Literal["triggered", "not_triggered", "error"]

BUDGET_REACHED = "cost budget"  # how a skip for the budget starts


def new_run_id() -> str:
    """A run's identity, given when it is made: the store keeps it, and a verdict names the
    runs it used by it, whichever process made them and in whatever order they were stored."""
    return uuid.uuid4().hex


TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_1h_input_tokens",
)


@dataclass(frozen=True)
class Usage:
    """Token usage of one or more calls; added up for items, skills and the session."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0  # every cache write, whatever its lifetime
    cache_read_input_tokens: int = 0
    # of the cache writes, those kept for an hour (priced higher than the 5-minute ones)
    cache_creation_1h_input_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """The request's whole prompt, cached or not (what a long-prompt price tier reads)."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, k) + getattr(other, k) for k in TOKEN_KEYS))

    def to_dict(self) -> dict[str, int]:
        return {k: int(getattr(self, k)) for k in TOKEN_KEYS}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Usage:
        """Our own dict, or the API's ``usage`` (whose 1-hour writes are nested under
        ``cache_creation``)."""
        data = dict(data or {})
        nested = data.get("cache_creation")
        if "cache_creation_1h_input_tokens" not in data and isinstance(nested, dict):
            data["cache_creation_1h_input_tokens"] = nested.get("ephemeral_1h_input_tokens")
        return cls(*(int(data.get(k) or 0) for k in TOKEN_KEYS))


@dataclass(frozen=True)
class RunOutcome:
    """The result of asking the model once.

    ``chosen`` says what the model did first: ``skill:<name>``, ``tool:<Name>`` or ``text``
    (``None`` when the run failed). An error is never a miss: ``status == "error"`` carries the
    message and is kept apart from triggered / not_triggered everywhere.
    """

    status: Status
    chosen: str | None = None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None
    request_id: str | None = None
    fatal: bool = False
    from_store: bool = False
    # API requests the run made (retries, a CLI's follow-ups): all counted, and all paid for
    # but an errored batch request, which is not billed (its usage is empty)
    requests: int = 1
    model: str | None = None  # the model that answered, when the backend learns it
    # made in a message batch (priced at the batch rate, counted by the process that ran it)
    batch: bool = False
    # seconds the run waited for the rate limit to let it through, and the 429s it met
    waited: float = 0.0
    rate_limited: int = 0
    # the name the model wrote in its Skill call when it is not the id of the skill it
    # loads (a bare name, an alias), or a name Claude Code refuses (``chosen`` keeps it)
    invoked_as: str | None = None
    # who the run is, not what it says: two runs that read the same are still equal
    run_id: str = field(default_factory=new_run_id, compare=False)
    # the read-only calls the run went through before its choice (``--trigger-within=turn``),
    # in words: ("read README.md",)
    path: tuple[str, ...] = ()

    @property
    def triggered(self) -> bool:
        return self.status == "triggered"

    @classmethod
    def of_choice(cls, chosen: str, context: TriggerContext, **details: Any) -> RunOutcome:
        """A decided run: triggered when the model's first choice loads the context's skill.

        A Skill call is read as Claude Code reads it (:meth:`TriggerContext.resolve`):
        ``chosen`` becomes ``skill:<id>`` of the skill it loads, whatever name the model
        wrote, so that runs read the same for every skill of the listing."""
        kind, _, called = chosen.partition(":")
        invoked_as = None
        if kind == "skill":
            loaded = context.resolve(called)
            invoked_as = called if loaded != called else None
            chosen = f"skill:{loaded or called}"
        status: Status = "triggered" if chosen == f"skill:{context.skill_name}" else "not_triggered"
        return cls(status, chosen=chosen, invoked_as=invoked_as, **details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "chosen": self.chosen,
            "usage": self.usage.to_dict(),
            "error": self.error,
            "request_id": self.request_id,
            "fatal": self.fatal,
            "from_store": self.from_store,
            "requests": self.requests,
            "model": self.model,
            "batch": self.batch,
            "waited": self.waited,
            "rate_limited": self.rate_limited,
            "invoked_as": self.invoked_as,
            "run_id": self.run_id,
            **({"path": list(self.path)} if self.path else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOutcome:
        return cls(
            status=data["status"],
            chosen=data.get("chosen"),
            usage=Usage.from_dict(data.get("usage")),
            error=data.get("error"),
            request_id=data.get("request_id"),
            fatal=bool(data.get("fatal")),
            from_store=bool(data.get("from_store")),
            requests=int(data.get("requests", 1)),
            model=data.get("model"),
            batch=bool(data.get("batch")),
            waited=float(data.get("waited") or 0.0),
            rate_limited=int(data.get("rate_limited") or 0),
            invoked_as=data.get("invoked_as"),
            run_id=str(data.get("run_id") or new_run_id()),
            path=tuple(str(step) for step in data.get("path") or ()),
        )


@dataclass(frozen=True)
class QueryResult:
    """All runs of one eval entry against one description, and its verdict.

    ``runs_made`` counts the runs actually made (the rule stops as soon as it can); ``error`` is
    set when any run failed, in which case there is no verdict. Under the sequential rule a
    query that ran to its maximum (or could no longer be decided) undecided is *borderline*:
    it does not pass, and says so.
    """

    query: str
    should_trigger: bool
    rule: Rule
    outcomes: tuple[RunOutcome, ...]
    skipped: str | None = None
    # why the model never sees the skill (it is not listed): no run is made, and the verdict
    # is what never triggering gives
    unlisted: str | None = None
    # the runs belong to another caller's sampling of the same query (see the sampler): they
    # are counted and stored once, through that caller's result
    shared: bool = False
    # the choices that count as a trigger, when not the context's own skill (see SamplingPlan)
    trigger_choices: frozenset[str] | None = None
    # which sampling of its request made it (the skill its runs count for, and the plan): the
    # store keeps the runs each sampling used under it, so a rerun reads the same ones
    sampling: str | None = None

    @property
    def threshold(self) -> float:
        return self.rule.threshold

    @cached_property
    def runs_made(self) -> int:
        """The runs made that decided something (errored ones are not runs of the rate)."""
        return sum(1 for o in self.outcomes if o.status != "error")

    @cached_property
    def triggers(self) -> int:
        if self.trigger_choices is not None:
            return sum(
                1 for o in self.outcomes if o.status != "error" and o.chosen in self.trigger_choices
            )
        return sum(1 for o in self.outcomes if o.triggered)

    @cached_property
    def errors(self) -> int:
        return sum(1 for o in self.outcomes if o.status == "error")

    @cached_property
    def error(self) -> str | None:
        for o in self.outcomes:
            if o.status == "error":
                return o.error or "unknown error"
        return None

    @cached_property
    def trigger_rate(self) -> float:
        return self.triggers / self.runs_made if self.runs_made else 0.0

    @cached_property
    def interval(self) -> tuple[float, float]:
        """The trigger rate's interval at the rule's confidence (Wilson)."""
        return self.rule.interval(self.triggers, self.runs_made)

    @cached_property
    def verdict(self) -> Verdict:
        """What the runs say, or ``undecided`` (also when the query errored or was skipped)."""
        if self.errors or self.skipped or not self.runs_made:
            return "undecided"
        return self.rule.verdict(self.triggers, self.runs_made)

    @property
    def decided(self) -> bool:
        """Whether the runs settle which side of the threshold the rate is on."""
        return self.verdict != "undecided"

    @property
    def borderline(self) -> bool:
        """Sampled to the end without a decision: chance decides each run of this query."""
        return (
            not (self.errors or self.skipped or self.unlisted)
            and self.runs_made > 0
            and (not self.decided)
        )

    @cached_property
    def passed(self) -> bool | None:
        """The verdict against what is expected: None when the query errored or was skipped;
        False when borderline (it is not reliably what it should be)."""
        if self.unlisted:
            return not self.should_trigger
        if self.errors or self.skipped or not self.runs_made:
            return None
        if not self.decided:
            return False
        return (self.verdict == "triggered") == self.should_trigger

    @property
    def status(self) -> str:
        """One word for the result, the same in every report: ``skipped`` or ``error`` (no
        verdict, and neither is a miss; a skip first, as the item reports it), then
        ``borderline``, ``pass`` or ``fail``; ``none`` for a query that made no run."""
        if self.skipped:
            return "skipped"
        if self.errors:
            return "error"
        if self.borderline:
            return "borderline"
        return {True: "pass", False: "fail", None: "none"}[self.passed]

    @cached_property
    def right_probability(self) -> float:
        """How likely the query's true rate is on the side it should be, given its runs (the
        rate's posterior under a uniform prior): what the optimizer's scores add up."""
        if self.unlisted:
            return 0.0 if self.should_trigger else 1.0
        above = prob_at_least(self.triggers, self.runs_made, self.threshold)
        return above if self.should_trigger else 1.0 - above

    @cached_property
    def chosen(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for o in self.outcomes:
            if o.chosen:
                counts[o.chosen] = counts.get(o.chosen, 0) + 1
        return counts

    @cached_property
    def paths(self) -> dict[str, int]:
        """The way each run that looked around first went, in words, with how many runs
        went it (``--trigger-within=turn``): ``read README.md, then chose tool Bash``."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            if o.path and o.chosen:
                way = path_text(o.path, chosen_label(o.chosen))
                counts[way] = counts.get(way, 0) + 1
        return counts

    @cached_property
    def invoked_as(self) -> dict[str, int]:
        """The names the model wrote in Skill calls that are not the ids of what they load
        (or that Claude Code refuses), with how many runs wrote each."""
        counts: dict[str, int] = {}
        for o in self.outcomes:
            if o.invoked_as:
                counts[o.invoked_as] = counts.get(o.invoked_as, 0) + 1
        return counts

    @cached_property
    def usage(self) -> Usage:
        """Tokens this result cost now: stored runs and a shared sampling's runs are free
        here (the shared ones are paid for through the first caller's result)."""
        total = Usage()
        if self.shared:
            return total
        for o in self.outcomes:
            if not o.from_store:
                total = total + o.usage
        return total

    @property
    def over_budget(self) -> bool:
        """Skipped because the cost budget was reached (no call was made for it)."""
        return bool(self.skipped and self.skipped.startswith(BUDGET_REACHED))

    @cached_property
    def calls(self) -> int:
        """API requests this result cost now: every attempt of every run, failed ones too
        (stored runs and a shared sampling's runs are free here)."""
        if self.shared:
            return 0
        return sum(o.requests for o in self.outcomes if not o.from_store)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "should_trigger": self.should_trigger,
            "rule": self.rule.to_dict(),
            "outcomes": [o.to_dict() for o in self.outcomes],
            "skipped": self.skipped,
            "unlisted": self.unlisted,
            "shared": self.shared,
            "trigger_choices": sorted(self.trigger_choices)
            if self.trigger_choices is not None
            else None,
            "sampling": self.sampling,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QueryResult:
        trigger_choices = data.get("trigger_choices")
        return cls(
            query=data["query"],
            should_trigger=bool(data["should_trigger"]),
            rule=rule_from_dict(data["rule"]),
            outcomes=tuple(RunOutcome.from_dict(o) for o in data["outcomes"]),
            skipped=data.get("skipped"),
            unlisted=data.get("unlisted"),
            shared=bool(data.get("shared")),
            trigger_choices=frozenset(trigger_choices) if trigger_choices is not None else None,
            sampling=data.get("sampling"),
        )

    def summary_row(self) -> dict[str, Any]:
        """The per-query row of the JSON report (the reference tool's keys plus ours)."""
        low, high = self.interval
        return {
            "query": self.query,
            "should_trigger": self.should_trigger,
            "trigger_rate": round(self.trigger_rate, 4),
            "interval": [round(low, 4), round(high, 4)],
            "triggers": self.triggers,
            "runs": self.runs_made,
            "pass": self.passed,
            "decided": self.decided,
            "borderline": self.borderline,
            "errors": self.errors,
            "error": self.error,
            "skipped": self.skipped,
            "chosen": self.chosen,
            "invoked_as": self.invoked_as,
            "paths": self.paths,
        }


def routing_verdict(expected: str | None, result: QueryResult) -> bool | None:
    """Whether a routing entry passed: the expected skill settled as chosen first (the
    result is sampled in its context), or with no skill expected, the folder's skills
    together settled below the threshold (the result counts any of them as a trigger). A
    borderline entry does not pass; None when the result has no verdict (an error, a skip)."""
    if result.errors or result.skipped or not result.runs_made:
        return None
    return result.verdict == ("triggered" if expected is not None else "not_triggered")


def passed(results: Sequence[QueryResult]) -> int:
    """How many of these queries passed (errored or skipped ones did not)."""
    return sum(1 for r in results if r.passed)


def format_score(results: Sequence[QueryResult]) -> str:
    """A set's score as the reference writes it: ``passed/total``."""
    return f"{passed(results)}/{len(results)}"


@dataclass(frozen=True)
class TriggerCheck:
    """What an ad-hoc check of one query returns (the ``skill_trigger`` fixture's value):
    ``triggered`` only when the runs decide that it triggers (a borderline query is neither
    triggered nor reliably not)."""

    rate: float
    triggers: int
    runs: int
    triggered: bool
    chosen: dict[str, int]
    interval: tuple[float, float] = (0.0, 1.0)
    decided: bool = True
    borderline: bool = False

    @classmethod
    def from_result(cls, result: QueryResult) -> TriggerCheck:
        return cls(
            rate=result.trigger_rate,
            triggers=result.triggers,
            runs=result.runs_made,
            triggered=result.verdict == "triggered",
            chosen=dict(result.chosen),
            interval=result.interval,
            decided=result.decided,
            borderline=result.borderline,
        )
