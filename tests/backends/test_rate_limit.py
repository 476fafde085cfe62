"""Keeping to the rate limits, against the fake Messages API's token buckets (real sockets,
the real SDK). Bounds are the server's own counts (requests refused, the most requests any
window of its clock let through), never timings of this machine."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skilltrigger.backends.api.rate_limit import (
    FileLimits,
    Need,
    RateLimiter,
    counted_input,
    model_class,
)
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.rate_limits import Limits, RateLimitSetting
from pytest_skilltrigger.model.settings import Settings
from pytest_skilltrigger.skills.evalset import EvalEntry
from tests.fake_messages_api import FakeMessagesAPI, RateLimits

CONTEXT = TriggerContext("pdf-tools", "Merge, split and fill PDF files.")
PAID = "anthropic-ratelimit-requests"


def entries(count: int, prefix: str = "merge these pdf files") -> list[EvalEntry]:
    return [EvalEntry(i, f"{prefix} number {i}", True) for i in range(count)]


def evaluate(settings: Settings, queries: list[EvalEntry]) -> tuple[list, dict]:
    """The queries sampled in one session (one run each: the reference rule, 1 run)."""
    session = TriggerSession(settings)
    try:
        results = session.evaluate(CONTEXT, queries)
        return results, session.spending()
    finally:
        session.close()


ONE_RUN = {"cache_mode": "off", "confidence": None, "min_runs": 1, "concurrency": 8}


@pytest.fixture
def quick_retries(fake_api: FakeMessagesAPI) -> Iterator[FakeMessagesAPI]:
    fake_api.retry_after_ms = 1  # the SDK would back off half a second on "retry-after: 0"
    yield fake_api


@pytest.mark.parametrize("pacing", [None, "off"], ids=["paced", "unpaced"])
@pytest.mark.parametrize("status", ["429", "500", "529"])
def test_the_first_wave_meets_errors_on_every_first_two_tries_and_no_run_errors(
    quick_retries: FakeMessagesAPI, status: str, pacing: str | None
) -> None:
    """Every request of the first wave is answered 429 (or 500, 529) twice before it is
    served: an answer is a live endpoint, not a dead one, so every run gets through."""
    quick_retries.fail_first_tries = {status: 2}
    queries = entries(12)
    results, spent = evaluate(Settings(**ONE_RUN, rate_limit=pacing), queries)
    assert [r.errors for r in results] == [0] * 12
    assert quick_retries.stats["first_try_faults"] == {status: 24}
    assert spent["items"].calls == 36 == quick_retries.stats["calls"]
    if status == "429":
        assert spent["items"].rate_limited == 24


def test_runs_keep_to_the_requests_limit_the_headers_state(fake_api: FakeMessagesAPI) -> None:
    """Limits learnt from the headers: after the first answers, requests wait for the
    bucket instead of being refused (a 'minute' of two seconds: the refill the reset times
    state)."""
    fake_api.rate_limits = RateLimits(rpm=10, minute=2.0)
    results, spent = evaluate(Settings(**ONE_RUN), entries(40))
    assert all(r.errors == 0 for r in results)
    refused = fake_api.stats["rate_limited"]
    assert refused <= 0.1 * fake_api.stats["calls"] + 8  # the first wave knows no limit yet
    assert spent["items"].rate_limited == refused
    assert spent["items"].waited_seconds > 0


class Clock:
    """A wall clock a test moves: the limiter's waits are then exact, whatever the load."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stated(limit: int, remaining: int, clock: Clock, seconds: float = 60.0) -> dict[str, str]:
    """A response's requests headers: the limit, what is left, when the bucket is full."""
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock.now + seconds))
    return {
        f"{PAID}-limit": str(limit),
        f"{PAID}-remaining": str(remaining),
        f"{PAID}-reset": reset,
    }


OPUS = Need("claude-opus-5-5", 1, 1)


def test_a_preset_limit_holds_from_the_first_request() -> None:
    """``--trigger-rate-limit=4`` (a key shared with other jobs): from the first request on,
    four a minute means four go, and the fifth waits about a quarter of a minute."""
    clock = Clock()
    limiter = RateLimiter(RateLimitSetting(True, Limits(requests=4)), clock=clock)
    assert [limiter.charge(OPUS) for _ in range(4)] == [0, 0, 0, 0]
    wait = limiter.charge(OPUS)
    assert 14.9 < wait < 15.1
    clock.now += wait
    assert limiter.charge(OPUS) == 0


