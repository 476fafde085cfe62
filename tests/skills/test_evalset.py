"""Tests for reading eval sets: every shape in the wild, and one clear line per bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_skilltrigger.skills.evalset import (
    EVAL_SET_NAMES,
    EvalEntry,
    EvalSet,
    find_eval_set,
    load_eval_set,
    parse_eval_set,
)
from pytest_skilltrigger.support.errors import InputError


def write(folder: Path, text: str, name: str = "trigger-eval.json", encoding="utf-8") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def pairs(evalset: EvalSet) -> list[tuple[str, bool]]:
    return [(e.query, e.should_trigger) for e in evalset.entries]


def load_error(path: Path) -> str:
    """Load a bad file and return the message, checking the properties every error shares."""
    with pytest.raises(InputError) as info:
        load_eval_set(path)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"{path}: ")
    assert info.value.where == str(path)
    assert info.value.__cause__ is None  # no chained traceback for the user
    return message


# --- shape 1: a list of {query, should_trigger} -------------------------------------------


def test_list_one_entry_a_line_without_final_newline(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[\n{"query": "clean my csv", "should_trigger": true},\n'
        '{"query": "plot this", "should_trigger": false}\n]',
    )
    evalset = load_eval_set(path)
    assert evalset.entries == (
        EvalEntry(0, "clean my csv", True, {}),
        EvalEntry(1, "plot this", False, {}),
    )
    assert evalset.meta == {}
    assert evalset.path == str(path.resolve())
    assert isinstance(evalset.path, str)


@pytest.mark.parametrize("indent", [None, 2, 4, "\t"])
def test_list_indentation_variants(tmp_path: Path, indent: int | str | None) -> None:
    data = [{"query": f"q{i}", "should_trigger": i % 2 == 0} for i in range(5)]
    path = write(tmp_path, json.dumps(data, indent=indent) + "\n")
    assert pairs(load_eval_set(path)) == [(f"q{i}", i % 2 == 0) for i in range(5)]


def test_list_with_blank_lines_between_groups_and_crlf(tmp_path: Path) -> None:
    text = (
        "\r\n\r\n[\r\n"
        '  {"query": "a", "should_trigger": true},\r\n'
        '  {"query": "b", "should_trigger": true},\r\n\r\n\r\n'
        '  {"query": "c", "should_trigger": false}\r\n'
        "]\r\n\r\n"
    )
    path = write(tmp_path, text)
    assert pairs(load_eval_set(path)) == [("a", True), ("b", True), ("c", False)]


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, '[{"query": "ünïcode", "should_trigger": true}]', encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert pairs(load_eval_set(path)) == [("ünïcode", True)]


def test_utf16_with_bom_is_accepted(tmp_path: Path) -> None:
    # What Windows PowerShell's `>` redirection writes.
    path = write(tmp_path, '[{"query": "한국어", "should_trigger": false}]', encoding="utf-16")
    assert pairs(load_eval_set(path)) == [("한국어", False)]


def test_order_is_file_order_and_index_follows_it(tmp_path: Path) -> None:
    queries = [("zeta", False), ("alpha", True), ("mid", False), ("beta", True), ("aa", True)]
    data = [{"query": q, "should_trigger": t} for q, t in queries]
    evalset = load_eval_set(write(tmp_path, json.dumps(data)))
    assert pairs(evalset) == queries
    assert [e.index for e in evalset.entries] == [0, 1, 2, 3, 4]


# --- shape 2: extra keys --------------------------------------------------------------------


def test_extra_keys_are_kept_in_extra(tmp_path: Path) -> None:
    data = [
        {
            "id": 7,
            "query": "merge two csvs",
            "should_trigger": True,
            "reason": "core use",
            "_comment": None,
            "category": ["data", "csv"],
            "rationale": {"nested": 1.5},
        },
        {"query": "plain", "should_trigger": False, "note": "near miss"},
    ]
    evalset = load_eval_set(write(tmp_path, json.dumps(data, indent=2)))
    assert evalset.entries[0].extra == {
        "id": 7,
        "reason": "core use",
        "_comment": None,
        "category": ["data", "csv"],
        "rationale": {"nested": 1.5},
    }
    assert evalset.entries[1].extra == {"note": "near miss"}
    assert "query" not in evalset.entries[0].extra
    assert "should_trigger" not in evalset.entries[0].extra


# --- shape 3: two lists of strings ----------------------------------------------------------


def test_two_lists_of_strings(tmp_path: Path) -> None:
    data = {
        "skill_name": "csv-cleaner",
        "should_trigger": ["fix my csv", "dedupe rows"],
        "should_not_trigger": ["draw a chart"],
    }
    evalset = load_eval_set(write(tmp_path, json.dumps(data)))
    assert pairs(evalset) == [("fix my csv", True), ("dedupe rows", True), ("draw a chart", False)]
    assert [e.index for e in evalset.entries] == [0, 1, 2]
    assert all(e.extra == {} for e in evalset.entries)
    assert evalset.meta == {"skill_name": "csv-cleaner"}


def test_two_lists_follow_key_order_of_the_file(tmp_path: Path) -> None:
    text = '{"should_not_trigger": ["n1", "n2"], "skill_name": "x", "should_trigger": ["p1"]}'
    evalset = load_eval_set(write(tmp_path, text))
    assert pairs(evalset) == [("n1", False), ("n2", False), ("p1", True)]


def test_two_lists_one_may_be_empty(tmp_path: Path) -> None:
    text = '{"should_trigger": ["p1"], "should_not_trigger": []}'
    assert pairs(load_eval_set(write(tmp_path, text))) == [("p1", True)]


# --- shape 4: the two lists nested under one key --------------------------------------------


def test_two_lists_nested_under_a_key(tmp_path: Path) -> None:
    data = {
        "skill_name": "release-notes",
        "version": 2,
        "trigger_evals": {
            "description": "inner note",
            "should_trigger": ["write a changelog"],
            "should_not_trigger": ["explain git rebase"],
        },
    }
    evalset = load_eval_set(write(tmp_path, json.dumps(data, indent=2)))
    assert pairs(evalset) == [("write a changelog", True), ("explain git rebase", False)]
    assert evalset.meta == {
        "skill_name": "release-notes",
        "version": 2,
        "description": "inner note",
    }


def test_nested_under_any_key_name(tmp_path: Path) -> None:
    data = {"cases": {"should_trigger": ["a"], "should_not_trigger": ["b"]}}
    assert pairs(load_eval_set(write(tmp_path, json.dumps(data)))) == [("a", True), ("b", False)]


# --- shape 5: wrapped under "evals" with earlier results ----------------------------------


def test_wrapped_under_evals_with_earlier_results(tmp_path: Path) -> None:
    data = {
        "skill_name": "csv-cleaner",
        "purpose": "trigger check",
        "method": "3 runs each",
        "evals": [
            {"query": "fix encoding", "should_trigger": True, "got": False, "pass": False},
            {
                "query": "make a pie chart",
                "should_trigger": False,
                "got": False,
                "pass": True,
                "note": "ok",
            },
        ],
        "result": "1/2",
    }
    evalset = load_eval_set(write(tmp_path, json.dumps(data, indent=1)))
    # The earlier result ("got": False) must not leak into should_trigger.
    assert pairs(evalset) == [("fix encoding", True), ("make a pie chart", False)]
    assert evalset.entries[0].extra == {"got": False, "pass": False}
    assert evalset.entries[1].extra == {"got": False, "pass": True, "note": "ok"}
    assert evalset.meta == {
        "skill_name": "csv-cleaner",
        "purpose": "trigger check",
        "method": "3 runs each",
        "result": "1/2",
    }


def test_evals_holding_the_two_lists_is_the_nested_shape(tmp_path: Path) -> None:
    data = {"evals": {"should_trigger": ["a"], "should_not_trigger": ["b"]}}
    assert pairs(load_eval_set(write(tmp_path, json.dumps(data)))) == [("a", True), ("b", False)]


# --- queries kept exactly -------------------------------------------------------------------


TRICKY_QUERIES = [
    "CSV 파일에서 중복 행 좀 지워줘",
    "帮我把这个表格里的空值清理一下",
    "ช่วยทำความสะอาดไฟล์ csv นี้หน่อย",
    "Dọn dẹp file dữ liệu này giúp tôi",
    "¿Puedes limpiar este CSV? Tiene filas duplicadas",
    "このCSVの文字化けを直して",
    r"clean C:\Users\ana\Desktop\ventas 2024\export.csv please",
    'the column "Total (€)" has quotes like \\"this\\" in it',
    "emoji 🎉🧹📊 and a ZWJ family 👩‍👩‍👧 plus combining é",
    "  leading and trailing spaces kept  ",
    "tab\tand\nnewline inside",
]


@pytest.mark.parametrize("indent", [None, 2])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_queries_are_preserved_exactly(
    tmp_path: Path, indent: int | None, ensure_ascii: bool
) -> None:
    data = [{"query": q, "should_trigger": i % 2 == 0} for i, q in enumerate(TRICKY_QUERIES)]
    path = write(tmp_path, json.dumps(data, indent=indent, ensure_ascii=ensure_ascii))
    assert [e.query for e in load_eval_set(path).entries] == TRICKY_QUERIES


def test_string_list_queries_are_preserved_exactly(tmp_path: Path) -> None:
    data = {"should_trigger": TRICKY_QUERIES[:5], "should_not_trigger": TRICKY_QUERIES[5:]}
    path = write(tmp_path, json.dumps(data, ensure_ascii=False))
    assert [e.query for e in load_eval_set(path).entries] == TRICKY_QUERIES


def test_load_accepts_str_and_pathlike(tmp_path: Path) -> None:
    path = write(tmp_path, '[{"query": "a", "should_trigger": true}]')
    assert load_eval_set(str(path)) == load_eval_set(path)


def test_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "evals", '[{"query": "a", "should_trigger": true}]')
    monkeypatch.chdir(tmp_path)
    evalset = load_eval_set(os.path.join("evals", "trigger-eval.json"))
    assert evalset.path == str(tmp_path / "evals" / "trigger-eval.json")


def test_parse_eval_set_on_parsed_data() -> None:
    entries, meta = parse_eval_set(
        {"skill_name": "s", "evals": [{"query": "q", "should_trigger": False, "id": 1}]}, "x.json"
    )
    assert entries == [EvalEntry(0, "q", False, {"id": 1})]
    assert meta == {"skill_name": "s"}
    with pytest.raises(InputError, match=r"^x\.json: entry \[00\]: should_trigger must be"):
        parse_eval_set([{"query": "q", "should_trigger": "no"}], "x.json")


# --- find_eval_set ----------------------------------------------------------------------------


def test_find_returns_none_without_a_file(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    write(tmp_path, "[]", name="other.json")
    assert find_eval_set(tmp_path) is None


def test_find_prefers_evals_folder(tmp_path: Path) -> None:
    write(tmp_path, "[]", name="trigger-eval.json")
    write(tmp_path / "evals", "[]", name="eval_set.json")
    assert find_eval_set(tmp_path) == str(tmp_path / "evals" / "eval_set.json")


def test_find_falls_back_to_skill_folder(tmp_path: Path) -> None:
    (tmp_path / "evals").mkdir()
    write(tmp_path, "[]", name="trigger_evals.json")
    assert find_eval_set(str(tmp_path)) == str(tmp_path / "trigger_evals.json")


def test_find_follows_name_order(tmp_path: Path) -> None:
    folder = tmp_path / "evals"
    for name in reversed(EVAL_SET_NAMES):
        write(folder, "[]", name=name)
        # The best-ranked name present wins, whatever was created first.
        assert find_eval_set(tmp_path) == str(folder / name)


def test_find_ignores_a_folder_with_an_eval_set_name(tmp_path: Path) -> None:
    (tmp_path / "evals" / "trigger-eval.json").mkdir(parents=True)
    write(tmp_path, "[]", name="trigger_eval.json")
    assert find_eval_set(tmp_path) == str(tmp_path / "trigger_eval.json")


def test_find_returns_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "skill" / "evals", "[]")
    monkeypatch.chdir(tmp_path)
    found = find_eval_set("skill")
    assert found == str(tmp_path / "skill" / "evals" / "trigger-eval.json")
    assert os.path.isabs(found)


# --- errors -----------------------------------------------------------------------------------


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '[\n  {"query": "a", "should_trigger": true},\n  {"query": "b"\n]')
    message = load_error(path)
    assert "not valid JSON" in message
    assert "line 4, column 1" in message


def test_trailing_comma_is_invalid_json(tmp_path: Path) -> None:
    path = write(tmp_path, '[{"query": "a", "should_trigger": true},]')
    assert "not valid JSON" in load_error(path)


def test_invalid_json_position_ignores_bom(tmp_path: Path) -> None:
    path = write(tmp_path, "[\n  oops\n]", encoding="utf-8-sig")
    assert "line 2, column 3" in load_error(path)


@pytest.mark.parametrize("text", ["", "   \n\n", "\ufeff"])
def test_empty_file(tmp_path: Path, text: str) -> None:
    assert "empty" in load_error(write(tmp_path, text))


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "trigger-eval.json"
    path.write_bytes('[{"query": "caf\u00e9", "should_trigger": true}]'.encode("latin-1"))
    assert "not UTF-8" in load_error(path)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in load_error(tmp_path / "nope.json")


def test_folder_instead_of_file(tmp_path: Path) -> None:
    folder = tmp_path / "trigger-eval.json"
    folder.mkdir()
    assert "folder" in load_error(folder)


@pytest.mark.parametrize(
    "text, found",
    [
        ('"just a string"', "string"),
        ("42", "number"),
        ("null", "null"),
        ('{"skill_name": "x", "queries": []}', '"skill_name", "queries"'),
        ('{"evals": "not a list"}', '"evals"'),
    ],
)
def test_unknown_shape(tmp_path: Path, text: str, found: str) -> None:
    message = load_error(write(tmp_path, text))
    assert "unknown eval set shape" in message
    assert found in message


def test_single_entry_not_in_a_list(tmp_path: Path) -> None:
    path = write(tmp_path, '{"query": "a", "should_trigger": true}')
    assert "single entry" in load_error(path)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"should_trigger": [], "should_not_trigger": []}',
        '{"trigger_evals": {"should_trigger": [], "should_not_trigger": []}}',
        '{"skill_name": "x", "evals": []}',
    ],
)
def test_empty_set(tmp_path: Path, text: str) -> None:
    assert "no entries" in load_error(write(tmp_path, text))


def entries_file(tmp_path: Path, bad: object) -> Path:
    """Three good entries, then ``bad`` as entry [03] (1-based), then a good one."""
    data = [{"query": f"good {i}", "should_trigger": i % 2 == 0} for i in range(3)]
    data.append(bad)
    data.append({"query": "after", "should_trigger": False})
    return write(tmp_path / "evals", json.dumps(data, ensure_ascii=False, indent=2))


@pytest.mark.parametrize(
    "bad, problem",
    [
        (
            "just a query",
            "entry [03]: must be an object with query and should_trigger, got string "
            '"just a query"',
        ),
        (
            ["q", True],
            'entry [03]: must be an object with query and should_trigger, got list ["q", true]',
        ),
        (None, "entry [03]: must be an object with query and should_trigger, got null"),
        ({"should_trigger": True}, "entry [03]: has no query"),
        ({"text": "x", "should_trigger": True}, "entry [03]: has no query"),
        (
            {"query": 12, "should_trigger": True},
            "entry [03]: query must be a string, got number 12",
        ),
        ({"query": None, "should_trigger": True}, "entry [03]: query must be a string, got null"),
        (
            {"query": ["a"], "should_trigger": True},
            'entry [03]: query must be a string, got list ["a"]',
        ),
        ({"query": "", "should_trigger": True}, "entry [03]: query is empty"),
        ({"query": " \t\n ", "should_trigger": True}, "entry [03]: query is empty"),
        (
            {"query": "x"},
            "entry [03]: has no should_trigger (true or false) or expected_skill (the skill to "
            "choose, or null)",
        ),
        (
            {"query": "x", "should_trigger": "yes"},
            'entry [03]: should_trigger must be true or false, got "yes"',
        ),
        (
            {"query": "x", "should_trigger": "true"},
            'entry [03]: should_trigger must be true or false, got "true"',
        ),
        (
            {"query": "x", "should_trigger": "depends"},
            'entry [03]: should_trigger must be true or false, got "depends"',
        ),
        (
            {"query": "x", "should_trigger": 1},
            "entry [03]: should_trigger must be true or false (or a skill), got 1",
        ),
        (
            {"query": "x", "should_trigger": 0},
            "entry [03]: should_trigger must be true or false (or a skill), got 0",
        ),
        (
            {"query": "x", "should_trigger": None},
            "entry [03]: should_trigger must be true or false, got null",
        ),
    ],
)
def test_bad_entry(tmp_path: Path, bad: object, problem: str) -> None:
    path = entries_file(tmp_path, bad)
    assert load_error(path) == f"{path}: {problem}"


def test_error_uses_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entries_file(tmp_path, {"query": "x", "should_trigger": "yes"})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        load_eval_set("evals/trigger-eval.json")
    assert str(info.value) == (
        'evals/trigger-eval.json: entry [03]: should_trigger must be true or false, got "yes"'
    )


def test_bad_entry_in_evals_wrapper_is_named(tmp_path: Path) -> None:
    data = {"skill_name": "x", "evals": [{"query": "a", "should_trigger": True}, {"query": "b"}]}
    message = load_error(write(tmp_path, json.dumps(data)))
    assert message.endswith(
        'entry [01] (in "evals"): has no should_trigger (true or false) or expected_skill (the '
        "skill to choose, or null)"
    )


def test_multiline_value_in_error_stays_one_line(tmp_path: Path) -> None:
    path = entries_file(tmp_path, {"query": "x", "should_trigger": "line one\nline two"})
    assert 'got "line one\\nline two"' in load_error(path)


def test_long_value_in_error_is_shortened(tmp_path: Path) -> None:
    path = entries_file(tmp_path, {"query": "x", "should_trigger": "y" * 500})
    message = load_error(path)
    assert len(message) < len(str(path)) + 200
    assert message.endswith("…")


@pytest.mark.parametrize(
    "data, problem",
    [
        (
            {"should_trigger": ["a", 3], "should_not_trigger": ["b"]},
            "entry [01] (should_trigger #2): must be a query string, got number 3",
        ),
        (
            {"should_trigger": ["a"], "should_not_trigger": ["b", "  "]},
            "entry [02] (should_not_trigger #2): query is empty",
        ),
        (
            {"should_trigger": ["a"], "should_not_trigger": [{"query": "b"}]},
            'entry [01] (should_not_trigger #1): must be a query string, got object {"query": "b"}',
        ),
        (
            {"t": {"should_trigger": ["a"], "should_not_trigger": [None]}},
            "entry [01] (t.should_not_trigger #1): must be a query string, got null",
        ),
        ({"should_trigger": ["a"]}, 'has "should_trigger" but no "should_not_trigger" list'),
        (
            {"should_trigger": ["a"], "should_not_triger": ["b"]},
            'has "should_trigger" but no "should_not_trigger" list',
        ),
        (
            {"t": {"should_not_trigger": ["a"]}},
            'has "t.should_not_trigger" but no "t.should_trigger"',
        ),
        (
            {"should_trigger": "a", "should_not_trigger": ["b"]},
            '"should_trigger" must be a list of query strings, got string',
        ),
        (
            {
                "a": {"should_trigger": ["x"], "should_not_trigger": []},
                "b": {"should_trigger": ["y"], "should_not_trigger": []},
            },
            'several keys hold should_trigger lists ("a", "b")',
        ),
        (
            {"evals": [{"query": "a", "should_trigger": True}], "should_trigger": ["b"]},
            'has both "evals" and',
        ),
    ],
)
def test_bad_string_lists(tmp_path: Path, data: object, problem: str) -> None:
    path = write(tmp_path, json.dumps(data))
    message = load_error(path)
    assert message.startswith(f"{path}: {problem}")


def test_duplicate_query_names_both_entries(tmp_path: Path) -> None:
    data = [
        {"query": "clean my csv", "should_trigger": True},
        {"query": "other", "should_trigger": False},
        {"query": "clean my csv", "should_trigger": False},
    ]
    path = write(tmp_path, json.dumps(data))
    assert load_error(path) == f'{path}: entry [02] repeats the query of entry [00]: "clean my csv"'


def test_duplicate_query_differing_only_in_outer_whitespace(tmp_path: Path) -> None:
    data = [{"query": "a b", "should_trigger": True}, {"query": " a b\n", "should_trigger": True}]
    assert "entry [01] repeats the query of entry [00]" in load_error(
        write(tmp_path, json.dumps(data))
    )


def test_different_case_is_not_a_duplicate(tmp_path: Path) -> None:
    data = [{"query": "CSV", "should_trigger": True}, {"query": "csv", "should_trigger": True}]
    assert len(load_eval_set(write(tmp_path, json.dumps(data))).entries) == 2


def test_duplicate_query_across_the_two_lists(tmp_path: Path) -> None:
    data = {"should_trigger": ["a", "dup"], "should_not_trigger": ["dup"]}
    message = load_error(write(tmp_path, json.dumps(data)))
    assert message.endswith(
        "entry [02] (should_not_trigger #1) repeats the query of entry [01] "
        '(should_trigger #2): "dup"'
    )


def test_duplicate_key_in_an_entry(tmp_path: Path) -> None:
    text = (
        '[{"query": "a", "should_trigger": true},'
        ' {"query": "b", "should_trigger": true, "should_trigger": false}]'
    )
    path = write(tmp_path, text)
    assert load_error(path) == (
        f'{path}: entry [01]: key "should_trigger" appears twice; JSON would keep only the last'
    )


def test_duplicate_list_key_at_top_level(tmp_path: Path) -> None:
    text = '{"should_trigger": ["a"], "should_not_trigger": ["b"], "should_trigger": ["c"]}'
    message = load_error(write(tmp_path, text))
    assert 'the top-level object: key "should_trigger" appears twice' in message


def test_duplicate_key_in_extra_is_also_rejected(tmp_path: Path) -> None:
    text = '{"evals": [{"query": "a", "should_trigger": true, "note": 1, "note": 2}]}'
    assert 'entry [00] (in "evals"): key "note" appears twice' in load_error(write(tmp_path, text))


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, "[" * 100_000 + "]" * 100_000)
    message = load_error(path)
    assert "JSON" in message


def test_no_partial_result_on_late_error(tmp_path: Path) -> None:
    data = [{"query": f"q{i}", "should_trigger": True} for i in range(40)]
    data.append({"query": "bad", "should_trigger": "maybe"})
    with pytest.raises(InputError, match=r"entry \[40\]: should_trigger must be true or false"):
        load_eval_set(write(tmp_path, json.dumps(data)))


def test_entries_and_sets_are_hashable(tmp_path: Path) -> None:
    # extra/meta are dicts; they must not make entries unusable as dict keys.
    data = {"skill_name": "s", "evals": [{"query": "a", "should_trigger": True, "id": [1]}]}
    evalset = load_eval_set(write(tmp_path, json.dumps(data)))
    assert {evalset.entries[0]: 1}[evalset.entries[0]] == 1
    assert hash(evalset) == hash(load_eval_set(tmp_path / "trigger-eval.json"))
