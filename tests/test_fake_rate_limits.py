"""The fake Messages API's rate limits, first-tries fault and batch-create 429s.

Through real sockets (raw ``http.client`` to see headers, the real ``anthropic`` SDK to see how a
client retries). Timing: every bound is one the server guarantees on its own clock (a bucket
cannot let more through than it holds plus what it refilled in the time measured around the
requests), never "this took less than N ms", so a loaded machine only makes the tests slower.
"""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import anthropic
import pytest

from tests.fake_messages_api import (
    FakeMessagesAPI,
    RateLimits,
    ServerOptions,
    _RateLimiter,
)
from tests.test_fake_messages_api import MERGE_QUERY, batch_items, trigger_body

BUCKETS = ("requests", "input-tokens", "output-tokens", "tokens")
ONE_ITEM: Any = batch_items(MERGE_QUERY)  # a batch's requests (Any: the SDK's TypedDicts)


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(awkward=False) as server:
        yield server


class Wire:
    """One keep-alive connection, for requests whose headers a test reads."""

    def __init__(self, api: FakeMessagesAPI) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", int(api.url.rsplit(":", 1)[1]), 5)

    def post(self, body: dict[str, Any], path: str = "/v1/messages") -> tuple[Any, dict[str, Any]]:
        data = json.dumps(body).encode()
        hdrs = {"content-type": "application/json", "x-api-key": "test-key"}
        self.conn.request("POST", path, body=data, headers=hdrs)
        resp = self.conn.getresponse()
        text = resp.read().decode()
        return resp, (json.loads(text) if not text.startswith("event:") else {"stream": text})

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def wire(api: FakeMessagesAPI) -> Iterator[Wire]:
    w = Wire(api)
    yield w
    w.close()


def ratelimit_headers(resp: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in resp.getheaders() if k.lower().startswith("anthropic-ratel")}


def reset_in(resp: Any, bucket: str) -> float:
    """Seconds from now until the ``reset`` time of ``bucket`` (RFC 3339, UTC)."""
    value = resp.getheader(f"anthropic-ratelimit-{bucket}-reset")
    assert value.endswith("Z")
    moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    assert moment.utcoffset() == timedelta(0)
    return (moment - datetime.now(timezone.utc)).total_seconds()


def error_of(exc: anthropic.APIStatusError) -> dict[str, Any]:
    """The ``error`` object of an error answer's body."""
    body: Any = exc.body
    return dict(body["error"])


def cost(usage: dict[str, Any]) -> int:
    """What ITPM charges: fresh input and cache writes, not cache reads."""
    return int(usage["input_tokens"]) + int(usage["cache_creation_input_tokens"])


# -- the buckets, on a clock of the test's own (no sockets, no sleeping) ------------------------


def test_buckets_refill_continuously_and_retry_after_is_the_wait() -> None:
    limiter = _RateLimiter(RateLimits(rpm=60, minute=6.0), now=100.0)  # 10 requests/s
    assert all(limiter.admit(100.0, 0) is None for _ in range(60))
    refusal = limiter.admit(100.0, 0)
    assert refusal is not None and refusal.status == 429 and refusal.limit == "requests"
    assert refusal.headers["retry-after"] == "1"  # 0.1 s, in whole seconds, at least 1
    assert "60 requests per minute" in refusal.message
    # 0.35 s later 3.5 requests have come back: not a reset on the (scaled) minute
    assert [limiter.admit(100.35, 0) is None for _ in range(4)] == [True, True, True, False]
    wall = datetime(2030, 1, 1, tzinfo=timezone.utc)
    headers = limiter.headers(100.35, wall)
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"  # 0.5 left: exact, down
    # full again after (60 - 0.5) / 10 s
    assert headers["anthropic-ratelimit-requests-reset"] == "2030-01-01T00:00:05.950000Z"
    assert set(headers) == {
        f"anthropic-ratelimit-requests-{k}" for k in ("limit", "remaining", "reset")
    }
    # a long quiet spell fills the bucket to its capacity, no further
    limiter.admit(1000.0, 0)
    assert limiter.buckets["requests"].level == 59


