"""Pytest nodes: one collector per skill (its SKILL.md) and one item per eval entry, and what
they will sample.

An item is given what it needs when it is built: its target, its entry, and a
:class:`ResultSource` to wait on; it never reaches for the process's strategy. It waits for its
query's result in ``setup`` (so a failed API call is an *error*, a budget stop a *skip*) and
checks the verdict in ``runtest`` (a wrong trigger rate is a *failure* that explains itself).

What the items will sample is known before they are collected: the header's cost estimate
sizes every item of the session then; message batches make the items' runs ahead (in a plain
run from the items, on the xdist controller from the node ids the workers collected, as it
has the skills but no items).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_skilltrigger.model.formatting import describe_chosen, format_interval
from pytest_skilltrigger.model.outcome import routing_verdict
from pytest_skilltrigger.plugin import wire
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.skills.history import turns_of

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_skilltrigger.model.context import TriggerContext
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.model.plan import SamplingPlan
    from pytest_skilltrigger.model.settings import Settings
    from pytest_skilltrigger.plugin.pytest_internals import TerminalRepr, TracebackStyle
    from pytest_skilltrigger.plugin.setup import SkillsInPlay
    from pytest_skilltrigger.skills.catalog import Target
    from pytest_skilltrigger.skills.routing_set import RoutingEntry, RoutingSet

MARKER = "skill_trigger"


class ResultSource(Protocol):
    """Where an item gets its result: the process's item runner, seen through this one method."""

    def result_for(self, item: SamplingItem) -> QueryResult:
        """Wait for the item's result; skip or raise when no backend can run."""
        ...


def slug(text: str, limit: int = 40) -> str:
    """A readable, stable id fragment from a query."""
    words = re.findall(r"\w+", text.lower())
    out = "-".join(words)[:limit].strip("-_")
    return out or "query"


def safe_name(name: str) -> str:
    """A skill name usable in a node id: ``::``, brackets and spaces would break selection;
    a plugin's skill keeps its one ``:`` (``acme:alpha``), as the CLI lists it."""
    cleaned = re.sub(r"[^\w.:-]+", "-", name)
    return re.sub(r":{2,}", "-", cleaned).strip("-:") or "skill"


def failure_message(result: QueryResult, skill_name: str, listed: str | None = None) -> str:
    """What a failing item prints: query, expectation, what the runs settled (or that chance
    decides it: borderline), the rate with its interval, what was chosen, and the exact
    listing line the model saw for the skill."""

    expected = "trigger" if result.should_trigger else "not trigger"
    if result.unlisted:
        return f"query: {result.query!r}\nexpected {skill_name!r} to {expected}: {result.unlisted}"
    lines = [
        f"query: {result.query!r}",
        f"expected {skill_name!r} to {expected}: " + verdict_text(result),
    ]
    if result.should_trigger:
        instead = describe_chosen(result.chosen, exclude=f"skill:{skill_name}")
        lines.append(f"the model chose instead: {instead}")
    else:
        lines.append(f"the model chose: {describe_chosen(result.chosen)}")
    ways = sorted(result.paths.items(), key=lambda kv: -kv[1])
    if ways:  # --trigger-within=turn: what the runs looked at before their choice
        lines.append("the turns: " + "; ".join(f"{way} x{count}" for way, count in ways))
    if listed:
        lines.append(f"listed to the model as: {listed}")
    return "\n".join(lines)


def subfolder_line(context: TriggerContext) -> str:
    """How the session reached a subfolder's skill, and the root skill a bare name reaches."""
    sub = context.subfolder
    if sub is None:
        return ""
    if sub.started_in:
        return f"\nasked in a session started in {sub.folder}"
    line = f"\nasked at the project root; the skill is found after a Read of {sub.read_path}"
    bare = context.skill_name.rpartition(":")[2]
    if bare != context.skill_name:
        line += f" (a Skill call naming {bare!r} loads the project's own {bare!r}, not this one)"
    return line


def invoked_lines(result: QueryResult, context: TriggerContext) -> str:
    """The names the model wrote in its Skill calls that were not a skill's id, and what
    Claude Code makes of each (the skill it loads, or a refusal: no trigger)."""
    said = []
    for name, count in sorted(result.invoked_as.items(), key=lambda kv: -kv[1]):
        loaded = context.resolve(name)
        meaning = f"loads {loaded}" if loaded else "Claude Code refuses this name: no skill loads"
        said.append(f"{name!r} x{count} ({meaning})")
    return "\nthe model called the Skill tool with: " + ", ".join(said) if said else ""


