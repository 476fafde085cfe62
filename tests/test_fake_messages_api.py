"""Tests of the fake Messages API, through the real ``anthropic`` SDK over real sockets.

Why through the SDK: the fake is only useful if the SDK reads it exactly as it reads the real
service (same exceptions, same accumulated messages); a raw-bytes test alone would not prove it.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any

import anthropic
import httpcore2
import httpx2
import pytest

from pytest_skilltrigger.backends.api.request import build_request
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.request_layouts import layout_for
from tests.fake_messages_api import FakeMessagesAPI, decide, extract_query, parse_listing

MODEL = "claude-test-1"
LISTING = (
    "<system-reminder>\nThe following skills are available for use with the Skill tool:\n\n"
    "- pdf-merge: Merge several PDF documents into one, reorder and rotate pages\n"
    "- chart-maker: Create bar charts and line charts from spreadsheet data\n"
    "</system-reminder>"
)
SKILL_TOOL = {
    "name": "Skill",
    "description": "Execute a skill listed in the conversation.",
    "input_schema": {
        "type": "object",
        "properties": {"skill": {"type": "string"}, "args": {"type": "string"}},
        "required": ["skill"],
    },
}
# A stream cut mid-body: httpx2 maps the read error to its own, but under load the error of
# the chunked read sometimes surfaces from httpcore2 unmapped (seen in the full suite); the
# backend treats both as a failed run (it catches the HTTP library's read errors).
CUT_STREAM = (httpx2.RemoteProtocolError, httpcore2.RemoteProtocolError)
MERGE_QUERY = "Could you merge the quarterly PDF documents into a single report?"


def trigger_body(query: str = MERGE_QUERY, **extra: Any) -> dict[str, Any]:
    """The request shape the plugin sends: listing block (cached), then the query."""
    content = [
        {"type": "text", "text": LISTING, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": query},
    ]
    return {
        "model": MODEL,
        "max_tokens": 512,
        "tools": [SKILL_TOOL],
        "messages": [{"role": "user", "content": content}],
        **extra,
    }


def improve_body(current: str = "Merge PDFs.") -> dict[str, Any]:
    prompt = (
        f"<current_description>{current}</current_description>\n"
        "Write a better description inside <new_description> tags."
    )
    return {"model": MODEL, "max_tokens": 512, "messages": [{"role": "user", "content": prompt}]}


@pytest.fixture
def api() -> Any:
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def client(api: FakeMessagesAPI) -> Any:
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c:
        yield c


def raw_post(api: FakeMessagesAPI, body: Any, headers: dict[str, str] | None = None) -> Any:
    """POST without the SDK, to see the frames on the wire."""
    conn = http.client.HTTPConnection("127.0.0.1", int(api.url.rsplit(":", 1)[1]), timeout=5)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    hdrs = {"content-type": "application/json", "x-api-key": "test-key", **(headers or {})}
    conn.request("POST", "/v1/messages?beta=true", body=data, headers=hdrs)
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp, text


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in text.split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


# -- the keyword model ------------------------------------------------------------------------


def test_keyword_model_prefix_and_stem_matches() -> None:
    listing = [
        ("pdf-merge", "Merge PDF documents"),
        ("chart-maker", "Create bar charts from spreadsheet data"),
    ]
    assert decide("merging two documents", listing) == "skill:pdf-merge"
    assert decide("a bar chart of the spreadsheet", listing) == "skill:chart-maker"
    assert decide("run the test suite", listing) == "tool:Bash"
    assert decide("what is in src/app.py?", listing) == "tool:Read"
    assert decide("hello there, how are you", listing) == "text"
    # Ties go to the first listed skill.
    assert decide("data documents", [("a", "documents data"), ("b", "data documents")]) == "skill:a"


def test_claude_code_shape_listing_after_query() -> None:
    body = {
        "system": [{"type": "text", "text": "You are a CLI.\n- IMPORTANT: not a skill"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<system-reminder>\nContext.\n</system-reminder>"},
                    {"type": "text", "text": MERGE_QUERY},
                ],
            },
            {"role": "user", "content": LISTING},
        ],
    }
    assert extract_query(body) == MERGE_QUERY
    assert [n for n, _ in parse_listing(body)] == ["pdf-merge", "chart-maker"]


# -- streaming through the SDK -------------------------------------------------------------


def test_stream_create_assembles_skill_call(client: anthropic.Anthropic) -> None:
    kinds: set[str] = set()
    for _ in range(4):  # several responses: shapes vary per response
        blocks: dict[int, dict[str, Any]] = {}
        stop_reason = None
        for event in client.messages.create(**trigger_body(), stream=True):
            if event.type == "content_block_start":
                blocks[event.index] = {
                    "type": event.content_block.type,
                    "json": "",
                    "name": getattr(event.content_block, "name", None),
                }
            elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
                blocks[event.index]["json"] += event.delta.partial_json
            elif event.type == "message_delta":
                stop_reason = event.delta.stop_reason
        kinds |= {b["type"] for b in blocks.values()}
        tool = [b for b in blocks.values() if b["type"] == "tool_use"]
        assert [b["name"] for b in tool] == ["Skill"]
        assert json.loads(tool[0]["json"]) == {"skill": "pdf-merge"}
        assert stop_reason == "tool_use"
    assert "thinking" in kinds


def test_stream_helper_and_non_stream_agree(client: anthropic.Anthropic) -> None:
    with client.messages.stream(**trigger_body()) as stream:
        final = stream.get_final_message()
    plain = client.messages.create(**trigger_body())
    for message in (final, plain):
        tools = [b for b in message.content if b.type == "tool_use"]
        assert [(t.name, t.input) for t in tools] == [("Skill", {"skill": "pdf-merge"})]
        assert message.stop_reason == "tool_use"
        assert message.model == MODEL


def test_awkward_wire_format(api: FakeMessagesAPI) -> None:
    """Pings, "" first fragments, tiny fragments and thinking all show up on the wire."""
    seen_ping = seen_empty = seen_thinking = False
    max_fragment = 0
    for _ in range(12):
        resp, text = raw_post(api, trigger_body(stream=True))
        assert resp.status == 200
        assert resp.getheader("content-type").startswith("text/event-stream")
        assert resp.getheader("request-id").startswith("req_fake_")
        events = sse_events(text)
        names = [e for e, _ in events]
        assert names[0] == "message_start" and names[-1] == "message_stop"
        assert all(e == d["type"] for e, d in events)
        seen_ping |= "ping" in names
        for _, d in events:
            if d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta":
                seen_empty |= d["delta"]["partial_json"] == ""
                max_fragment = max(max_fragment, len(d["delta"]["partial_json"]))
            if d["type"] == "content_block_start":
                seen_thinking |= d["content_block"]["type"] == "thinking"
    assert seen_ping and seen_empty and seen_thinking
    assert 1 <= max_fragment <= 6


def test_clean_stream_is_minimal() -> None:
    with FakeMessagesAPI(awkward=False) as api:
        _, text = raw_post(api, trigger_body(stream=True))
    names = [e for e, _ in sse_events(text)]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_second_turn_with_tool_result_ends(client: anthropic.Anthropic) -> None:
    body = trigger_body()
    body["messages"] += [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Skill",
                    "input": {"skill": "pdf-merge"},
                }
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Loaded."}],
        },
    ]
    message = client.messages.create(**body)
    assert message.stop_reason == "end_turn"
    assert [b.text for b in message.content if b.type == "text"] == ["Done."]


# -- errors and faults ---------------------------------------------------------------------------


def test_wrong_key_unknown_model_bad_json_and_404(api: FakeMessagesAPI) -> None:
    with (
        anthropic.Anthropic(base_url=api.url, api_key="nope", max_retries=0) as bad,
        pytest.raises(anthropic.AuthenticationError) as err,
    ):
        bad.messages.create(**trigger_body())
    assert err.value.body["error"]["type"] == "authentication_error"
    # A bearer token is accepted too (ANTHROPIC_AUTH_TOKEN).
    with anthropic.Anthropic(base_url=api.url, auth_token="test-key", max_retries=0) as c:
        assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
    api.known_models = {"claude-known"}
    with (
        anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c,
        pytest.raises(anthropic.NotFoundError),
    ):
        c.messages.create(**trigger_body())
    resp, text = raw_post(api, b"{not json")
    assert resp.status == 400 and json.loads(text)["error"]["type"] == "invalid_request_error"
    conn = http.client.HTTPConnection("127.0.0.1", int(api.url.rsplit(":", 1)[1]), timeout=5)
    conn.request("GET", "/v1/models")
    resp = conn.getresponse()
    assert resp.status == 404 and json.loads(resp.read())["type"] == "error"
    conn.close()


@pytest.mark.parametrize(
    ("kind", "stream", "expected"),
    [
        ("429", True, anthropic.RateLimitError),
        ("529", False, anthropic.OverloadedError),
        ("500", False, anthropic.InternalServerError),
        ("stream_error", True, anthropic.APIStatusError),
        # mid-stream, the transport's own error (SDKs before 2.17), or wrapping it (2.17 on)
        ("drop", True, (*CUT_STREAM, anthropic.APIConnectionError)),
        ("drop", False, anthropic.APIConnectionError),
    ],
)
def test_fault_raises_sdk_error(
    api: FakeMessagesAPI,
    client: anthropic.Anthropic,
    kind: str,
    stream: bool,
    expected: type[Exception] | tuple[type[Exception], ...],
) -> None:
    api.script(MERGE_QUERY, ["skill:chart-maker", "text"])
    api.faults = {kind: 1.0}
    with pytest.raises(expected) as err:
        if stream:
            for _ in client.messages.create(**trigger_body(), stream=True):
                pass
        else:
            client.messages.create(**trigger_body())
    if kind == "429":
        assert err.value.response.headers["retry-after"] == "0"
    if isinstance(err.value, anthropic.APIConnectionError) and stream:
        assert isinstance(err.value.__cause__, CUT_STREAM)  # the cut, not a refused connection
    if kind == "stream_error":
        assert type(err.value) is anthropic.APIStatusError
        assert err.value.body["error"]["type"] == "overloaded_error"
    assert api.stats["faults_injected"] == {kind: 1}
    assert api.stats["decisions"] == {}
    # Faults do not advance scripted cycles: the next good call gets the first outcome.
    api.faults = {}
    message = client.messages.create(**trigger_body())
    assert [b.input for b in message.content if b.type == "tool_use"] == [{"skill": "chart-maker"}]


def test_stream_helper_drop_and_hang(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    api.faults = {"drop": 1.0}
    with (
        pytest.raises((*CUT_STREAM, httpx2.TransportError, anthropic.APIConnectionError)),
        client.messages.stream(**trigger_body()) as stream,
    ):
        stream.get_final_message()
    api.faults = {"hang": 1.0}
    api.hang_seconds = 2.0
    with pytest.raises(anthropic.APITimeoutError):
        client.with_options(timeout=0.2).messages.create(**trigger_body())


def test_sdk_retries_recover_from_429(api: FakeMessagesAPI) -> None:
    api.faults = {"429": 0.5}
    api.retry_after_ms = 1
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=8) as c:
        for _ in range(5):
            assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
    assert api.stats["faults_injected"].get("429", 0) >= 1
    assert api.stats["decisions"] == {"skill:pdf-merge": 5}


# -- scripting, improvement, caching, connections -----------------------------------------------


def test_scripted_outcomes_cycle(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    api.script("hi", ["skill:chart-maker", "tool:Bash", "text"])
    got = []
    for _ in range(4):
        message = client.messages.create(**trigger_body("hi"))
        tool = [b for b in message.content if b.type == "tool_use"]
        got.append(f"{tool[0].name}:{tool[0].input.get('skill', '')}" if tool else "text")
    assert got == ["Skill:chart-maker", "Bash:", "text", "Skill:chart-maker"]


def test_improvement_requests(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    api.proposals = ["First proposal.", "Second proposal."]
    first = client.messages.create(**improve_body())
    with client.messages.stream(**improve_body()) as stream:
        second = stream.get_final_text()
    third = client.messages.create(**improve_body("Old text."))

    def text(m: Any) -> str:
        return "".join(b.text for b in m.content if b.type == "text")

    assert "<new_description>First proposal.</new_description>" in text(first)
    assert "<new_description>Second proposal.</new_description>" in second
    assert "<new_description>Old text.</new_description>" in text(third)
    assert api.stats["improve_calls"] == 3 and api.stats["trigger_calls"] == 0
    assert len(api.requests) == 3 and len(api.request_headers) == 3


def test_prompt_cache_accounting(client: anthropic.Anthropic) -> None:
    first = client.messages.create(**trigger_body())
    second = client.messages.create(**trigger_body("Another question about charts"))
    assert first.usage.cache_creation_input_tokens > 0
    assert first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens > 0
    assert (
        client.messages.count_tokens(model=MODEL, messages=trigger_body()["messages"]).input_tokens
        > 0
    )


def test_keep_alive_reuses_one_connection(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    for _ in range(3):
        client.messages.create(**trigger_body())
        with client.messages.stream(**trigger_body()) as stream:
            stream.get_final_message()
    assert api.stats["connections"] == 1
    assert api.stats["calls"] == 6


def test_concurrent_calls_and_headers(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    api.latency = 0.1
    errors: list[Exception] = []

    def call() -> None:
        try:
            client.messages.create(**trigger_body())
        except anthropic.APIError as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert api.stats["in_flight_max"] > 1
    # SDK 2.14 sends an API key as "Authorization: Bearer", not "x-api-key".
    assert all(
        h.get("x-api-key") == "test-key" or h.get("authorization") == "Bearer test-key"
        for h in api.request_headers
    )


def test_fixture_points_sdk_at_server(fake_api: FakeMessagesAPI) -> None:
    with anthropic.Anthropic(max_retries=0) as c:
        assert c.messages.create(**trigger_body()).stop_reason == "tool_use"
    assert fake_api.stats["trigger_calls"] == 1


# -- Message Batches ----------------------------------------------------------------------------

CHART_QUERY = "Please create a bar chart from the spreadsheet data"


def batch_items(*queries: str, **extra: Any) -> list[dict[str, Any]]:
    """Batch requests ``q-0``, ``q-1``... of trigger bodies (not streamed: a batch refuses it)."""
    return [
        {"custom_id": f"q-{i}", "params": trigger_body(q, **extra)} for i, q in enumerate(queries)
    ]


def poll_until_ended(client: anthropic.Anthropic, batch_id: str) -> tuple[Any, list[Any]]:
    """Retrieve until the batch has ended; the last batch and every one seen on the way."""
    seen = []
    for _ in range(20):
        batch = client.messages.batches.retrieve(batch_id)
        seen.append(batch)
        if batch.processing_status == "ended":
            return batch, seen
    raise AssertionError(f"batch {batch_id} never ended: {seen[-1]}")


def results_by_id(client: anthropic.Anthropic, batch_id: str) -> dict[str, Any]:
    return {line.custom_id: line.result for line in client.messages.batches.results(batch_id)}


def decision(result: Any) -> str:
    """What a succeeded result decided, in the fake's outcome words."""
    tools = [b for b in result.message.content if b.type == "tool_use"]
    if not tools:
        return "text"
    if tools[0].name == "Skill":
        return f"skill:{tools[0].input['skill']}"
    return f"tool:{tools[0].name}"