def test_token_buckets_combined_rounded_and_output_charged_after() -> None:
    limiter = _RateLimiter(RateLimits(itpm=6000, otpm=3000, minute=60.0), now=0.0)
    assert limiter.admit(0.0, 1500) is None
    limiter.spend_output(0.0, 3100)  # the output bucket may go below zero...
    refusal = limiter.admit(0.0, 10)  # ...and refuses while at or below it
    assert refusal is not None and refusal.limit == "output-tokens"
    assert "3000 output tokens per minute" in refusal.message
    assert refusal.headers["retry-after"] == "2"  # back to 0 after 100 tokens at 50/s
    headers = limiter.headers(0.0, datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert headers["anthropic-ratelimit-input-tokens-remaining"] == "4000"  # 4500, rounded down
    assert headers["anthropic-ratelimit-output-tokens-remaining"] == "0"
    assert headers["anthropic-ratelimit-tokens-limit"] == "9000"
    assert headers["anthropic-ratelimit-tokens-remaining"] == "4000"
    # tokens: the later reset of the two (output: 3100 tokens at 50/s = 62 s)
    assert headers["anthropic-ratelimit-tokens-reset"] == "2030-01-01T00:01:02.000000Z"
    assert "anthropic-ratelimit-requests-limit" not in headers
    # a request bigger than the whole ITPM can never fit: refused, and not worth retrying
    never = limiter.admit(100.0, 6001)
    assert never is not None and never.limit == "input-tokens"
    assert never.headers["x-should-retry"] == "false" and "never" in never.message


def test_rate_limits_are_validated() -> None:
    for bad in ({"rpm": 0}, {"itpm": -1}, {"otpm": 1.5}, {"minute": 0.0}):
        with pytest.raises(ValueError):
            RateLimits(**bad)
    options = ServerOptions(awkward=False, rate_limits=RateLimits(rpm=5))
    api = FakeMessagesAPI(options, seed=3)
    assert api.rate_limits == RateLimits(rpm=5) and api.seed == 3 and not api.awkward


# -- on the wire -----------------------------------------------------------------------------------


def test_headers_on_200_stream_and_429_are_consistent(api: FakeMessagesAPI, wire: Wire) -> None:
    # a long "minute": the buckets barely refill while the test runs, however slowly
    api.rate_limits = RateLimits(rpm=3, itpm=100_000, otpm=50_000, minute=6000.0)
    resp, message = wire.post(trigger_body())
    assert resp.status == 200
    got = ratelimit_headers(resp)
    assert {k.rsplit("-", 1)[0] for k in got} == {f"anthropic-ratelimit-{b}" for b in BUCKETS}
    assert got["anthropic-ratelimit-requests-limit"] == "3"
    assert got["anthropic-ratelimit-requests-remaining"] == "2"  # exact
    assert got["anthropic-ratelimit-input-tokens-limit"] == "100000"
    assert got["anthropic-ratelimit-input-tokens-remaining"] == "99000"  # rounded down
    assert got["anthropic-ratelimit-output-tokens-remaining"] == "50000"  # charged after
    assert got["anthropic-ratelimit-tokens-limit"] == "150000"
    assert got["anthropic-ratelimit-tokens-remaining"] == "149000"
    assert 0 < reset_in(resp, "requests") <= 2000 + 1  # one request back in 6000 s / 3
    assert 0 < reset_in(resp, "input-tokens") <= 6000
    assert reset_in(resp, "tokens") >= reset_in(resp, "input-tokens") - 0.5
    out = message["usage"]["output_tokens"]

    resp, stream = wire.post(trigger_body(stream=True))  # a stream carries them too
    assert resp.status == 200 and "message_stop" in stream["stream"]
    got = ratelimit_headers(resp)
    assert got["anthropic-ratelimit-requests-remaining"] == "1"
    assert got["anthropic-ratelimit-output-tokens-remaining"] == str((50_000 - out) // 1000 * 1000)
    assert 0 < reset_in(resp, "output-tokens") <= 6000

    wire.post(trigger_body())
    resp, error = wire.post(trigger_body())
    assert resp.status == 429
    assert error["type"] == "error" and error["error"]["type"] == "rate_limit_error"
    assert error["error"]["message"].startswith(
        "This request would exceed the rate limit for your organization of 3 requests per minute"
    )
    assert 1900 <= int(resp.getheader("retry-after")) <= 2000
    assert resp.getheader("retry-after-ms") is None
    assert ratelimit_headers(resp)["anthropic-ratelimit-requests-remaining"] == "0"
    assert api.stats["rate_limited"] == 1 and api.stats["rate_limited_by"] == {"requests": 1}
    assert api.stats["faults_injected"] == {} and len(api.rate_log) == 3
    # count_tokens is neither limited nor charged, and says nothing of the limits
    for _ in range(3):
        resp, counted = wire.post(trigger_body(), "/v1/messages/count_tokens")
        assert resp.status == 200 and counted["input_tokens"] > 0
        assert ratelimit_headers(resp) == {}
    assert api.stats["rate_limited"] == 1


def test_only_configured_buckets_appear_and_limits_can_change(
    api: FakeMessagesAPI, wire: Wire
) -> None:
    resp, _ = wire.post(trigger_body())
    assert ratelimit_headers(resp) == {}  # no limits: no headers
    api.rate_limits = RateLimits(itpm=600_000, minute=600_000.0)  # one token back a second
    resp, message = wire.post(trigger_body())
    got = ratelimit_headers(resp)
    assert {k.rsplit("-", 1)[0] for k in got} == {
        "anthropic-ratelimit-input-tokens",
        "anthropic-ratelimit-tokens",
    }
    expected = (600_000 - cost(message["usage"])) // 1000 * 1000
    assert got["anthropic-ratelimit-input-tokens-remaining"] == str(expected)
    assert got["anthropic-ratelimit-tokens-remaining"] == str(expected)
    api.rate_limits = RateLimits(rpm=1)  # fresh, full buckets
    assert wire.post(trigger_body())[0].status == 200
    resp, _ = wire.post(trigger_body())
    assert resp.status == 429
    # an error of another kind carries the headers as well
    resp, _ = wire.post({"model": "m"})
    assert (
        resp.status == 400 and ratelimit_headers(resp)["anthropic-ratelimit-requests-limit"] == "1"
    )
    api.rate_limits = None
    resp, _ = wire.post(trigger_body())
    assert resp.status == 200 and ratelimit_headers(resp) == {}


def test_retry_after_makes_the_sdk_retry_succeed(api: FakeMessagesAPI) -> None:
    api.rate_limits = RateLimits(rpm=2, minute=1.0)  # one request back every 0.5 s
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c:
        c.messages.create(**trigger_body())
        c.messages.create(**trigger_body())
        with pytest.raises(anthropic.RateLimitError) as err:
            c.messages.create(**trigger_body(), stream=True)
        assert err.value.response.headers["retry-after"] == "1"
        assert error_of(err.value)["type"] == "rate_limit_error"
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=1) as c:
        assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
    assert api.stats["rate_limited"] in (1, 2)  # 2 if the SDK's call came before 0.5 s
    assert api.stats["calls"] == 3 + api.stats["rate_limited"]


def test_a_burst_of_twice_the_limit_gets_about_half_refused(
    api: FakeMessagesAPI, wire: Wire
) -> None:
    rpm, minute = 20, 10.0  # 2 requests back a second
    api.rate_limits = RateLimits(rpm=rpm, minute=minute)
    started = time.monotonic()
    statuses = [wire.post(trigger_body())[0].status for _ in range(2 * rpm)]
    elapsed = time.monotonic() - started
    accepted = statuses.count(200)
    assert set(statuses) == {200, 429}
    # the whole bucket, plus at most what refilled while the burst lasted
    assert rpm <= accepted <= rpm + math.floor(elapsed * rpm / minute)
    assert statuses[:rpm] == [200] * rpm
    assert api.stats["rate_limited"] == statuses.count(429) == len(statuses) - accepted
    assert len(api.rate_log) == accepted


def test_no_window_holds_more_than_twice_the_limit_under_load(api: FakeMessagesAPI) -> None:
    rpm, minute = 10, 0.4
    api.rate_limits = RateLimits(rpm=rpm, minute=minute)
    stop = time.monotonic() + 1.0

    def hammer() -> None:
        w = Wire(api)
        while time.monotonic() < stop:
            w.post(trigger_body())
        w.close()

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    most, _ = api.peak_window()
    assert rpm <= most <= 2 * rpm  # capacity plus one window's refill
    assert api.peak_window(window=minute / 10)[0] <= rpm + 1
    assert api.stats["rate_limited"] > 0


def test_itpm_binds_first_with_big_requests(api: FakeMessagesAPI, wire: Wire) -> None:
    api.prompt_padding = 1000
    api.rate_limits = RateLimits(rpm=100, itpm=3000, minute=600.0)  # 5 tokens back a second
    first, message = wire.post(trigger_body())
    spent = cost(message["usage"])
    assert first.status == 200 and 1000 < spent < 1500
    assert wire.post(trigger_body("another question about merging pdf files"))[0].status == 200
    resp, error = wire.post(trigger_body("a third question about pdf pages"))
    assert resp.status == 429
    assert "of 3000 input tokens per minute" in error["error"]["message"]
    assert api.stats["rate_limited_by"] == {"input-tokens": 1}
    assert ratelimit_headers(resp)["anthropic-ratelimit-requests-remaining"] == "98"
    assert 10 <= int(resp.getheader("retry-after")) <= 300  # hundreds of tokens short
    # bigger than the whole bucket: refused every time, and the SDK does not retry it
    api.prompt_padding = 5000
    with (
        anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=3) as c,
        pytest.raises(anthropic.RateLimitError) as err,
    ):
        c.messages.create(**trigger_body())
    assert "never" in error_of(err.value)["message"]
    assert api.stats["rate_limited_by"] == {"input-tokens": 2}