def verdict_text(result: QueryResult) -> str:
    """What the runs say, with the rate's interval: settled on one side of the threshold, or
    borderline (sampled to the end without settling: chance decides each run)."""

    interval = format_interval(result.interval, result.rule.confidence)
    if result.borderline:
        return (
            f"borderline: triggered {result.triggers} of {result.runs_made} runs, {interval}: "
            "this request is decided by chance"
        )
    relation = ">=" if result.trigger_rate >= result.threshold else "<"
    text = (
        f"triggered {result.triggers}/{result.runs_made} runs, rate {result.trigger_rate:.2f} "
        f"{relation} threshold {result.threshold:.2f} ({interval})"
    )
    if result.rule.sequential:
        side = "at or above" if result.verdict == "triggered" else "below"
        text += f", settled {side} it at {result.rule.confidence:.0%}"
    return text


def trigger_item_name(
    target: Target,
    entry: EvalEntry,
    model: str | None = None,
    crowd: int | None = None,
    mode: str | None = None,
) -> str:
    """A trigger item's name, read like a parametrized test's: ``pdf[03-merge-these-pdfs]``;
    in a model matrix with the model last, ``pdf[03-merge-these-pdfs-claude-haiku-4-5]``
    (``-k haiku``, ``--lf`` and ``--deselect`` then pick a model's items); among a crowd
    with its size after that, ``pdf[03-merge-these-pdfs-crowd40]``; in another permission
    mode of a matrix with the mode last, ``pdf[03-merge-these-pdfs-plan]``."""
    params = _params(entry.index, _label(entry), model) + (f"-crowd{crowd}" if crowd else "")
    params += f"-{safe_name(mode)}" if mode else ""
    return f"{safe_name(target.name)}[{params}]"


@dataclass(frozen=True)
class Crowd:
    """The crowd sizes a session asks its queries among (``--trigger-crowd``) and the usage
    of the skill under test; ``size`` is one item's (None: no crowd)."""

    sizes: tuple[int, ...] = ()
    usage: float = 0.0
    size: int | None = None

    @classmethod
    def of(cls, settings: Settings) -> Crowd:
        """The session's crowds, as its settings give them."""
        return cls(settings.crowd_sizes, settings.crowd_usage)

    def at(self, size: int | None) -> Crowd:
        return replace(self, size=size)


@dataclass(frozen=True)
class ItemAxes:
    """What each entry is asked in, beside its skill: each model of a matrix (empty: the
    session's one, no model in the ids), alone and among each crowd size, in the session's
    permission mode and each further mode of a matrix."""

    models: tuple[str, ...] = ()
    crowd: Crowd = Crowd()
    modes: tuple[str, ...] = ()  # the modes after the session's own

    @classmethod
    def of(cls, settings: Settings) -> ItemAxes:
        return cls(tuple(settings.models), Crowd.of(settings), settings.more_modes)

    def variants(self, target: Target) -> Iterator[ItemVariant]:
        """Every item of a skill: each entry on each model (None: the session's one), alone
        and among each crowd, in the session's mode and each other; the items collected and
        the requests a controller makes ahead for them are these, named alike."""
        # a set that names its model (``model: haiku``) runs on it, outside a matrix
        for entry in target.eval_set.entries:
            for model in self.models or (target.eval_set.model,):
                for size in (None, *self.crowd.sizes):
                    for mode in (None, *self.modes):
                        name = trigger_item_name(target, entry, model, size, mode)
                        yield ItemVariant(name, entry, model, self.crowd.at(size), mode)


@dataclass(frozen=True)
class ItemVariant:
    """One trigger item of a skill: its name, its entry and where it is asked."""

    name: str
    entry: EvalEntry
    model: str | None
    crowd: Crowd
    mode: str | None

    def context(self, target: Target) -> TriggerContext:
        return item_context(target, self.entry, self.model, self.crowd, self.mode)


def item_context(
    target: Target,
    entry: EvalEntry,
    model: str | None,
    crowd: Crowd,
    mode: str | None,
) -> TriggerContext:
    """The context one trigger item samples: its skill's, among its crowd, on its model,
    after its entry's history, in its permission mode."""
    base = target.crowded(crowd.size, crowd.usage).on_model(model)
    return base.with_history(entry.history).in_mode(mode)


