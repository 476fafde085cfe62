"""The engine's batch path without pytest: a whole message decided by the first-choice rule,
the batch request built from the live one, the waves of a library session, the runs handed
to workers, and the batch rate."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.api.message_batches import DECISION_MAX_TOKENS, batch_params
from pytest_skilltrigger.backends.first_choice import StreamError, decide_message
from pytest_skilltrigger.engine.cost_guard import CostGuard
from pytest_skilltrigger.engine.exchange import SessionExchange
from pytest_skilltrigger.engine.run_sources.batches import BatchProgress
from pytest_skilltrigger.engine.sampler import RunsAhead
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.engine.share import ProcessShare
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.model.prices import BATCH_RATE, Calls, cost_usd, price_of
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.skills.catalog import Target, load_targets
from pytest_skilltrigger.skills.history import history_text
from tests.fake_messages_api import FakeMessagesAPI
from tests.plugin.test_items import _sdk_warmed_up, entry, make_skill  # noqa: F401

THINK = {"type": "thinking", "thinking": "...", "signature": "x"}
PREAMBLE = {"type": "text", "text": "Let me look."}


def skill(name: str) -> dict:
    return {"type": "tool_use", "id": "t", "name": "Skill", "input": {"skill": name}}


@pytest.mark.parametrize(
    ("content", "stop", "chosen"),
    [
        ([THINK, PREAMBLE, skill("pdf")], "tool_use", "skill:pdf"),
        (
            [THINK, {"type": "tool_use", "id": "t", "name": "Bash", "input": {}}, skill("pdf")],
            "tool_use",
            "tool:Bash",
        ),
        ([THINK, PREAMBLE], "end_turn", "text"),
        ([THINK, PREAMBLE], "max_tokens", None),  # cut before any tool call: undecided
        (
            [THINK, {"type": "tool_use", "id": "t", "name": "Skill", "input": {}}],
            "max_tokens",
            None,
        ),  # cut inside the Skill call: which skill is unknown
        ([skill("pdf")], "max_tokens", "skill:pdf"),  # the call was complete
    ],
)
def test_a_whole_message_is_decided_by_its_first_tool_call(
    content: list[dict], stop: str, chosen: str | None
) -> None:
    decision = decide_message(content, stop, Usage(1, 2))
    assert (decision.chosen if decision else None) == chosen


def test_a_batch_answer_with_no_block_is_an_error_never_a_miss(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """An answer with no content block decides nothing, in a batch as in a stream: the
    runs error (and are sent again), none reads as "did not trigger"."""
    for content in ([], [THINK]):  # thinking alone is no answer, as in a stream
        with pytest.raises(StreamError, match="no text and no tool call"):
            decide_message(content, "end_turn", Usage(1, 0))
    queries = [("tidy csv one", ["empty"])]
    results, _session = sample_once(
        fake_api, alpha_target(tmp_path, queries), queries, batch=True, confidence=None
    )
    (result,) = results
    assert result.triggers == 0 and result.errors and "no text and no tool call" in result.error


def test_an_entry_with_a_history_is_made_ahead_as_it_is_asked(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The runs made ahead in batches are those of the entry after its history: sampling it
    then makes no live call (it was paid twice when the batch asked it without)."""
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello."}]
    target = alpha_target(tmp_path, [("tidy csv one", ["skill:alpha"])])
    entries = [replace(e, history=history_text(turns)) for e in target.eval_set.entries]
    fake_api.script("tidy csv one", ["skill:alpha"])
    session = TriggerSession(Settings(cache_mode="off", batch=True, batch_poll=0.01))
    try:
        context = target.context()
        session.sample_ahead([(context, e, session.plan) for e in entries])
        (result,) = session.evaluate(context, entries)
    finally:
        session.close()
    assert result.passed and result.runs_made == fake_api.stats["batch_requests"]
    assert fake_api.stats["trigger_calls"] == 0  # no live call


