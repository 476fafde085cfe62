"""The checks a drafted eval set must pass, and the answer shapes that are read."""

from __future__ import annotations

import json

import pytest

from pytest_skilltrigger.skills.drafted_set import (
    DraftedEntry,
    check_answer,
    drafted_json,
    parse_answer,
)

DESCRIPTION = "Clean and repair messy CSV files so they load correctly in spreadsheets."


EARLIER = [
    {"role": "user", "content": "I have a few exports from the shop's till"},
    {"role": "assistant", "content": "Happy to help. What should happen to them?"},
]


def entries(positives: int, negatives: int, mid: int = 4) -> list[dict]:
    """``positives`` and ``negatives`` entries, the last ``mid`` of each kind (at most)
    asked after two earlier turns."""
    made = [
        {"query": f"tidy up export number {i} please", "should_trigger": True}
        for i in range(positives)
    ] + [
        {"query": f"write a limerick about topic {i}", "should_trigger": False}
        for i in range(negatives)
    ]
    for entry in made[positives - mid // 2 : positives] + made[len(made) - mid // 2 :]:
        entry["history"] = EARLIER
    return made


@pytest.mark.parametrize(
    "wrap",
    [
        lambda j: j,
        lambda j: f"Here you are:\n```json\n{j}\n```\nEnjoy.",
        lambda j: f"<eval_set>\n{j}\n</eval_set>",
        lambda j: f"Sure! {j} Hope it helps.",
    ],
    ids=["bare", "fenced", "tags", "in-prose"],
)
def test_the_answer_is_read_bare_fenced_or_in_tags(wrap) -> None:
    data = entries(10, 10)
    assert parse_answer(wrap(json.dumps(data))) == data


def test_no_json_reads_as_none() -> None:
    assert parse_answer("I cannot help with that.") is None


def test_a_good_set_has_no_problems() -> None:
    checked = check_answer(entries(10, 10), DESCRIPTION)
    assert checked.problems == [] and len(checked.entries) == 20


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (entries(6, 6), "12 usable entries; 16 to 24 are wanted"),
        (entries(14, 12), "26 usable entries; 16 to 24 are wanted"),
        (entries(16, 4), "4 should-not entries of 20"),
        ({"query": "x"}, "no JSON array"),
    ],
    ids=["too-few", "too-many", "unbalanced", "not-a-list"],
)
def test_a_bad_set_says_what_is_wrong(data: object, expected: str) -> None:
    problems = check_answer(data, DESCRIPTION).problems
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"query": 3, "should_trigger": True}, "entry 21 is not a"),
        (
            {"query": "TIDY up  export number 1 please", "should_trigger": True},
            "entry 21 repeats an earlier query",
        ),
        (
            {
                "query": "please clean and repair messy csv files so they load",
                "should_trigger": True,
            },
            "entry 21 quotes the description",
        ),
    ],
    ids=["bad-entry", "duplicate", "quote"],
)
def test_a_bad_entry_is_left_out_and_the_draft_kept(extra: object, said: str) -> None:
    """One entry malformed, repeated or quoting the description: left out, said, and the
    other twenty kept (the hard checks are enough entries of both kinds)."""
    checked = check_answer([*entries(10, 10), extra], DESCRIPTION)
    assert checked.problems == [] and len(checked.entries) == 20
    assert any(said in lack and lack.endswith("(left out)") for lack in checked.lacks)


def test_a_draft_asks_some_entries_mid_conversation() -> None:
    """A draft without entries after earlier turns is kept, saying what it lacks; a history
    that does not replay leaves its entry out; good ones are written with their turns."""
    flat = check_answer(entries(10, 10, mid=0), DESCRIPTION)
    assert flat.problems == [] and len(flat.entries) == 20
    assert any("0 entries asked mid-conversation" in lack for lack in flat.lacks)
    bad = entries(10, 10)
    bad[0]["history"] = [{"role": "robot", "content": "hi"}]
    bad[1]["history"] = EARLIER[:1]
    lacks = check_answer(bad, DESCRIPTION).lacks
    assert any("entry 1: history turn 1: role 'robot'" in p for p in lacks), lacks
    assert any("entry 2: its history must end with the assistant" in p for p in lacks)
    good = check_answer(entries(10, 10), DESCRIPTION).entries
    written = json.loads(drafted_json(good))
    assert sum("history" in e for e in written) == 4
    assert next(e for e in written if "history" in e)["history"] == EARLIER


def test_queries_the_set_has_already_are_not_new() -> None:
    """``--trigger-draft=also``: a first answer that repeats the set asks for a repair; after
    it the repeats are left out when enough new entries remain, and the draft says how many."""
    data = entries(10, 10)
    known = [" ".join(data[i]["query"].upper().split()) for i in range(4)]  # case, spaces
    checked = check_answer(data, DESCRIPTION, known)
    assert len(checked.entries) == 16 and len(checked.repeats) == 4
    assert any("4 entries repeat queries the eval set has" in p for p in checked.refusals(False))
    assert checked.refusals(repaired=True) == []
    every = check_answer(data, DESCRIPTION, [e["query"] for e in data])
    assert every.entries == [] and every.refusals(repaired=True) != []


def test_the_file_is_a_plain_list_marked_drafted_positives_first() -> None:
    text = drafted_json([DraftedEntry("b", False), DraftedEntry("a", True)])
    assert json.loads(text) == [
        {"query": "a", "should_trigger": True, "drafted": True},
        {"query": "b", "should_trigger": False, "drafted": True},
    ]