def test_the_input_token_limit_binds_when_it_is_the_tighter(fake_api: FakeMessagesAPI) -> None:
    """Queries carrying a pasted table (their own tokens are not cached) against a small
    input-token limit: paced on tokens, not on requests."""
    fake_api.rate_limits = RateLimits(rpm=10_000, itpm=6_000, minute=2.0)
    table = " | ".join(f"row {n}: payment {n * 37} EUR" for n in range(100))
    results, spent = evaluate(Settings(**ONE_RUN), entries(24, f"reconcile this: {table}"))
    assert all(r.errors == 0 for r in results)
    assert fake_api.stats["rate_limited_by"].get("requests", 0) == 0
    assert fake_api.stats["rate_limited"] <= 10
    assert spent["items"].waited_seconds > 0


def test_off_sends_as_it_comes(fake_api: FakeMessagesAPI) -> None:
    """``--trigger-rate-limit=off``: no pacing; what the server refuses, the SDK retries."""
    fake_api.rate_limits = RateLimits(rpm=6, minute=1.0)
    fake_api.retry_after_ms = 1
    results, spent = evaluate(Settings(**ONE_RUN, rate_limit="off"), entries(16))
    assert spent["items"].waited_seconds == 0
    assert fake_api.stats["rate_limited"] > 0 and all(r.errors == 0 for r in results)


def test_questions_are_paced_with_the_runs(fake_api: FakeMessagesAPI) -> None:
    """The proposer's and drafting's questions share the limiter: with a preset of two
    requests a minute, the third question waits; what it waited is counted under its phase."""
    session = TriggerSession(Settings(cache_mode="off", rate_limit="2"))
    try:
        limiter = session.limiter
        for _ in range(2):
            session.ask("one word please", phase="improve")
        stop = threading.Event()
        timer = threading.Timer(0.5, stop.set)  # the third would wait half a minute: stop it
        timer.start()
        permit = limiter.acquire(Need("claude-opus-5-5", 5, 5), stop)
        timer.cancel()
    finally:
        session.close()
    assert not permit.charged and permit.waited >= 0.4
    assert fake_api.stats["calls"] == 2


def test_a_question_refused_to_the_end_counts_its_429s(quick_retries: FakeMessagesAPI) -> None:
    """A question the API refuses every time fails, and its requests and 429s are counted
    under its phase all the same (a failure is where the 429s matter)."""
    from pytest_skilltrigger.support.errors import AskError

    quick_retries.fail_first_tries = {"429": 1000}
    session = TriggerSession(Settings(cache_mode="off", rate_limit="off"))
    try:
        with pytest.raises(AskError):
            session.ask("one word please", phase="improve")
        spent = session.spending()["improve"]
    finally:
        session.close()
    refused = quick_retries.stats["first_try_faults"]["429"]
    assert refused == quick_retries.stats["calls"] > 0
    assert spent.calls == refused and spent.rate_limited == refused


def test_the_buckets_follow_the_headers() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimitSetting(), clock=clock)
    assert limiter.charge(OPUS) == 0  # no limit known
    limiter.observe("claude-opus-5-5", stated(50, 0, clock), 200)
    assert limiter.charge(OPUS) > 1.0  # nothing left: waits for the refill
    assert limiter.charge(Need("claude-haiku-4-5", 1, 1)) == 0  # another class's own limits


def test_a_429_blocks_its_class_for_retry_after_and_halves_the_window() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimitSetting(True, Limits(requests=1000)), clock=clock)
    never = threading.Event()
    permit = limiter.acquire(Need("claude-sonnet-5-5", 1, 1), never)
    limiter.observe("claude-sonnet-5-5", {"retry-after": "1"}, 429)
    limiter.release(permit, None, refused=True)
    assert limiter.charge(Need("claude-sonnet-5-5", 1, 1)) == pytest.approx(1.0)
    clock.now += 1.0
    assert limiter.charge(Need("claude-sonnet-5-5", 1, 1)) == 0  # the retry-after waited out
    assert limiter._window["sonnet"] <= 1  # halved from the slow start's one


def test_a_class_starts_slowly_until_its_first_refusal() -> None:
    """One request in flight at first, one more for each answer (a first wave of many at once
    meets a limit kept over a second almost whole), until a refusal halves the window and
    it grows slowly from there."""
    limiter = RateLimiter(RateLimitSetting())
    never = threading.Event()
    for expected in (1, 2, 3):
        assert limiter._window_of("opus") == expected
        limiter.release(limiter.acquire(OPUS, never), None, refused=False)
    limiter.release(limiter.acquire(OPUS, never), None, refused=True)
    assert limiter._window_of("opus") == 2
    limiter.release(limiter.acquire(OPUS, never), None, refused=False)
    assert limiter._window_of("opus") == 2.5


