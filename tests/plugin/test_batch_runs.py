"""``--trigger-batch``: the items' runs made as Message Batches, in the waves exact early
stopping plans, against the fake API's batch endpoints (real SDK, real sockets).

Every count here is the server's own: batches created, requests in them, polls, cancels and
live calls.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import BATCH_RATE, cost_usd, price_of
from tests.fake_messages_api import FakeMessagesAPI, extract_query
from tests.helpers import PYTEST, interruptible
from tests.plugin.test_items import _sdk_warmed_up, entry, make_skill  # noqa: F401
from tests.plugin.test_xdist import ALPHA, BETA, build, run_args, script, stable

BATCH = ("--trigger-batch", "--trigger-batch-poll=0.05")


@pytest.fixture(autouse=True)
def _not_inside_an_outer_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def stored_runs(path: Path) -> int:
    """How many runs the store at ``path`` holds."""
    with closing(sqlite3.connect(str(path))) as db:
        return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])


def results_of(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each query's runs (how many triggered, what was chosen) and verdict."""
    return [
        (r["query"], r["triggers"], r["runs"], r["chosen"], r["pass"])
        for skill in report["skills"]
        for r in skill["results"]
    ]


def test_batch_verdicts_and_runs_equal_live_ones_on_the_same_outcomes(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    live = pytester.runpytest(*run_args(root, "--trigger-json=live.json"))
    live.assert_outcomes(passed=5, failed=3)
    live_calls = fake_api.stats["trigger_calls"]

    script(fake_api)
    fake_api.batch_polls = 2
    batch = pytester.runpytest(*run_args(root, *BATCH, "--trigger-json=batch.json", "-q"))
    batch.assert_outcomes(passed=5, failed=3)
    stats = fake_api.stats
    assert stats["trigger_calls"] == live_calls  # no live call in the batch run
    assert stats["batch_requests"] == live_calls  # the same runs, made in batches
    # waves: every query's first two runs, then the third run of the one query split 1-1
    assert stats["batches_created"] == 2
    # each wave: two polls in progress, the one that sees it end, and the SDK's own retrieve
    # before it reads the results
    assert stats["batch_polls"] == 2 * (2 + 1 + 1)
    live_report = json.loads((pytester.path / "live.json").read_text())
    batch_report = json.loads((pytester.path / "batch.json").read_text())
    assert results_of(batch_report) == results_of(live_report)
    items = batch_report["totals"]["by_phase"]["items"]
    assert items["calls"] == items["batch_calls"] == stats["batch_requests"]
    assert batch_report["totals"]["batch_calls"] == stats["batch_requests"]
    # one progress line per poll worth showing, also under -q
    lines = [ln for ln in batch.outlines if ln.startswith("skilltrigger: batch msgbatch_")]
    assert any("(wave 1, ended)" in ln for ln in lines)
    assert any("(wave 2, ended): 1 succeeded, 0 processing, 0 errored" in ln for ln in lines)
    assert f"({stats['batch_requests']} in batches)" in batch.stdout.str()


def test_batch_calls_are_priced_at_half_the_live_rate(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    result = pytester.runpytest(*run_args(root, *BATCH, "--trigger-json=out.json"))
    result.assert_outcomes(passed=5, failed=3)
    totals = json.loads((pytester.path / "out.json").read_text())["totals"]
    usage = Usage.from_dict(totals)
    # the prompt up to the query is cached where Claude Code marks it: written or read
    assert usage.cache_creation_input_tokens > 0 and usage.cache_read_input_tokens > 0
    price = price_of(fake_api.batch_requests_log[0]["model"])
    assert price is not None
    assert totals["cost_usd"] == pytest.approx(cost_usd(usage, price) * BATCH_RATE, rel=1e-4)
    # the tokens are the server's own: what it billed the succeeded requests for
    billed = Usage.from_dict(fake_api.stats["batch_usage"])
    assert usage == billed
    assert totals["cost_usd"] == pytest.approx(cost_usd(billed, price) * BATCH_RATE, rel=1e-4)


def test_under_xdist_only_the_controller_submits_batches_and_workers_make_no_call(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))  # the batch runs file goes here
    root = build(pytester, fake_api)
    plain = pytester.runpytest(*run_args(root, *BATCH, "--trigger-json=plain.json"))
    plain.assert_outcomes(passed=5, failed=3)
    created, requests = fake_api.stats["batches_created"], fake_api.stats["batch_requests"]

    script(fake_api)
    dist = pytester.runpytest_subprocess(
        "-n", "2", *run_args(root, *BATCH, "--trigger-json=dist.json")
    )
    dist.assert_outcomes(passed=5, failed=3)
    assert "INTERNALERROR" not in dist.stdout.str() + dist.stderr.str()
    assert fake_api.stats["trigger_calls"] == 0
    assert fake_api.stats["batches_created"] == 2 * created
    assert fake_api.stats["batch_requests"] == 2 * requests
    plain_report = json.loads((pytester.path / "plain.json").read_text())
    dist_report = json.loads((pytester.path / "dist.json").read_text())
    assert stable(dist_report) == stable(plain_report)
    # the controller's temporary batch runs file for its workers is gone
    assert not list(private_tmp.glob("skilltrigger-batch-*"))


def test_a_deselected_item_is_not_batched_under_xdist(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    dist = pytester.runpytest_subprocess("-n", "2", *run_args(root, *BATCH, "-k", "beta"))
    dist.assert_outcomes(passed=2, failed=1)
    assert fake_api.stats["trigger_calls"] == 0
    queries = {extract_query(params) for params in fake_api.batch_requests_log}
    assert queries == {q for q, _, _ in BETA}
    assert fake_api.stats["batch_requests"] == len(BETA) * 2


def test_batch_runs_are_stored_and_reused_by_live_and_batch_reruns(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    root = build(pytester, fake_api)
    store = f"--trigger-store={tmp_path / 'store.sqlite'}"
    first = pytester.runpytest(*run_args(root, *BATCH, store))
    first.assert_outcomes(passed=5, failed=3)
    requests = fake_api.stats["batch_requests"]
    assert requests > 0
    # every batch run stored once: one row per request the batches answered
    assert stored_runs(tmp_path / "store.sqlite") == requests
    # a batch judges a run on its first call: so does the live rerun that reuses its runs
    live = pytester.runpytest(
        *run_args(root, store, "--trigger-json=live.json", "--trigger-within=first-call")
    )
    live.assert_outcomes(passed=5, failed=3)
    again = pytester.runpytest(*run_args(root, *BATCH, store))
    again.assert_outcomes(passed=5, failed=3)
    assert fake_api.stats["trigger_calls"] == 0
    assert fake_api.stats["batch_requests"] == requests
    assert fake_api.stats["batches_created"] == 2
    report = json.loads((pytester.path / "live.json").read_text())
    assert report["totals"]["calls"] == 0


@pytest.mark.parametrize("kind", ["errored", "expired"])
def test_a_failed_batch_request_is_sent_again_in_the_next_wave(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, kind: str
) -> None:
    root = build(pytester, fake_api)
    query = ALPHA[0][0]
    fake_api.batch_script(query, [kind])
    result = pytester.runpytest(*run_args(root, *BATCH, "--trigger-json=out.json"))
    result.assert_outcomes(passed=5, failed=3)
    assert fake_api.stats["batch_results"][kind] == 1
    report = json.loads((pytester.path / "out.json").read_text())
    first = report["skills"][0]["results"][0]
    assert (first["query"], first["triggers"], first["runs"]) == (query, 2, 2)
    # an errored request was sent and counts as a call; an expired one never was
    paid = fake_api.stats["batch_requests"] - (1 if kind == "expired" else 0)
    assert report["totals"]["batch_calls"] == paid
    # neither is billed: the cost is the server's tokens of the succeeded requests, at half
    totals = report["totals"]
    billed = Usage.from_dict(fake_api.stats["batch_usage"])
    assert Usage.from_dict(totals) == billed
    price = price_of(fake_api.batch_requests_log[0]["model"])
    assert price is not None
    assert totals["cost_usd"] == pytest.approx(cost_usd(billed, price) * BATCH_RATE, rel=1e-4)


def test_a_request_that_keeps_failing_is_an_error_never_a_miss(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    query = ALPHA[0][0]
    fake_api.batch_script(query, ["errored"] * 6)
    result = pytester.runpytest(*run_args(root, *BATCH))
    result.assert_outcomes(passed=4, failed=3, errors=1)
    result.stdout.fnmatch_lines(["*trigger run failed: *(batch request)*"])


def test_bad_credentials_stop_the_session_at_the_batch(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    root = build(pytester, fake_api)
    result = pytester.runpytest(*run_args(root, *BATCH))
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert outcomes.get("errors", outcomes.get("error")) == 1
    assert "invalid x-api-key" in result.stdout.str()
    assert fake_api.stats["batches_created"] == 0 and fake_api.stats["trigger_calls"] == 0


def test_an_unknown_model_stops_the_session_after_one_wave(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.known_models = {"claude-sonnet-5"}
    root = build(pytester, fake_api)
    result = pytester.runpytest(*run_args(root, *BATCH, "--trigger-model=claude-nope-1"))
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert "not_found_error" in result.stdout.str()
    assert fake_api.stats["batches_created"] == 1 and fake_api.stats["trigger_calls"] == 0


def test_the_batch_timeout_ends_the_wait_with_errors_and_cancels(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    fake_api.batch_polls = 10_000
    result = pytester.runpytest(*run_args(root, *BATCH, "--trigger-batch-timeout=0.5"))
    result.assert_outcomes(errors=8)
    result.stdout.fnmatch_lines(["*--trigger-batch-timeout*"])
    assert fake_api.stats["batch_cancels"] == 1
    assert fake_api.stats["trigger_calls"] == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_while_waiting_cancels_the_batch(tmp_path: Path, signum: int) -> None:
    """Ctrl-C, or SIGTERM (a CI job cancelled), cancels the batch in flight."""
    folder = make_skill(tmp_path, "alpha-skill", [entry(q, s) for q, s, _ in ALPHA], "Alpha.")
    with FakeMessagesAPI() as api:
        api.batch_polls = 10_000
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key"}
        out = tmp_path / "out.json"
        proc = subprocess.Popen(
            [
                *PYTEST,
                f"--trigger-skill-path={folder}",
                "-p",
                "no:cacheprovider",
                "--trigger-cache=off",
                *BATCH,
                f"--trigger-json={out}",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,
        )
        deadline = time.monotonic() + 60
        while api.stats["batch_polls"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=30)
        assert api.stats["batch_cancels"] == 1, output
        assert api.stats["trigger_calls"] == 0
    assert proc.returncode == 2, output
    assert "Traceback" not in output
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_matrix_runs_its_models_batches_at_once_and_ctrl_c_cancels_them_all(
    tmp_path: Path,
) -> None:
    """Each model's batches run beside the others' (batches that never end: the second
    model's is created all the same), and Ctrl-C cancels every batch in flight."""
    folder = make_skill(tmp_path, "alpha-skill", [entry(q, s) for q, s, _ in ALPHA], "Alpha.")
    with FakeMessagesAPI() as api:
        api.batch_polls = 10_000
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key"}
        proc = subprocess.Popen(
            [
                *PYTEST,
                f"--trigger-skill-path={folder}",
                "-p",
                "no:cacheprovider",
                "--trigger-cache=off",
                *BATCH,
                "--trigger-model=claude-opus-5-5,claude-haiku-4-5",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,
        )
        deadline = time.monotonic() + 60
        while (api.stats["batches_created"] < 2 or api.stats["batch_polls"] < 4) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        created = api.stats["batches_created"]
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        assert created == 2, output  # the second while the first was still in progress
        assert api.stats["batch_cancels"] == 2, output
        models = {body["model"] for body in api.batch_requests_log}
        assert models == {"claude-opus-5-5", "claude-haiku-4-5"}
    assert proc.returncode == 2, output
    assert "Traceback" not in output


def test_ctrl_c_in_a_later_wave_keeps_the_runs_already_read(tmp_path: Path) -> None:
    """The first wave's runs are paid and read: they are stored as soon as the wave is read,
    so Ctrl-C while the second wave waits keeps them, and a rerun makes only the run the
    interrupted wave was making."""
    folder = make_skill(tmp_path, "alpha-skill", [entry(q, s) for q, s, _ in ALPHA], "Alpha.")
    store = tmp_path / "store.sqlite"
    args = [
        *PYTEST,
        f"--trigger-skill-path={folder}",
        "-p",
        "no:cacheprovider",
        f"--trigger-store={store}",
        "--trigger-confidence=off",
        *BATCH,
    ]
    with FakeMessagesAPI() as api:
        script(api)  # one query splits 1-1 in the first wave: a second wave of one run
        api.batch_holds = [1, 10_000]  # the first batch ends at its second poll, not the next
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key"}
        proc = subprocess.Popen(
            args,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,
        )
        deadline = time.monotonic() + 60
        # the first batch's three polls (with the SDK's before the results), then the second's
        while (api.stats["batches_created"] < 2 or api.stats["batch_polls"] < 5) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        assert proc.returncode == 2, output
        assert api.batch_sizes == [10, 1] and api.stats["batch_cancels"] == 1, output
        assert stored_runs(store) == 10  # every run the first wave returned
        script(api)
        again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 1, again.stdout  # two items fail, as in a whole run
        assert api.batch_sizes == [10, 1, 1] and api.stats["trigger_calls"] == 0
    assert stored_runs(store) == 11


def test_batch_needs_the_api_backend(pytester: pytest.Pytester) -> None:
    folder = make_skill(pytester.path, "alpha-skill", [entry("tidy csv", True)], "Alpha.")
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "--trigger-batch", "--trigger-backend=claude-code"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --trigger-batch: needs the API backend*"])


def test_the_optimizer_measures_each_round_in_batches(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    queries = [(f"alpha: tidy csv column {i}", True) for i in range(4)] + [
        (f"write a poem about {w}", False) for w in ("rain", "snow")
    ]
    folder = make_skill(
        pytester.path, "alpha-skill", [entry(q, s) for q, s in queries], "Gardening helper."
    )
    fake_api.proposals = ["Alpha tidies csv column data in spreadsheets."] * 3
    store = pytester.path / "store.sqlite"
    result = pytester.runpytest(
        *run_args(
            folder,
            *BATCH,
            "--trigger-optimize",
            "--trigger-max-iterations=2",
            "--trigger-json=out.json",
            f"--trigger-store={store}",
        )
    )
    assert fake_api.stats["trigger_calls"] == 0  # every trigger run was a batch run
    report = json.loads((pytester.path / "out.json").read_text())
    phases = report["totals"]["by_phase"]
    assert phases["rounds"]["batch_calls"] == phases["rounds"]["calls"] > 0
    assert phases["confirmation"]["batch_calls"] == phases["confirmation"]["calls"] > 0
    assert phases["improve"]["batch_calls"] == 0  # proposals are live requests
    assert "Alpha tidies csv column data" in (folder / "SKILL.md").read_text(), result.stdout.str()
    # what the server batched is what the report counts, phase by phase: the items' batch
    # first (its queries clear-cut, decided at their second run), then the rounds' and the
    # acceptance race's batches, each stage of a round one batch for all its descriptions
    trigger_calls = sum(phases[p]["calls"] for p in ("items", "rounds", "confirmation"))
    assert sum(fake_api.batch_sizes) == trigger_calls
    assert fake_api.batch_sizes[0] == phases["items"]["calls"] == 2 * len(queries)
    (skill,) = report["skills"]
    # a race's extra runs are fresh and never stored, nor is the acceptance's sampling
    extra = sum((it.get("race") or {}).get("extra_runs", 0) for it in skill["history"])
    assert stored_runs(store) == phases["items"]["calls"] + phases["rounds"]["calls"] - extra


def test_under_xdist_an_unknown_model_in_the_batch_stops_the_workers(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.known_models = {"claude-sonnet-5"}
    root = build(pytester, fake_api)
    result = pytester.runpytest_subprocess(
        "-n", "2", *run_args(root, *BATCH, "--trigger-model=claude-nope-1")
    )
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert 1 <= outcomes.get("errors", outcomes.get("error", 0)) <= 2  # the first of each
    assert fake_api.stats["trigger_calls"] == 0


def test_a_budget_that_ends_in_a_batch_skips_without_live_calls(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = build(pytester, fake_api)
    result = pytester.runpytest(*run_args(root, *BATCH, "--trigger-budget-usd=0.004"))
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) > 0
    assert fake_api.stats["trigger_calls"] == 0
    result.stdout.fnmatch_lines(["*cost budget*reached*"])


def test_items_sharing_an_errored_sampling_make_no_live_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A routing item shares its expected skill's sampling of the same query: when the batch
    could not run it, both items error, and neither goes live."""
    root = build(pytester, fake_api)
    query = BETA[0][0]
    (root / "routing-eval.json").write_text(
        json.dumps([{"query": query, "expected_skill": "beta-skill"}])
    )
    fake_api.batch_script(query, ["errored"] * 6)
    result = pytester.runpytest(*run_args(root, *BATCH))
    result.assert_outcomes(passed=4, failed=3, errors=2)
    assert fake_api.stats["trigger_calls"] == 0


@pytest.mark.parametrize("status", [529, 429])
def test_a_create_the_api_refused_is_sent_again_and_only_then(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, status: int
) -> None:
    """The SDK does not retry a create (it has no idempotency key: a create that timed out
    after the API took it would start a second batch nobody reads); one the API answered
    529 (overloaded) or 429 (rate limited) to was not taken, so it is sent again."""
    root = build(pytester, fake_api)
    fake_api.batch_create_refusals = [status]
    result = pytester.runpytest(*run_args(root, *BATCH))
    result.assert_outcomes(passed=5, failed=3)
    assert fake_api.stats["batches_created"] == 2 and fake_api.stats["trigger_calls"] == 0
    assert fake_api.stats["batch_creates"] == 3  # the refused one, sent again, then wave 2


@pytest.mark.parametrize("status", [500, 502, 504])
def test_a_create_that_may_have_been_taken_is_not_sent_again(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, status: int
) -> None:
    """A 500, 502 or 504 can come after the API took the batch: sent again, it could run
    twice and be billed twice. The wave fails instead: its queries error, never miss, and
    nothing goes live."""
    root = build(pytester, fake_api)
    fake_api.batch_create_refusals = [status]
    result = pytester.runpytest(*run_args(root, *BATCH))
    result.assert_outcomes(errors=8)
    result.stdout.fnmatch_lines([f"*the batch failed: {status} *"])
    stats = fake_api.stats
    assert stats["batch_creates"] == 1 and stats["batches_created"] == 0
    assert stats["trigger_calls"] == 0


@pytest.mark.parametrize(("status", "etype"), [(404, "not_found_error"), (403, "permission_error")])
def test_a_create_refused_for_good_stops_the_session(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, status: int, etype: str
) -> None:
    """A 404 (no batch endpoint here, as a live run's unknown model) or a 403 at create stops
    the session as it does live: the first item errors and no other runs."""
    root = build(pytester, fake_api)
    fake_api.batch_create_refusals = [status]
    result = pytester.runpytest(*run_args(root, *BATCH))
    outcomes = result.parseoutcomes()
    assert "passed" not in outcomes and "failed" not in outcomes
    assert outcomes.get("errors", outcomes.get("error")) == 1
    assert etype in result.stdout.str()
    stats = fake_api.stats
    assert stats["batch_creates"] == 1 and stats["batches_created"] == 0
    assert stats["trigger_calls"] == 0


def test_under_xdist_a_batch_sampling_shared_across_workers_is_stored_once(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """A routing item shares its expected skill's sampling of a query. Under ``--dist
    loadfile`` the routing eval set and that skill's items run on different workers, and each
    resolves the shared sampling from the batch runs; the runs are stored once all the same
    (by the controller, as it reads them): one row per answered request, and a rerun makes no
    request."""
    root = build(pytester, fake_api)
    query = BETA[0][0]
    (root / "routing-eval.json").write_text(
        json.dumps([{"query": query, "expected_skill": "beta-skill"}])
    )
    store = tmp_path / "store.sqlite"
    dist = pytester.runpytest_subprocess(
        "-n", "3", "--dist", "loadfile", *run_args(root, *BATCH, f"--trigger-store={store}")
    )
    dist.assert_outcomes(passed=6, failed=3)
    assert "INTERNALERROR" not in dist.stdout.str() + dist.stderr.str()
    stats = fake_api.stats
    assert stats["trigger_calls"] == 0
    assert stats["batch_results"] == {"succeeded": stats["batch_requests"]}
    assert stored_runs(store) == stats["batch_requests"] == 17
    script(fake_api)
    again = pytester.runpytest(*run_args(root, *BATCH, f"--trigger-store={store}"))
    again.assert_outcomes(passed=6, failed=3)
    assert fake_api.stats["batch_creates"] == 2 and fake_api.stats["trigger_calls"] == 0
    assert stored_runs(store) == 17


def test_a_create_refused_with_retry_after_is_sent_again_after_it(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Message batches are not paced by the rate limiter (they have their own queue), but a
    429 on a create says how long to wait: the create is sent again after that, not sooner."""
    root = build(pytester, fake_api)
    fake_api.refuse_batch_creates(1, status=429, retry_after=2)
    result = pytester.runpytest(*run_args(root, *BATCH))
    result.assert_outcomes(passed=5, failed=3)
    (refused, first), (taken, _status) = fake_api.batch_create_log[:2]
    assert first == 429 and taken - refused >= 2.0
    assert fake_api.stats["trigger_calls"] == 0  # nothing went live