def raw_request(
    api: FakeMessagesAPI, method: str, path: str, body: Any = None, key: str = "test-key"
) -> tuple[Any, str]:
    """Any request without the SDK (raw paths, raw bodies, raw response headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", int(api.url.rsplit(":", 1)[1]), timeout=30)
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={"x-api-key": key})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    return resp, text


def test_batch_lifecycle_follows_live_rules(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    api.batch_polls = 2
    api.script(MERGE_QUERY, ["skill:chart-maker", "text", "tool:Bash", "skill:pdf-merge"])
    items = batch_items(MERGE_QUERY, MERGE_QUERY, MERGE_QUERY, CHART_QUERY)
    created = client.messages.batches.create(requests=items)
    assert created.id == "msgbatch_fake_1" and created.type == "message_batch"
    assert created.processing_status == "in_progress"
    assert created.request_counts.processing == 4 and created.results_url is None
    assert created.ended_at is None and created.cancel_initiated_at is None
    assert created.archived_at is None
    assert (created.expires_at - created.created_at).total_seconds() == 24 * 3600

    ended, seen = poll_until_ended(client, created.id)
    assert len(seen) == 3  # batch_polls retrieves in progress, then ended
    progress = [b.request_counts for b in seen[:2]]
    assert [c.processing + c.succeeded for c in progress] == [4, 4]
    assert [c.errored + c.expired + c.canceled for c in progress] == [0, 0]
    assert progress[0].succeeded < progress[1].succeeded < 4
    assert ended.results_url == f"{api.url}/v1/messages/batches/{created.id}/results"
    assert ended.ended_at is not None and ended.ended_at >= created.created_at
    assert ended.request_counts.succeeded == 4 and ended.request_counts.processing == 0

    lines = list(client.messages.batches.results(created.id))
    assert sorted(line.custom_id for line in lines) == ["q-0", "q-1", "q-2", "q-3"]
    assert [line.custom_id for line in lines] != ["q-0", "q-1", "q-2", "q-3"]  # shuffled
    results = {line.custom_id: line.result for line in lines}
    # Decided in submission order, so the scripted cycle lands request by request.
    assert {k: decision(r) for k, r in results.items()} == {
        "q-0": "skill:chart-maker",
        "q-1": "text",
        "q-2": "tool:Bash",
        "q-3": "skill:chart-maker",  # not scripted: the keyword model decides
    }
    for result in results.values():
        assert result.type == "succeeded"
        assert result.message.model == MODEL and result.message.usage.output_tokens > 0
        assert result.message.stop_reason in ("tool_use", "end_turn")
    # The script advanced by three: the next live call gets its fourth outcome.
    message = client.messages.create(**trigger_body())
    assert [b.input for b in message.content if b.type == "tool_use"] == [{"skill": "pdf-merge"}]

    stats = api.stats
    assert stats["batches_created"] == 1 and stats["batch_requests"] == 4
    assert stats["batch_polls"] == 4  # results() retrieves the batch once more itself
    assert stats["batch_results_fetches"] == 1 and stats["batch_cancels"] == 0
    assert stats["batch_results"] == {"succeeded": 4}
    assert stats["decisions"] == {
        "skill:chart-maker": 2,
        "text": 1,
        "tool:Bash": 1,
        "skill:pdf-merge": 1,
    }
    assert stats["calls"] == 1 and stats["trigger_calls"] == 1  # the live call only
    assert api.batch_requests_log == [item["params"] for item in items]
    assert len(api.requests) == 1


def test_batch_results_wire_format_and_not_ready(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    created = client.messages.batches.create(requests=batch_items(MERGE_QUERY))
    with pytest.raises(anthropic.AnthropicError, match="No `results_url`"):
        client.messages.batches.results(created.id)  # its own retrieve: still in progress
    path = f"/v1/messages/batches/{created.id}/results"
    resp, text = raw_request(api, "GET", path)
    assert resp.status == 400
    error = json.loads(text)["error"]
    assert error["type"] == "invalid_request_error" and "not available yet" in error["message"]
    assert client.messages.batches.retrieve(created.id).processing_status == "ended"
    resp, text = raw_request(api, "GET", path)
    assert resp.status == 200 and resp.getheader("content-type") == "application/binary"
    assert text.endswith("\n") and text.count("\n") == 1
    line = json.loads(text)
    assert line["custom_id"] == "q-0" and line["result"]["type"] == "succeeded"
    assert line["result"]["message"]["type"] == "message"
    for missing in ("msgbatch_nope", "msgbatch_nope/results"):
        resp, text = raw_request(api, "GET", f"/v1/messages/batches/{missing}")
        assert resp.status == 404 and json.loads(text)["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.retrieve("msgbatch_nope")
    with pytest.raises(anthropic.NotFoundError):
        client.messages.batches.cancel("msgbatch_nope")
    assert api.stats["batch_results_fetches"] == 3


def test_batch_script_errored_and_expired(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    api.script(MERGE_QUERY, ["text", "skill:chart-maker"])
    api.batch_script(MERGE_QUERY, ["errored", "expired", "ok", "errored:permission_error"])
    items = batch_items(*[MERGE_QUERY] * 6)
    created = client.messages.batches.create(requests=items)
    ended, _ = poll_until_ended(client, created.id)
    counts = ended.request_counts
    assert (counts.succeeded, counts.errored, counts.expired, counts.canceled) == (3, 2, 1, 0)
    results = results_by_id(client, created.id)
    assert [results[f"q-{i}"].type for i in range(6)] == [
        "errored",
        "expired",
        "succeeded",
        "errored",
        "succeeded",  # the scripted list is used up: normal again
        "succeeded",
    ]
    assert results["q-0"].error.type == "error"
    assert results["q-0"].error.error.type == "overloaded_error"
    assert results["q-3"].error.error.type == "permission_error"
    # Failed requests do not advance the outcome script, as failed live calls do not.
    assert [decision(results[k]) for k in ("q-2", "q-4", "q-5")] == [
        "text",
        "skill:chart-maker",
        "text",
    ]
    assert api.stats["decisions"] == {"text": 2, "skill:chart-maker": 1}
    assert api.stats["batch_results"] == {"errored": 2, "expired": 1, "succeeded": 3}
    with pytest.raises(ValueError):
        api.batch_script(MERGE_QUERY, ["failed"])
    with pytest.raises(ValueError):
        api.batch_script(MERGE_QUERY, ["errored:"])


def test_batch_faults_are_seeded_per_request() -> None:
    def run(seed: int, faults: dict[str, float]) -> list[str]:
        with (
            FakeMessagesAPI(seed=seed) as api,
            anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as c,
        ):
            api.batch_polls = 0
            api.batch_faults = faults
            created = c.messages.batches.create(requests=batch_items(*[MERGE_QUERY] * 30))
            results = results_by_id(c, created.id)
            assert api.stats["faults_injected"] == {}  # live faults are another thing
            kinds = []
            for i in range(30):
                result = results[f"q-{i}"]
                kind = result.type
                if kind == "errored":
                    kind = result.error.error.type
                kinds.append(kind)
            return kinds

    assert set(run(0, {"errored": 1.0})) == {"overloaded_error", "api_error"}
    assert set(run(0, {"expired": 1.0})) == {"expired"}
    mixed = run(3, {"errored": 0.3, "expired": 0.3})
    assert mixed == run(3, {"errored": 0.3, "expired": 0.3})
    assert {"succeeded", "expired"} <= set(mixed) and len(set(mixed)) >= 3


def test_batch_cancel(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    api.batch_polls = 3
    created = client.messages.batches.create(requests=batch_items(*[MERGE_QUERY] * 4))
    first = client.messages.batches.retrieve(created.id)
    assert (first.request_counts.succeeded, first.request_counts.processing) == (1, 3)
    canceling = client.messages.batches.cancel(created.id)
    assert canceling.processing_status == "canceling"
    assert canceling.cancel_initiated_at is not None and canceling.results_url is None
    ended = client.messages.batches.retrieve(created.id)  # ends at the next retrieve
    assert ended.processing_status == "ended"
    counts = ended.request_counts
    assert (counts.succeeded, counts.canceled, counts.processing) == (1, 3, 0)
    results = results_by_id(client, created.id)
    # What the counts showed as done is kept; the rest is canceled, in submission order.
    assert [results[f"q-{i}"].type for i in range(4)] == [
        "succeeded",
        "canceled",
        "canceled",
        "canceled",
    ]
    again = client.messages.batches.cancel(created.id)  # already ended: unchanged
    assert again.processing_status == "ended" and again.request_counts == counts
    assert again.cancel_initiated_at == canceling.cancel_initiated_at

    other = client.messages.batches.create(requests=batch_items(MERGE_QUERY, CHART_QUERY))
    client.messages.batches.cancel(other.id)
    _, seen = poll_until_ended(client, other.id)
    assert len(seen) == 1 and seen[0].request_counts.canceled == 2
    assert api.stats["batch_cancels"] == 3
    assert api.stats["batch_results"] == {"succeeded": 1, "canceled": 5}
    assert api.stats["decisions"] == {"skill:pdf-merge": 1}


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ([], "at least 1 item"),
        ([{"custom_id": "has space", "params": trigger_body()}], "custom_id"),
        ([{"custom_id": "x" * 65, "params": trigger_body()}], "custom_id"),
        ([{"custom_id": "ok\n", "params": trigger_body()}], "custom_id"),
        (batch_items(MERGE_QUERY) + batch_items(CHART_QUERY), "not unique"),
        ([{"custom_id": "a", "params": "hi"}], "params"),
        ([{"custom_id": "a", "params": {"messages": []}}], "params.model"),
        ([{"custom_id": "a", "params": {"model": MODEL}}], "params.messages"),
        ([{"custom_id": "a", "params": trigger_body(stream=True)}], "params.stream"),
    ],
)
def test_batch_create_refusals(
    api: FakeMessagesAPI, client: anthropic.Anthropic, requests: Any, expected: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.batches.create(requests=requests)
    assert err.value.body["error"]["type"] == "invalid_request_error"
    assert expected in err.value.body["error"]["message"]
    assert api.stats["batches_created"] == 0 and api.batch_requests_log == []
    assert api.batch_headers == []


def test_batch_too_many_requests_and_wrong_key(api: FakeMessagesAPI) -> None:
    body = {"requests": [{"custom_id": f"r{i}", "params": {}} for i in range(100_001)]}
    resp, text = raw_request(api, "POST", "/v1/messages/batches", body)
    assert resp.status == 400 and "at most 100000" in json.loads(text)["error"]["message"]
    with (
        anthropic.Anthropic(base_url=api.url, api_key="nope", max_retries=0) as bad,
        pytest.raises(anthropic.AuthenticationError),
    ):
        bad.messages.batches.create(requests=batch_items(MERGE_QUERY))
    with anthropic.Anthropic(base_url=api.url, api_key="test-key", max_retries=0) as good:
        created = good.messages.batches.create(requests=batch_items(MERGE_QUERY))
    for method, path in [
        ("GET", f"/v1/messages/batches/{created.id}"),
        ("GET", f"/v1/messages/batches/{created.id}/results"),
        ("POST", f"/v1/messages/batches/{created.id}/cancel"),
    ]:
        resp, text = raw_request(api, method, path, key="nope")
        assert resp.status == 401, path
        assert json.loads(text)["error"]["type"] == "authentication_error"
    assert api.stats["batches_created"] == 1


def test_batch_unknown_model_and_missing_max_tokens(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    api.known_models = {"claude-known"}
    items = batch_items(MERGE_QUERY, MERGE_QUERY, MERGE_QUERY)
    items[1]["params"]["model"] = "claude-known"
    items[2]["params"]["model"] = "claude-known"
    del items[2]["params"]["max_tokens"]
    created = client.messages.batches.create(requests=items)  # taken: checked per request
    ended, _ = poll_until_ended(client, created.id)
    assert (ended.request_counts.succeeded, ended.request_counts.errored) == (1, 2)
    results = results_by_id(client, created.id)
    assert results["q-0"].type == "errored"
    assert results["q-0"].error.error.type == "not_found_error"
    assert MODEL in results["q-0"].error.error.message
    assert results["q-1"].type == "succeeded"
    assert results["q-1"].message.model == "claude-known"
    assert results["q-2"].error.error.type == "invalid_request_error"
    assert api.stats["decisions"] == {"skill:pdf-merge": 1}


def test_batch_max_tokens_cuts_trailing_blocks(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    api.batch_polls = 0
    created = client.messages.batches.create(
        requests=[
            *batch_items(*[MERGE_QUERY] * 6, max_tokens=80),
            {"custom_id": "tiny", "params": trigger_body(max_tokens=1)},
        ]
    )
    results = results_by_id(client, created.id)
    tiny = results.pop("tiny").message
    assert (tiny.stop_reason, tiny.content, tiny.usage.output_tokens) == ("max_tokens", [], 1)
    kept = set()
    for result in results.values():
        message = result.message
        types = [b.type for b in message.content]
        if message.stop_reason == "max_tokens":
            assert "tool_use" not in types and message.usage.output_tokens == 80
            kept.update(types)
        else:
            assert message.stop_reason == "tool_use" and types[-1] == "tool_use"
            assert message.usage.output_tokens <= 80
    assert "thinking" in kept  # a capped answer keeps the leading blocks that fit
    assert {r.message.stop_reason for r in results.values()} == {"max_tokens", "tool_use"}
    # The cap does not change what was decided: every answer counts as a decision.
    assert api.stats["decisions"] == {"skill:pdf-merge": 7}
    assert [p["max_tokens"] for p in api.batch_requests_log] == [80] * 6 + [1]


def test_batch_of_plugin_requests_shares_the_prompt_cache(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    context = TriggerContext("pdf-merge", "Merge several PDF documents into one report.")
    queries = [MERGE_QUERY, "Combine these PDF files into one document", "hello there"]
    items = [
        {"custom_id": f"q-{i}", "params": build_request(context, q, MODEL)}
        for i, q in enumerate(queries)
    ]
    created = client.messages.batches.create(requests=items)
    poll_until_ended(client, created.id)
    results = results_by_id(client, created.id)
    usage = [results[f"q-{i}"].message.usage for i in range(3)]
    # Submission order: the first request writes the cached prefix, the others read its
    # shared part (tools and system prompt) and write their own messages: the listing is
    # cached with the query, where Claude Code marks it.
    assert usage[0].cache_creation_input_tokens > 0 and usage[0].cache_read_input_tokens == 0
    shared = usage[1].cache_read_input_tokens
    assert 0 < shared < usage[0].cache_creation_input_tokens
    assert [u.cache_read_input_tokens for u in usage[1:]] == [shared] * 2
    assert all(u.cache_creation_input_tokens > 0 for u in usage[1:])
    for i, query in enumerate(queries):
        params = api.batch_requests_log[i]
        assert params["max_tokens"] == layout_for(MODEL).max_tokens
        assert "cache_control" in params["tools"][-1]
        assert decision(results[f"q-{i}"]) == decide(query, parse_listing(params))
    assert decision(results["q-0"]) == "skill:pdf-merge"


def test_batch_beta_path(api: FakeMessagesAPI, client: anthropic.Anthropic) -> None:
    created = client.beta.messages.batches.create(
        requests=batch_items(MERGE_QUERY), betas=["message-batches-2024-09-24"]
    )
    assert type(created).__name__ == "BetaMessageBatch"
    assert api.batch_headers[-1]["anthropic-beta"] == "message-batches-2024-09-24"
    statuses = [client.beta.messages.batches.retrieve(created.id) for _ in range(2)]
    assert [b.processing_status for b in statuses] == ["in_progress", "ended"]
    assert type(statuses[-1]).__name__ == "BetaMessageBatch" and statuses[-1].results_url
    lines = list(client.beta.messages.batches.results(created.id))
    assert [(line.custom_id, decision(line.result)) for line in lines] == [
        ("q-0", "skill:pdf-merge")
    ]
    # The query string Claude Code and older SDKs add is ignored like on live requests.
    body = {"requests": batch_items(CHART_QUERY)}
    resp, text = raw_request(api, "POST", "/v1/messages/batches?beta=true", body)
    assert resp.status == 200 and json.loads(text)["id"] == "msgbatch_fake_2"
    resp, text = raw_request(api, "GET", "/v1/messages/batches/msgbatch_fake_2?beta=true")
    assert resp.status == 200 and json.loads(text)["processing_status"] == "in_progress"
    assert "anthropic-beta" not in api.batch_headers[-1]
    assert api.stats["batches_created"] == 2


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/messages/batches"),  # listing is not imitated
        ("GET", "/v1/messages"),
        ("DELETE", "/v1/messages/batches/msgbatch_fake_1"),
        ("POST", "/v1/messages/batches/msgbatch_fake_1"),
        ("GET", "/v1/messages/batches/msgbatch_fake_1/cancel"),
        ("POST", "/v1/messages/batches/msgbatch_fake_1/results"),
        ("GET", "/v1/messages/batches/msgbatch_fake_1/other"),
    ],
)
def test_other_batch_routes_are_404(api: FakeMessagesAPI, method: str, path: str) -> None:
    raw_request(api, "POST", "/v1/messages/batches", {"requests": batch_items(MERGE_QUERY)})
    resp, text = raw_request(api, method, path)
    assert resp.status == 404 and json.loads(text)["error"]["type"] == "not_found_error"
    assert api.stats["batch_polls"] == api.stats["batch_cancels"] == 0


def test_concurrent_polls_end_a_batch_once(
    api: FakeMessagesAPI, client: anthropic.Anthropic
) -> None:
    api.batch_polls = 0
    api.latency = 0.05
    created = client.messages.batches.create(requests=batch_items(*[MERGE_QUERY] * 20))
    statuses: list[str] = []

    def poll() -> None:
        statuses.append(client.messages.batches.retrieve(created.id).processing_status)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == ["ended"] * 8
    assert api.stats["batch_results"] == {"succeeded": 20}
    assert api.stats["decisions"] == {"skill:pdf-merge": 20}
    assert api.stats["in_flight_max"] == 0 and api.stats["calls"] == 0
