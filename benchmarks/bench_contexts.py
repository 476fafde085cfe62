"""The sessions where skills really trigger, side by side: one skill's 20 queries asked in an
empty session, after a six-turn history, and among 10, 20 and 40 installed rivals, on two
models, against the stand-in API (50 ms of latency, 8 in flight), through the engine as a
library user calls it.

Per context and model it prints the calls (counted on the server), the wall time, the input
tokens and cache reads per run, and the client CPU per call; then the crowd curve (recall and
precision against the crowd's size, with their intervals, and how the skill was listed).
Target: a context's client CPU per call and wall time per call within 1.2x of the empty
context's, apart from sending the larger request (the stand-in answers in the same time).
CPU and wall time are each the median of five sessions (each repetition runs every context
once), tokens those of the first (a cold prompt cache), after a warm-up session on a context
of its own (the SDK's import and first connection). ``--quick``: 10 queries.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from _common import ROOT, bench_parser, emit, target_row

sys.path.insert(0, str(ROOT))
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.listing_budget import fit_of
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.model.stats import wilson
from pytest_skilltrigger.skills.evalset import EvalEntry
from pytest_skilltrigger.skills.history import history_text
from pytest_skilltrigger.skills.rivals import crowd_context, rivals
from tests.fake_messages_api import FakeMessagesAPI

MODELS = ("claude-opus-5-5", "claude-haiku-4-5")
DESCRIPTION = (
    "Reconcile ledgers: match payments to invoices, flag duplicates and report what is left "
    "over. Use when the user has bank exports, payment lists or invoices to match up."
)
REPEATS = 5
POSITIVE = "reconcile the payments in ledger {i} against the open invoices"
NEGATIVE = "write a short poem about autumn number {i}"
TURNS = [
    {"role": "user", "content": "I run the books for a small bakery."},
    {"role": "assistant", "content": "Happy to help with the bakery's books. What is up?"},
    {"role": "user", "content": "We switched banks in March and the exports look different."},
    {"role": "assistant", "content": "Bank exports vary a lot. Do you have one at hand?"},
    {"role": "user", "content": "Yes, a CSV of all of March and April."},
    {"role": "assistant", "content": "Good. Tell me what you would like to do with it."},
]


@dataclass
class Row:
    context: str
    model: str
    calls: int
    wall: float
    cpu: float
    input_tokens: float
    cache_reads: float
    hits: int
    wanted: int
    false_alarms: int
    listed: str  # how the skill was listed: full, cut, bare
    errors: int = 0

    @property
    def per_call(self) -> tuple[float, float]:
        calls = max(1, self.calls)
        return self.cpu / calls, self.wall / calls


def entries(count: int) -> list[EvalEntry]:
    found = []
    for i in range(count):
        positive = i % 2 == 0
        text = (POSITIVE if positive else NEGATIVE).format(i=i)
        found.append(EvalEntry(i, text, positive))
    return found


def contexts(base: TriggerContext) -> dict[str, TriggerContext]:
    return {
        "empty": base,
        "history, 6 turns": base.with_history(history_text(TURNS)),
        **{f"crowd {n}": crowd_context(base, n) for n in (10, 20, 40)},
    }


def one(api: FakeMessagesAPI, name: str, context: TriggerContext, model: str, queries: int) -> Row:
    settings = Settings(
        model=model, min_runs=1, confidence=None, cache_mode="off", concurrency=8
    ).validated()
    before = dict(api.stats)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with TriggerSession(settings) as session:
        results = session.evaluate(context, entries(queries))
        spend = session.spending()["items"]
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    calls = api.stats["calls"] - before.get("calls", 0)
    usage = spend.usage
    decided = [r for r in results if r.passed is not None]
    listed = fit_of(context, model).shown_in(context)
    return Row(
        name,
        model,
        calls,
        wall,
        cpu,
        (usage.input_tokens + usage.cache_creation_input_tokens) / max(1, calls),
        usage.cache_read_input_tokens / max(1, calls),
        sum(1 for r in decided if r.should_trigger and r.passed),
        sum(1 for r in decided if r.should_trigger),
        sum(1 for r in decided if not r.should_trigger and r.verdict == "triggered"),
        listed,
        sum(1 for r in results if r.errors),
    )


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    queries = 10 if args.quick else 20
    base = TriggerContext("ledger-reconciler", DESCRIPTION)
    catalog = rivals()
    domains = {domain for domain, _name, _text in catalog}
    print(f"rival catalog: {len(catalog)} descriptions, {len(domains)} domains")
    rows: list[Row] = []
    with FakeMessagesAPI(latency=0.05) as api:
        os.environ["ANTHROPIC_BASE_URL"] = api.url
        os.environ["ANTHROPIC_API_KEY"] = "test-key"  # the key the stand-in takes
        # the SDK's import and first connection, on a context of its own (the measured
        # ones start with a cold prompt cache)
        one(api, "warm-up", TriggerContext("warm-up", "Warm up."), MODELS[0], 4)
        # each repetition runs every context once, so what the machine does meanwhile falls
        # on all of them alike
        measured = [
            (model, name, context) for model in MODELS for name, context in contexts(base).items()
        ]
        repeats: dict[tuple[str, str], list[Row]] = {}
        for _ in range(REPEATS):
            for model, name, context in measured:
                repeats.setdefault((model, name), []).append(
                    one(api, name, context, model, queries)
                )
        for found in repeats.values():
            rows.append(typical(found))
            print_row(rows[-1])
    print_curve(rows)
    print_targets(rows)
    wrong = [r for r in rows if r.calls != queries or r.errors]
    for row in wrong:
        print(
            f"  !! {row.model} {row.context}: {row.calls} calls for {queries} queries, "
            f"{row.errors} errored"
        )
    return 1 if wrong else 0


def typical(repeats: list[Row]) -> Row:
    """A context's figures: the median of its sessions' CPU and wall time, each on its own,
    and the tokens of its first session (the cache cold, as a first run meets it)."""
    first = repeats[0]
    return replace(
        first,
        cpu=sorted(r.cpu for r in repeats)[len(repeats) // 2],
        wall=sorted(r.wall for r in repeats)[len(repeats) // 2],
    )


def print_row(row: Row) -> None:
    cpu, wall = row.per_call
    print(
        f"{row.model:17s} {row.context:17s}: {row.calls} calls, wall {row.wall:.2f}s "
        f"({wall * 1000:.0f} ms a call), client CPU {cpu * 1000:.1f} ms a call, "
        f"{row.input_tokens:,.0f} input tokens (uncached and cache writes) and "
        f"{row.cache_reads:,.0f} cache reads a run (first session)",
        flush=True,
    )


def _share(hits: int, total: int) -> str:
    if not total:
        return "n/a"
    low, high = wilson(hits, total)
    return f"{hits / total:.0%} ({low:.0%}–{high:.0%})"


def print_curve(rows: list[Row]) -> None:
    print("crowd curve (recall, precision; 95% intervals):")
    for row in rows:
        if row.context.startswith("crowd") or row.context == "empty":
            triggered = row.hits + row.false_alarms
            print(
                f"  {row.model:17s} {row.context:9s}: recall {_share(row.hits, row.wanted)}, "
                f"precision {_share(row.hits, triggered)}, the skill listed {row.listed}"
            )


def print_targets(rows: list[Row]) -> None:
    worst_cpu = worst_wall = 0.0
    for model in MODELS:
        empty = next(r for r in rows if r.model == model and r.context == "empty")
        for row in rows:
            if row.model == model and row is not empty:
                worst_cpu = max(worst_cpu, row.per_call[0] / empty.per_call[0])
                worst_wall = max(worst_wall, row.per_call[1] / empty.per_call[1])
    targets: list[dict[str, Any]] = [
        target_row("contexts: client CPU per call / the empty context's", worst_cpu, 1.2, "x"),
        target_row("contexts: wall per call / the empty context's", worst_wall, 1.2, "x"),
    ]
    emit(targets)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