def test_the_batch_request_is_the_live_one_unstreamed_and_capped() -> None:
    body = {
        "model": "m",
        "max_tokens": 32000,
        "stream": True,
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "q"}],
    }
    params = batch_params(body)
    assert "stream" not in params
    assert params["max_tokens"] == DECISION_MAX_TOKENS
    assert params["system"] == body["system"]  # caching markers untouched
    thinking = {**body, "thinking": {"type": "enabled", "budget_tokens": 10000}}
    assert batch_params(thinking)["max_tokens"] == 10000 + DECISION_MAX_TOKENS
    small = {**body, "max_tokens": 512}
    assert batch_params(small)["max_tokens"] == 512


def test_batched_runs_cross_as_json_unchanged() -> None:
    plan = SamplingPlan(
        trigger_choices=frozenset({"skill:pdf", "skill:xlsx"})
    )  # the sequential rule
    item = RunsAhead(
        ("key", "merge pdfs", plan.ident()),
        [
            RunOutcome("triggered", chosen="skill:pdf", usage=Usage(5, 6), batch=True),
            RunOutcome("not_triggered", chosen="text", from_store=True),
        ],
    )
    again = RunsAhead.from_dict(json.loads(json.dumps(item.to_dict())))
    assert again == item


def test_a_batch_call_costs_half_and_is_counted_as_one() -> None:
    guard = CostGuard("claude-sonnet-5")
    usage = Usage(1000, 200, 300, 4000)
    guard.add(Calls(usage, 1, "items"))
    guard.add(Calls(usage, 1, "items", batch=True))
    spend = guard.by_phase["items"]
    full = cost_usd(usage, price_of("claude-sonnet-5"))
    assert (spend.calls, spend.batch_calls) == (2, 1)
    assert spend.cost_usd == pytest.approx(full * (1 + BATCH_RATE))
    assert spend.to_dict()["batch_calls"] == 1


