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
import httpx2
import pytest

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
        ("drop", True, httpx2.RemoteProtocolError),  # not wrapped mid-stream
        ("drop", False, anthropic.APIConnectionError),
    ],
)
def test_fault_raises_sdk_error(
    api: FakeMessagesAPI, client: anthropic.Anthropic, kind: str, stream: bool, expected: type
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
        pytest.raises((httpx2.TransportError, anthropic.APIConnectionError)),
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