def test_cache_reads_are_not_counted(api: FakeMessagesAPI, wire: Wire) -> None:
    api.rate_limits = RateLimits(itpm=5000, minute=600.0)
    big = [{"type": "text", "text": "rules " * 3000, "cache_control": {"type": "ephemeral"}}]
    resp, first = wire.post(trigger_body(system=big))
    assert resp.status == 200 and first["usage"]["cache_creation_input_tokens"] > 4000
    # the same prefix again: read from the cache, so it fits in what is left
    resp, second = wire.post(trigger_body("Another question about charts", system=big))
    assert resp.status == 200 and second["usage"]["cache_read_input_tokens"] > 4000
    assert [c for _, c in api.rate_log] == [cost(first["usage"]), cost(second["usage"])]
    assert cost(second["usage"]) < 100
    # a new prefix would be written: it does not fit, and a refused request writes no cache
    other = [{**big[0], "text": "other " * 3000}]
    assert wire.post(trigger_body(system=other))[0].status == 429
    api.rate_limits = None
    resp, third = wire.post(trigger_body(system=other))
    assert third["usage"]["cache_read_input_tokens"] == 0


def test_a_rate_limit_is_not_an_injected_fault(api: FakeMessagesAPI, wire: Wire) -> None:
    api.rate_limits = RateLimits(rpm=5)
    api.faults = {"429": 1.0}
    resp, error = wire.post(trigger_body())
    assert resp.status == 429 and resp.getheader("retry-after") == "0"
    assert error["error"]["message"] == "Number of requests has exceeded your rate limit"
    # admitted first, then the fault: the request was charged and the headers say so
    assert ratelimit_headers(resp)["anthropic-ratelimit-requests-remaining"] == "4"
    assert api.stats["faults_injected"] == {"429": 1} and api.stats["rate_limited"] == 0