def _label(entry: EvalEntry) -> str:
    """What an item's id says of its entry: an official case's folder name (what its author
    calls it), else the query's first words."""
    case_dir = entry.extra.get("case_dir")
    return os.path.basename(str(case_dir)) if case_dir else entry.query


def one_line(text: str, limit: int = 100) -> str:
    """A query as a header shows it: on one line (a multi-line prompt's lines joined), cut
    to ``limit`` characters."""
    folded = " ".join(text.split())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def routing_item_name(entry: RoutingEntry, model: str | None = None) -> str:
    """A routing item's name, ``routing[01-tidy-my-sheet]``; in a model matrix with the model
    last, as a trigger item's."""
    return f"routing[{_params(entry.index, entry.query, model)}]"


def _params(index: int, query: str, model: str | None) -> str:
    """An item's parameters: its entry's number and query, and its model in a matrix."""
    return f"{index:02d}-{slug(query)}" + (f"-{safe_name(model)}" if model else "")


def routing_request(
    routing: RoutingSet,
    contexts: dict[str, TriggerContext],
    entry: RoutingEntry,
    plan: SamplingPlan,
    model: str | None = None,
) -> tuple[TriggerContext, EvalEntry, SamplingPlan]:
    """What a routing entry samples on ``model`` (its item's, and a batch's before the items
    run)."""

    # a context of a skill the model is shown (the listing is the folder's in every one)
    listed = [c for c in contexts.values() if c.model_invocable]
    shown = (listed[0] if listed else next(iter(contexts.values()))).on_model(model)
    expected = entry.expected_skill
    if expected is not None:
        sample = EvalEntry(entry.index, entry.query, should_trigger=True)
        if expected in contexts:
            # the expected skill's own context: its trigger rate is the verdict, so the runs
            # stop as its items' do (and are shared with them)
            return contexts[expected].on_model(model), sample, plan
        # a skill without items of its own (no eval set): its choices count
        return shown, sample, replace(plan, trigger_choices=frozenset({f"skill:{expected}"}))
    # no skill expected: a run counts when it chose any skill of the folder, and the query
    # passes when that settles below the threshold
    sample = EvalEntry(entry.index, entry.query, should_trigger=False)
    choices = frozenset(f"skill:{s}" for s in routing.skills)
    return shown, sample, replace(plan, trigger_choices=choices)


class BackendRequiredError(Exception):
    """No backend is available and --trigger-require-backend forbids skipping."""


class TriggerRunError(Exception):
    """A run failed after retries: the item errors instead of counting a miss."""


class TriggerMismatch(Exception):
    """The trigger rate is on the wrong side of the threshold."""


