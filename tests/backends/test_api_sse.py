"""The byte-level event-stream reader: same decision however the bytes are cut or line-ended."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_skilltrigger.backends.api.sse import decide
from pytest_skilltrigger.backends.first_choice import StreamError


def frame(event: str, data: dict, *, newline: str = "\n", name: bool = True) -> str:
    head = f"event: {event}{newline}" if name else ""
    return f"{head}data: {json.dumps(data)}{newline}{newline}"


def skill_stream(newline: str = "\n", *, name: bool = True, skill: str = "pdf-tools") -> str:
    """A realistic stream: ping, thinking, a text preamble, then Skill with fragmented input."""
    raw = json.dumps({"skill": skill})
    parts = [raw[i : i + 3] for i in range(0, len(raw), 3)]
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 7}}}),
        ("ping", {"type": "ping"}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hm\n\nok"},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "name": "Skill", "input": {}},
            },
        ),
        *[
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 1,
                    "delta": {"type": "input_json_delta", "partial_json": p},
                },
            )
            for p in ["", *parts]
        ],
        ("content_block_stop", {"type": "content_block_stop", "index": 1}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 12}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    body = "".join(frame(e, d, newline=newline, name=name) for e, d in events)
    return ": a comment line\n" + body


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_line_ends(newline: str) -> None:
    decision = decide([skill_stream(newline).encode()])
    assert decision.chosen == "skill:pdf-tools"
    assert decision.usage.input_tokens == 7


@settings(max_examples=150, deadline=None)
@given(
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    points=st.lists(st.integers(min_value=0, max_value=5000), max_size=40),
)
def test_any_chunking_gives_the_same_decision(newline: str, points: list[int]) -> None:
    chunks = cut(skill_stream(newline).encode(), points)
    assert decide(chunks).chosen == "skill:pdf-tools"


def test_one_byte_chunks_with_crlf_split_between_chunks() -> None:
    data = skill_stream("\r\n").encode()
    assert decide([data[i : i + 1] for i in range(len(data))]).chosen == "skill:pdf-tools"


def test_events_without_an_event_line_are_named_by_their_type() -> None:
    assert decide([skill_stream(name=False).encode()]).chosen == "skill:pdf-tools"


def test_multi_line_data_is_joined() -> None:
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "name": "Bash", "input": {}},
    }
    text = json.dumps(start, indent=1).replace("\n", "\ndata: ")
    stream = f"event: content_block_start\ndata: {text}\n\n".encode()
    assert decide([stream]).chosen == "tool:Bash"


def test_non_ascii_skill_name_survives_any_cut() -> None:
    data = skill_stream(skill="résumé-écrit").encode()
    for size in (1, 2, 3, 7):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        assert decide(chunks).chosen == "skill:résumé-écrit"


def test_text_answer_is_text() -> None:
    events = [
        frame("message_start", {"type": "message_start", "message": {}}),
        frame(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        frame("message_stop", {"type": "message_stop"}),
    ]
    assert decide([e.encode() for e in events]).chosen == "text"


def test_error_event_raises_with_its_type() -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    stream = frame("error", {"type": "error", "error": error})
    with pytest.raises(StreamError) as info:
        decide([stream.encode()])
    assert info.value.retryable and info.value.error_type == "overloaded_error"


def test_stream_cut_inside_an_event_is_a_stream_error_not_a_decision() -> None:
    data = skill_stream().encode()
    tail = data.index(b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 1')
    with pytest.raises(StreamError, match="ended before"):
        decide([data[: tail + 40]])


def test_reader_stops_at_the_decision_and_leaves_the_rest() -> None:
    data = skill_stream().encode()
    split = data.index(b"event: message_delta")
    chunks = iter([data[:split], data[split:]])
    assert decide(chunks).chosen == "skill:pdf-tools"
    assert next(chunks).startswith(b"event: message_delta")  # not consumed