# -- the first-tries fault ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error", "etype"),
    [
        ("429", anthropic.RateLimitError, "rate_limit_error"),
        ("500", anthropic.InternalServerError, "api_error"),
        ("529", anthropic.OverloadedError, "overloaded_error"),
    ],
)
def test_first_tries_fault_refuses_each_request_n_times(
    api: FakeMessagesAPI, kind: str, error: type[anthropic.APIStatusError], etype: str
) -> None:
    api.fail_first_tries = {kind: 2}
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c:
        for _ in range(2):
            with pytest.raises(error) as err:
                c.messages.create(**trigger_body())
            assert error_of(err.value)["type"] == etype
            assert err.value.response.headers["x-should-retry"] == "true"
        assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
        assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
        with pytest.raises(error):  # another request: its own first tries
            c.messages.create(**trigger_body("merge the PDF documents of March"))
    assert api.stats["first_try_faults"] == {kind: 3}
    assert api.stats["faults_injected"] == {} and api.stats["rate_limited"] == 0
    assert api.stats["decisions"] == {"skill:pdf-merge": 2}


def test_every_request_meets_two_429s_and_the_sdk_gets_through(api: FakeMessagesAPI) -> None:
    api.fail_first_tries = {"429": 2}
    api.retry_after_ms = 1  # the SDK waits 0.5 s and more after "retry-after: 0"
    queries = [f"merge the quarterly PDF documents, part {i}" for i in range(6)]
    errors: list[Exception] = []

    def ask(c: anthropic.Anthropic, query: str) -> None:
        try:
            c.messages.create(**trigger_body(query))
        except anthropic.APIError as exc:  # pragma: no cover - reported below
            errors.append(exc)

    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=2) as c:
        threads = [threading.Thread(target=ask, args=(c, q)) for q in queries]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert api.stats["first_try_faults"] == {"429": 12} and api.stats["calls"] == 18
    seen = [r["messages"][0]["content"][1]["text"] for r in api.requests]
    assert all(seen.count(q) == 3 for q in queries)
    api.fail_first_tries = {"429": 1, "529": 1}  # kinds in order; assigning resets the counts
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=1) as c:
        with pytest.raises(anthropic.OverloadedError):
            c.messages.create(**trigger_body(queries[0]))
        assert c.messages.create(**trigger_body(queries[0])).stop_reason == "tool_use"
    with pytest.raises(ValueError):
        api.fail_first_tries = {"404": 1}


# -- batch creates ---------------------------------------------------------------------------------


def test_batch_creates_are_not_rate_limited_but_can_be_refused_with_retry_after(
    api: FakeMessagesAPI,
) -> None:
    api.rate_limits = RateLimits(rpm=1)
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c:
        for _ in range(2):
            c.messages.batches.create(requests=ONE_ITEM)
        api.refuse_batch_creates(1, retry_after=1)
        with pytest.raises(anthropic.RateLimitError) as err:
            c.messages.batches.create(requests=ONE_ITEM)
        assert err.value.response.headers["retry-after"] == "1"
        assert err.value.response.headers["x-should-retry"] == "true"
    api.refuse_batch_creates(1, retry_after=1)
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=2) as c:
        batch = c.messages.batches.create(requests=ONE_ITEM)
    assert batch.processing_status == "in_progress"
    assert [status for _, status in api.batch_create_log] == [200, 200, 429, 429, 200]
    (refused, _), (retried, _) = api.batch_create_log[-2:]
    assert retried - refused >= 0.9  # the SDK waited out the retry-after
    assert api.stats["batches_created"] == 3 and api.stats["rate_limited"] == 0