def test_a_library_session_samples_in_waves_of_batches(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """Exact early stopping across waves: 2 runs each first; only the query split 1-1 gets a
    third, in a second batch. Verdicts and run counts equal the live path's."""
    queries = [
        ("tidy csv one", ["skill:alpha", "skill:alpha"]),
        ("tidy csv two", ["skill:alpha", "text", "skill:alpha"]),
        ("write a poem", ["text"]),
    ]
    outcomes = {
        batch: [(r.query, r.triggers, r.runs_made, r.passed) for r in results]
        for batch, results in sampled_both_ways(fake_api, tmp_path, queries, None).items()
    }
    assert outcomes[True] == outcomes[False]
    assert [runs for _q, _t, runs, _p in outcomes[True]] == [2, 3, 2]
    assert fake_api.stats["batches_created"] == 2
    assert fake_api.stats["batch_requests"] == 7 == fake_api.stats["trigger_calls"]


def test_sequential_verdicts_sample_in_the_same_waves_batched_and_live(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The default rule in batches: clear queries settle in one wave of four; one whose runs
    alternate goes on in waves until no bound can be reached (borderline), exactly as live."""
    queries = [
        ("tidy csv one", ["skill:alpha"]),
        ("tidy csv two", ["skill:alpha", "text"]),
        ("write a poem", ["text"]),
    ]
    outcomes = {
        batch: [(r.verdict, r.runs_made, r.passed, r.borderline) for r in results]
        for batch, results in sampled_both_ways(fake_api, tmp_path, queries, 0.95).items()
    }
    assert outcomes[True] == outcomes[False]
    assert outcomes[True] == [
        ("triggered", 4, True, False),
        ("undecided", 13, False, True),
        ("not_triggered", 4, True, False),
    ]
    # waves: 4 each; the alternating query stands level (2 of 4), and four more could reach 6
    # of 8; level again, five more could reach 9 of 13 (five ahead after eight runs); at 7 of
    # 13 no bound is in reach of the last two
    assert fake_api.batch_sizes == [12, 4, 5]


def test_an_answer_cut_at_the_cap_is_sent_again_with_the_live_max_tokens(
    fake_api: FakeMessagesAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every first answer reaches a tiny cap before its decision; sent again with the live
    request's max_tokens it decides as a live run does: same verdicts, and the runs kept
    carry the requests of the answers dropped before them."""
    import pytest_skilltrigger.backends.api.message_batches as batches

    monkeypatch.setattr(batches, "DECISION_MAX_TOKENS", 1)
    queries = [("tidy csv one", ["skill:alpha"]), ("write a poem", ["text"])]
    results, session = sample_once(
        fake_api, alpha_target(tmp_path, queries), queries, batch=True, confidence=None
    )
    assert [(r.triggers, r.runs_made, r.passed) for r in results] == [(2, 2, True), (0, 2, True)]
    capped = [p["max_tokens"] for p in fake_api.batch_requests_log]
    assert capped[:4] == [1] * 4 and all(m > 1 for m in capped[4:]) and len(capped) == 8
    # the dropped answers' requests ride on the query's next run kept: all paid, none lost
    assert [sum(o.requests for o in r.outcomes) for r in results] == [4, 4]
    assert session.spending()["items"].batch_calls == 8


def test_a_worker_takes_over_the_controllers_runs_and_its_share_of_their_cost(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """What the controller spent on batches comes off each worker's part of the budget: a
    worker whose share is spent makes no further call."""
    folder = make_skill(tmp_path, "alpha", [entry("tidy csv one", True)], "A.")
    (target,) = load_targets([str(folder)])
    (only,) = target.eval_set.entries
    context = target.context()
    settings = Settings(cache_mode="off", budget_usd=1.0)
    worker = TriggerSession(settings, share=ProcessShare(0, 2))  # its part: $0.50
    try:
        SessionExchange(worker).import_runs_ahead(
            {"spent_usd": 1.0, "runs": []}, workers=2
        )  # the controller spent it all
        result = worker.submit(context, only).result()
    finally:
        worker.close()
    assert result.over_budget and fake_api.stats["calls"] == 0


def test_the_batch_timeout_is_one_deadline_for_the_session(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """``batch_timeout`` bounds all of a session's batch waiting, counted from its first
    batch, not each sample_ahead's (each improvement round would start a wait of its own): a
    round that comes after the deadline sends no batch, and its queries error, never miss."""
    folder = make_skill(tmp_path, "alpha", [entry("tidy csv one", True)], "A.")
    (target,) = load_targets([str(folder)])
    (only,) = target.eval_set.entries
    timeout = 2.0
    settings = Settings(cache_mode="off", batch=True, batch_poll=0.01, batch_timeout=timeout)
    session = TriggerSession(settings)
    try:
        session.sample_ahead([(target.context(), only, session.plan)])
        first = session.submit(target.context(), only).result()
        time.sleep(timeout + 0.5)  # what the proposals between two rounds take
        later = target.context("Alpha tidies csv files.")
        session.sample_ahead([(later, only, session.plan)])
        second = session.submit(later, only).result()
    finally:
        session.close()
    assert first.passed is not None and first.errors == 0
    assert fake_api.stats["batch_creates"] == 1 and fake_api.stats["calls"] == 0
    assert second.passed is None and "--trigger-batch-timeout" in (second.error or "")


def test_rounds_stop_asking_once_the_batch_deadline_has_passed(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """Past the session's batch deadline no round can be measured, so the improvement
    rounds ask the proposer nothing more (each proposal is a paid request) and measure no
    winner again: they stop, saying why."""
    from pytest_skilltrigger.model.settings import OptimizerSettings
    from pytest_skilltrigger.optimizer.loop import RoundsStart, optimize

    entries = [
        entry("tidy csv one", True),
        entry("zzz qqq unrelated", True),
        entry("bake bread", False),
        entry("paint walls", False),
    ]
    folder = make_skill(tmp_path, "alpha", entries, "Tidy csv one files.")
    (target,) = load_targets([str(folder)])
    timeout = 2.0
    settings = Settings(cache_mode="off", batch=True, batch_poll=0.01, batch_timeout=timeout)
    session = TriggerSession(settings)

    class Proposer:
        asked = 0

        def propose(self, prompt: str, count: int = 1, tried: object = ()) -> object:
            Proposer.asked += 1
            raise AssertionError("no proposal may be asked for past the deadline")

    try:
        context = target.context()
        session.sample_ahead([(context, e, session.plan) for e in target.eval_set.entries])
        initial = {e.index: session.submit(context, e).result() for e in target.eval_set.entries}
        assert initial[1].passed is False  # a train or test query to improve on
        time.sleep(timeout + 0.5)
        options = OptimizerSettings(holdout=0.5, max_iterations=3)
        run = optimize(target, session, Proposer(), options, RoundsStart(initial=initial))
        halted = session.exhausted
    finally:
        session.close()
    assert Proposer.asked == 0
    assert halted and "--trigger-batch-timeout" in halted
    assert run.exit_reason.startswith("stopped before iteration 2: no batch result")
    assert run.acceptance is None
    assert fake_api.stats["batch_creates"] == 1 and fake_api.stats["calls"] == 0


def alpha_target(tmp_path: Path, queries: list) -> Target:
    """A skill "alpha" whose eval set is ``queries`` (a poem should not trigger it)."""
    folder = make_skill(tmp_path, "alpha", [entry(q, "poem" not in q) for q, _ in queries], "A.")
    (target,) = load_targets([str(folder)])
    return target


def sample_once(
    fake_api: FakeMessagesAPI,
    target: Target,
    queries: list,
    *,
    batch: bool,
    confidence: float | None,
) -> tuple[list, TriggerSession]:
    """The scripted queries sampled once, live or in batches: the results and the (closed)
    session that made them."""
    for query, script in queries:
        fake_api.script(query, script)
    settings = Settings(cache_mode="off", batch=batch, batch_poll=0.01, confidence=confidence)
    session = TriggerSession(settings)
    try:
        context = target.context()
        session.sample_ahead([(context, e, session.plan) for e in target.eval_set.entries])
        results = session.evaluate(context, target.eval_set.entries)
    finally:
        session.close()
    return results, session


def sampled_both_ways(
    fake_api: FakeMessagesAPI, tmp_path: Path, queries: list, confidence: float | None
) -> dict[bool, list]:
    """The same scripted queries sampled live and in batches (``confidence`` None: the
    reference rule): each way's results, by whether it was batched."""
    target = alpha_target(tmp_path, queries)
    return {
        batch: sample_once(fake_api, target, queries, batch=batch, confidence=confidence)[0]
        for batch in (False, True)
    }


def test_a_batch_run_goes_to_its_own_models_lane_only(fake_api: FakeMessagesAPI) -> None:
    """With a model matrix, a fatal batch error of one model (an unknown model id, say)
    stops that model's lane, not the others'; the model crosses xdist with the runs."""
    models = ("claude-opus-5-5", "claude-haiku-4-5")
    session = TriggerSession(Settings(cache_mode="off", models=models))
    try:
        fatal = RunOutcome("error", error="404 not_found_error: no such model", fatal=True)
        runs = RunsAhead(("key", "query", ("skill",)), [fatal], None, models[1])
        assert RunsAhead.from_dict(json.loads(json.dumps(runs.to_dict()))) == runs
        SessionExchange(session).take_runs_ahead(runs)
        assert session.lanes is not None
        assert session.lanes.of_model(models[1]).stop.reason
        assert not session.lanes.of_model(models[0]).stop.reason
    finally:
        session.close()


def test_a_batchs_progress_names_its_model_in_a_matrix() -> None:
    progress = BatchProgress("msgbatch_1", 2, 5, 3, 1, 75.0, False)
    assert progress.line() == (
        "batch msgbatch_1 (wave 2, in progress): 5 succeeded, 3 processing, 1 errored, 1m15s"
    )
    named = replace(progress, model="claude-haiku-4-5", ended=True)
    assert named.line().startswith("batch msgbatch_1 on claude-haiku-4-5 (wave 2, ended): ")