def test_a_limit_kept_over_a_second_is_learnt_from_the_429s_the_headers_did_not_predict(
    fake_api: FakeMessagesAPI,
) -> None:
    """300 requests a minute, kept over one second as well (five at once): the headers say
    300 a minute with plenty left, and a burst is refused all the same. The slow start keeps
    the first wave small, the first such 429 teaches the limiter to send evenly: few
    requests are refused, none errors (counted on the server, whatever the machine's load)."""
    fake_api.rate_limits = RateLimits(rpm=300, minute=60.0, interval=1.0)
    notices: list[str] = []
    session = TriggerSession(Settings(**ONE_RUN), notices=lambda n: notices.append(n.line()))
    try:
        results = session.evaluate(CONTEXT, entries(40))
    finally:
        session.close()
    assert all(r.errors == 0 for r in results)
    assert fake_api.stats["rate_limited"] <= 8  # the slow start's last doubling, at most


def test_a_429_with_room_left_keeps_every_bucket_to_a_seconds_refill() -> None:
    clock = Clock()
    limiter = RateLimiter(RateLimitSetting(), clock=clock)
    limiter.observe("claude-opus-5-5", stated(600, 590, clock, 30), 200)
    burst = sum(limiter.charge(OPUS) == 0 for _ in range(20))
    assert burst == 20  # a minute's limit: a burst of twenty goes at once
    limiter.observe("claude-opus-5-5", {**stated(600, 570, clock, 30), "retry-after": "0"}, 429)
    state = limiter.store.update(lambda classes: classes["opus"])
    assert state.short and state.buckets["requests"].capacity == 10  # a second's refill
    sent = 0
    for _ in range(10):  # a second in steps of a tenth: evenly, ten a second at most
        while limiter.charge(OPUS) == 0:
            sent += 1
        clock.now += 0.1
    assert 8 <= sent <= 10


def test_a_429_the_headers_predicted_teaches_nothing() -> None:
    """Refused with no request left: the minute's bucket was empty, as stated."""
    limiter = RateLimiter(RateLimitSetting())
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    stated = {f"{PAID}-limit": "600", f"{PAID}-remaining": "0", f"{PAID}-reset": reset}
    limiter.observe("claude-opus-5-5", {**stated, "retry-after": "0"}, 429)
    assert not limiter.store.update(lambda classes: classes["opus"].short)


def test_workers_share_one_limit_through_a_file(tmp_path: Path) -> None:
    """Two processes' limiters on one file (here two limiters): a preset of ten requests
    lets ten through between them, not ten each."""
    path = tmp_path / "limits.json"
    path.write_text("{}")
    clock = Clock()
    setting = RateLimitSetting(True, Limits(requests=10))
    first, second = (RateLimiter(setting, FileLimits(str(path)), clock=clock) for _ in range(2))
    granted = sum(limiter.charge(OPUS) == 0 for limiter in (first, second) * 8)
    assert granted == 10


def test_cache_reads_count_only_where_the_api_counts_them() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 5000,
    }
    assert counted_input("claude-opus-5-5", usage) == 110
    assert counted_input("claude-3-5-haiku-20241022", usage) == 5110
    assert model_class("claude-opus-5-5") == "opus" and model_class("other") == "other"


@pytest.mark.parametrize(
    "text,problem",
    [
        ("fast", "must be off or RPM"),
        ("0,5", "above 0"),
        ("1,2,3,4", "must be off or RPM"),
        ("²", "must be off or RPM"),  # a digit to str.isdigit(), not to int()
    ],
)
def test_a_bad_rate_limit_names_the_option(text: str, problem: str) -> None:
    from pytest_skilltrigger.support.errors import InputError

    with pytest.raises(InputError, match=problem) as raised:
        Settings(rate_limit=text).validated()
    assert str(raised.value).startswith("--trigger-rate-limit: ")


def test_an_answer_with_no_text_and_no_tool_call_is_an_error_not_a_non_trigger(
    fake_api: FakeMessagesAPI,
) -> None:
    """A message with no content block (a misbehaving proxy's): retried, then an error with
    its cause; never read as "did not trigger"."""
    fake_api.script("merge these pdf files number 0", ["empty"])
    session = TriggerSession(Settings(**ONE_RUN))
    try:
        (result,) = session.evaluate(CONTEXT, entries(1))
    finally:
        session.close()
    assert result.status == "error"
    assert "no text and no tool call" in (result.error or "")