class SkillFile(pytest.File):
    """The collector for one skill; ``path`` is its SKILL.md."""

    def __init__(
        self,
        *,
        target: Target,
        source: ResultSource,
        soft_misses: bool,
        axes: ItemAxes,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.source = source
        self.soft_misses = soft_misses
        self.axes = axes

    def collect(self) -> Iterator[TriggerItem]:
        """One item per entry (and per model of a matrix), with the id of a parametrized
        test (``skill[params]``), so ``--lf``, ``--ff``, ``--sw``, ``--deselect`` and ``-k``
        treat it as one."""
        for variant in self.axes.variants(self.target):
            yield TriggerItem.from_parent(
                self,
                name=variant.name,
                nodeid=f"{self.nodeid}::{variant.name}",  # parsed by pytest as name, params
                entry=variant.entry,
                target=self.target,
                source=self.source,
                soft_misses=self.soft_misses,
                model=variant.model,
                crowd=variant.crowd,
                mode=variant.mode,
            )


class SamplingItem(pytest.Item):
    """An item whose verdict comes from sampling one query: it waits for the result in
    ``setup`` (a failed API call is an *error*, a budget stop a *skip*) and checks it in
    ``runtest``. Subclasses say what to sample and what a result means."""

    def __init__(self, *, source: ResultSource, soft_misses: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.soft_misses = soft_misses
        self.result: QueryResult | None = None
        self.add_marker(MARKER)

    def request(self, plan: SamplingPlan) -> tuple[TriggerContext, EvalEntry, SamplingPlan]:
        """What to sample: the context, the entry and the plan (from the session's)."""
        raise NotImplementedError

    def failure(self, result: QueryResult) -> str | None:
        """Why the result fails the item, or None when it passes."""
        raise NotImplementedError

    def record(self, context_key: str | None) -> wire.Record:
        """The item's result as it crosses to the controller."""
        raise NotImplementedError

    def setup(self) -> None:
        self.result = self.source.result_for(self)
        if self.result.skipped:
            pytest.skip(self.result.skipped)
        if self.result.errors:
            raise TriggerRunError(self.result.error)

    def runtest(self) -> None:
        assert self.result is not None  # setup either set it or did not let runtest happen
        message = self.failure(self.result)
        if message is not None:
            if self.soft_misses:
                pytest.xfail(message.replace("\n", "; "))
            raise TriggerMismatch(message)

    def short_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str | None:
        """The failure in our own words (a wrong rate, a failed run), or None for any other
        exception, which keeps pytest's traceback."""
        if isinstance(excinfo.value, TriggerMismatch):
            return str(excinfo.value)
        if isinstance(excinfo.value, TriggerRunError):
            query = self.result.query if self.result is not None else "?"
            return f"query: {query!r}\ntrigger run failed: {excinfo.value}"
        return None

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: TracebackStyle | None = None,
    ) -> str | TerminalRepr:
        short = self.short_failure(excinfo)
        return short if short is not None else super().repr_failure(excinfo, style=style)


class TriggerItem(SamplingItem):
    """One eval entry: its verdict is the trigger-rate threshold check.

    ``soft_misses`` (an accuracy gate is set) turns a single miss into an xfail: the gate,
    not each query, decides the session.
    """

    def __init__(
        self,
        *,
        entry: EvalEntry,
        target: Target,
        model: str | None = None,
        crowd: Crowd = Crowd(),
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.entry = entry
        self.target = target
        self.model = model  # its model in a matrix (None: the session's one model)
        self.crowd = crowd  # its crowd size, if any (``crowd.size``)
        self.mode = mode  # its permission mode in a matrix (None: the session's own)

    def request(self, plan: SamplingPlan) -> tuple[TriggerContext, EvalEntry, SamplingPlan]:
        context = item_context(self.target, self.entry, self.model, self.crowd, self.mode)
        return context, self.entry, plan

    def record(self, context_key: str | None) -> wire.Record:
        assert self.result is not None  # only decided items are recorded
        return wire.ItemRecord(
            self.target.skill.skill_md,
            self.entry.index,
            context_key,
            self.model,
            self.result,
            self.crowd.size,
            self.mode,
        )

    def failure(self, result: QueryResult) -> str | None:
        if result.passed:
            return None
        listed = None
        # the context this item sampled: a name resolves against its crowd's listing
        context = item_context(self.target, self.entry, self.model, self.crowd, self.mode)
        if self.config.get_verbosity() > 0:  # the skill's summary names it once otherwise
            listed = context.tested.line if context.model_invocable else None
        # the name the runs' choices are read against (a subfolder's skill's may be scoped)
        message = failure_message(result, context.skill_name, listed)
        case_dir = self.entry.extra.get("case_dir")
        if case_dir:
            message = f"claude plugin eval case: {case_dir}\n{message}"
        if self.entry.history is not None:
            turns = len(turns_of(self.entry.history))
            message += f"\nasked after {turns} earlier turn(s) (the entry's history)"
        return message + subfolder_line(context) + invoked_lines(result, context)

    def reportinfo(self) -> tuple[str, int | None, str]:
        case_dir = self.entry.extra.get("case_dir")
        case = f" (case {case_dir})" if case_dir else ""
        return self.target.eval_set.path, None, f"{self.name}{case}: {one_line(self.entry.query)}"


class RoutingFile(pytest.File):
    """The collector for a folder's routing eval set."""

    def __init__(
        self,
        *,
        routing: RoutingSet,
        contexts: dict[str, TriggerContext],
        source: ResultSource,
        soft_misses: bool,
        models: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.routing = routing
        self.contexts = contexts
        self.source = source
        self.soft_misses = soft_misses
        self.models = models  # the matrix (): one model, no model in the ids)

    def collect(self) -> Iterator[RoutingItem]:
        for entry in self.routing.entries:
            for model in self.models or (None,):
                name = routing_item_name(entry, model)
                yield RoutingItem.from_parent(
                    self,
                    name=name,
                    nodeid=f"{self.nodeid}::{name}",
                    entry=entry,
                    routing=self.routing,
                    contexts=self.contexts,
                    source=self.source,
                    soft_misses=self.soft_misses,
                    model=model,
                )


class RoutingItem(SamplingItem):
    """One routing entry: the expected skill must be the one chosen first in at least the
    threshold's share of the runs; for ``null``, no project skill may reach it."""

    def __init__(
        self,
        *,
        entry: RoutingEntry,
        routing: RoutingSet,
        contexts: dict[str, TriggerContext],
        model: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.routing_entry = entry
        self.routing = routing
        self.contexts = contexts
        self.model = model  # its model in a matrix (None: the session's one model)

    def request(self, plan: SamplingPlan) -> tuple[TriggerContext, EvalEntry, SamplingPlan]:
        return routing_request(self.routing, self.contexts, self.routing_entry, plan, self.model)

    def failure(self, result: QueryResult) -> str | None:
        expected = self.routing_entry.expected_skill
        if routing_verdict(expected, result):
            return None
        wanted = (
            f"{expected!r} chosen first in at least {result.threshold:g} of the runs"
            if expected is not None
            else f"no skill of the folder chosen in {result.threshold:g} of the runs or more"
        )
        return (
            f"query: {result.query!r}\nexpected {wanted}; over {result.runs_made} runs the model "
            f"chose: {describe_chosen(result.chosen)}\n{verdict_text(result)}"
        )

    def record(self, context_key: str | None) -> wire.Record:
        assert self.result is not None  # only decided items are recorded
        return wire.RoutingRecord(
            self.routing.path, self.routing_entry.index, context_key, self.model, self.result
        )

    def reportinfo(self) -> tuple[str, int | None, str]:
        return self.routing.path, None, f"{self.name}: {one_line(self.routing_entry.query)}"


# -- what the items will sample -----------------------------------------------------------

Request = tuple["TriggerContext", "EvalEntry", "SamplingPlan"]


def requests_of_items(items: Iterable[pytest.Item], plan: SamplingPlan) -> list[Request]:
    """What the collected items will sample (a plain run's)."""
    return [item.request(plan) for item in items if isinstance(item, SamplingItem)]


class SessionRequests:
    """What the items of the session's skills will sample, found by the item names the
    collected items are given (once per model of a matrix)."""

    def __init__(self, skills: SkillsInPlay, axes: ItemAxes = ItemAxes()) -> None:
        self.skills = skills
        self.axes = axes
        self.models: Sequence[str | None] = axes.models or (None,)

    def of_ids(self, ids: Sequence[str], root: Path, plan: SamplingPlan) -> list[Request]:
        """What the items with these node ids will sample (the xdist controller's, which has
        the skills but no items): each id's file is a skill's SKILL.md or a routing eval set,
        read from ``root``, and its name the item name built from the same entry."""
        by_file: dict[str, dict[str, Request]] = {}
        requests: list[Request] = []
        for nodeid in ids:
            file, _, name = nodeid.partition("::")
            path = os.path.abspath(os.path.join(root, file))
            if path not in by_file:
                by_file[path] = self._named(path, plan)
            request = by_file[path].get(name)
            if request is not None:
                requests.append(request)
        return requests

    def of_session(
        self, plan: SamplingPlan, keep: Callable[[str], bool] | None = None
    ) -> list[Request]:
        """What every item of the session will sample, known before collection (the
        header's estimate): each skill's entries and each routing entry (those of the
        files ``keep`` keeps: a change's)."""
        paths = [*self.skills.by_skill_md, *self.skills.by_routing_path]
        paths = [path for path in paths if keep is None or keep(path)]
        return [request for path in paths for request in self._named(path, plan).values()]

    def _named(self, path: str, plan: SamplingPlan) -> dict[str, Request]:
        target = self.skills.by_skill_md.get(path)
        if target is not None:
            return {v.name: (v.context(target), v.entry, plan) for v in self.axes.variants(target)}
        routing = self.skills.by_routing_path.get(path)
        if routing is None:
            return {}
        contexts = self.skills.routing_contexts(routing)
        return {
            routing_item_name(e, m): routing_request(routing, contexts, e, plan, m)
            for e in routing.entries
            for m in self.models
        }
