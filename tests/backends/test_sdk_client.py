"""The SDK client's share of a run: retry-after read as the SDK reads it, how many retries fit
in the time a run has left, attempts counted per thread, and credentials found as the SDK
finds them."""

from __future__ import annotations

import threading
import time

import pytest

from pytest_skilltrigger.backends.api.errors import describe_error, with_request_id
from pytest_skilltrigger.backends.api.sdk_client import (
    RunState,
    SdkClient,
    credentials_configured,
    retry_after,
)


@pytest.mark.parametrize(
    "headers,expected",
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),  # the finer one wins
        ({"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),  # a date: not a number
        ({}, None),
    ],
)
def test_retry_after_is_read_as_the_sdk_reads_it(
    headers: dict[str, str], expected: float | None
) -> None:
    assert retry_after(headers) == expected


def test_retries_fit_in_half_the_time_a_run_has_left() -> None:
    client = SdkClient(timeout=30.0, max_retries=6)
    now = time.monotonic()
    # an endpoint that never answered gets one retry however long the run may take
    assert client.sdk_retries(RunState(now + 300.0)) == 1
    client.answered.set()  # any answer, an error status too
    # back-off waits 0.5, 1, 2, 4, 8, 8 s: within 15 s (half of 30) fit 0.5+1+2+4 = 7.5
    assert client.sdk_retries(RunState(now + 30.0)) == 4
    assert client.sdk_retries(RunState(now + 2.5)) == 1
    assert client.sdk_retries(RunState(now + 0.5)) == 0
    # never more than the SDK was told it may make
    few = SdkClient(30.0, 2)
    few.answered.set()
    assert few.sdk_retries(RunState(now + 300.0)) == 2


def test_each_thread_counts_its_own_run() -> None:
    client = SdkClient(30.0, 2)
    seen: dict[str, int] = {}

    class Request:
        def __init__(self) -> None:
            self.extensions: dict[str, object] = {}

    def run(name: str, attempts: int) -> None:
        with client.running(RunState(time.monotonic() + 10)) as state:
            for _ in range(attempts):
                client._on_request(Request())
            seen[name] = state.sent

    threads = [threading.Thread(target=run, args=(f"t{n}", n)) for n in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"t1": 1, "t2": 2, "t3": 3, "t4": 4}
    client._on_request(Request())  # outside a run: nothing to count, no error


def test_an_attempt_gets_only_the_time_its_run_has_left() -> None:
    client = SdkClient(30.0, 2)

    class Request:
        def __init__(self) -> None:
            self.extensions: dict[str, object] = {"timeout": {"connect": 5.0, "read": None}}

    request = Request()
    with client.running(RunState(time.monotonic() + 2.0)):
        client._on_request(request)
    timeout = request.extensions["timeout"]
    assert timeout["connect"] <= 2.0 and timeout["read"] <= 2.0
    assert timeout["write"] <= 2.0 and timeout["pool"] <= 2.0


def test_a_retry_after_past_the_run_is_not_waited_for() -> None:
    client = SdkClient(30.0, 2)

    class Response:
        status_code = 429

        def __init__(self) -> None:
            self.headers = {"retry-after": "60"}

    response = Response()
    with client.running(RunState(time.monotonic() + 5.0)) as state:
        client._on_response(response)
    assert response.headers["x-should-retry"] == "false"
    assert state.gave_up_waiting == 60.0


def test_credentials_in_the_environment_need_no_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert credentials_configured()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "t")
    assert credentials_configured()


def test_an_api_error_reads_as_one_line_with_its_request_id() -> None:
    class Error:
        status_code = 529
        type = "overloaded_error"
        api_message = "Overloaded x-api-key: sk-ant-api03-abcdefghijklmnop"
        request_id = "req_1"

    text = describe_error(Error())
    assert text == "529 overloaded_error: Overloaded x-api-key: [REDACTED] (request id req_1)"
    assert with_request_id("boom", None) == "boom"
