"""``--trigger-draft``: a first eval set drafted by the improve model, checked, written and
run in the same session, against the fake API (which drafts by reading the request: the
skill's words for should-trigger queries, its siblings' words for near misses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

SKILLS = {
    "csv-tidy": "Clean messy spreadsheet exports: repair encodings, delimiters, duplicated rows.",
    "chart-maker": "Draw labelled charts and dashboards from tabular numbers: bars, lines, pies.",
}


def make_skills(root: Path, names: tuple[str, ...] = tuple(SKILLS)) -> Path:
    folder = root / "skills"
    for name in names:
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {SKILLS[name]}\n---\n\n# {name}\n\nSteps.\n"
        )
    return folder


def draft_requests(api: FakeMessagesAPI) -> list[str]:
    return [
        body["messages"][0]["content"]
        for body in api.requests
        if "trigger eval set" in json.dumps(body)
    ]


def run(pytester: pytest.Pytester, folder: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(folder), *args)


def test_a_skill_without_an_eval_set_gets_one_drafted_written_and_run(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    out = pytester.path / "out.json"
    result = run(pytester, folder, "--trigger-draft", f"--trigger-json={out}")
    written = folder / "csv-tidy" / "evals" / "trigger-eval.json"
    data = json.loads(written.read_text())
    assert len(data) == 20 and all(e["drafted"] is True for e in data)
    assert sum(e["should_trigger"] for e in data) == 10
    result.assert_outcomes(passed=20)  # collected and run in the same session
    result.stdout.fnmatch_lines(
        [
            "skilltrigger: drafted skills/csv-tidy/evals/trigger-eval.json for csv-tidy (10 should "
            "trigger, 10 should not): drafted: review these queries before you trust them",
            "  drafted: review these queries before you trust them (20 of 20 queries)",
            "    should trigger:",
            "      ✓ 'please *",
        ]
    )
    # one request, counted and priced under its own phase, as the server saw it
    (prompt,) = draft_requests(fake_api)
    assert "# csv-tidy\n\nSteps." in prompt  # the whole SKILL.md, body included
    phases = json.loads(out.read_text())["totals"]["by_phase"]
    assert phases["draft"]["calls"] == 1 == fake_api.stats["improve_calls"]
    assert phases["draft"]["cost_usd"] > 0
    # a rerun finds the file and drafts nothing
    run(pytester, folder, "--trigger-draft").assert_outcomes(passed=20)
    assert len(draft_requests(fake_api)) == 1


def test_a_bad_answer_gets_one_repair(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    short = [{"query": f"tidy export {i}", "should_trigger": True} for i in range(5)]
    fake_api.drafts = [json.dumps(short)]  # then the stand-in drafts a good one
    result = run(pytester, folder, "--trigger-draft")
    result.assert_outcomes(passed=20)
    first, repair = draft_requests(fake_api)
    assert repair.startswith(first)  # the request again (each question stands alone)
    assert "5 usable entries; 16 to 24 are wanted" in repair
    assert "0 should-not entries of 5" in repair


def test_a_draft_without_history_is_kept_and_says_what_it_lacks(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Twenty good entries, none mid-conversation: written as they are (one paid call, no
    repair), the header says what the draft lacks, and a rerun drafts nothing."""
    folder = make_skills(pytester.path, ("csv-tidy",))
    flat = [
        {"query": f"tidy the export number {i} of the shop", "should_trigger": True}
        for i in range(10)
    ]
    flat += [
        {"query": f"what is the weather in city number {i}", "should_trigger": False}
        for i in range(10)
    ]
    fake_api.drafts = [json.dumps(flat)]
    result = run(pytester, folder, "--trigger-draft")
    result.stdout.fnmatch_lines(
        ["*drafted*csv-tidy*", "skilltrigger:   the draft 0 entries asked mid-conversation*"]
    )
    assert len(draft_requests(fake_api)) == 1
    written = json.loads((folder / "csv-tidy" / "evals" / "trigger-eval.json").read_text())
    assert len(written) == 20
    run(pytester, folder, "--trigger-draft")
    assert len(draft_requests(fake_api)) == 1  # kept: not drafted again


def test_an_answer_still_bad_after_the_repair_is_refused_and_nothing_written(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    fake_api.drafts = ["no JSON here", "still none"]
    result = run(pytester, folder, "--trigger-draft")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert errors == [
        f"ERROR: {folder / 'csv-tidy' / 'SKILL.md'}: no eval set drafted (after one repair "
        'request): the answer holds no JSON array of {"query", "should_trigger"} objects; '
        "nothing written"
    ]
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (folder / "csv-tidy" / "evals").exists()
    assert fake_api.stats["trigger_calls"] == 0 and len(draft_requests(fake_api)) == 2


def test_in_a_folder_each_skills_near_misses_come_from_the_others_territory(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Each request names the sibling with its description; the stand-in makes near misses
    of the sibling's words, which the sibling takes: both sets pass, and each skill's
    should-not queries are the other's work."""
    folder = make_skills(pytester.path)
    result = run(pytester, folder, "--trigger-draft")
    result.assert_outcomes(passed=40)
    prompts = {p.split("'", 2)[1]: p for p in draft_requests(fake_api)}
    assert f"- chart-maker: {SKILLS['chart-maker']}" in prompts["csv-tidy"]
    assert f"- csv-tidy: {SKILLS['csv-tidy']}" in prompts["chart-maker"]
    for name, other in (("csv-tidy", "chart-maker"), ("chart-maker", "csv-tidy")):
        data = json.loads((folder / name / "evals" / "trigger-eval.json").read_text())
        words = set(SKILLS[other].lower().replace(":", " ").replace(",", " ").split())
        near = [e["query"] for e in data if not e["should_trigger"]]
        assert near and all(set(q.split()) & words for q in near)


def test_an_existing_eval_set_is_never_overwritten_and_also_drafts_beside_it(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    own = folder / "csv-tidy" / "evals" / "trigger-eval.json"
    own.parent.mkdir()
    own.write_text(
        json.dumps(
            [
                {"query": "repair encodings in this export", "should_trigger": True},
                {"query": "plant tomatoes", "should_trigger": False},
            ]
        )
    )
    before = own.read_bytes()
    run(pytester, folder, "--trigger-draft").assert_outcomes(passed=2)
    assert draft_requests(fake_api) == []  # it has one: nothing to draft
    result = run(pytester, folder, "--trigger-draft=also")
    result.assert_outcomes(passed=22)  # its own two, and the twenty drafted beside them
    assert own.read_bytes() == before
    extra = json.loads((own.parent / "trigger-eval.drafted.json").read_text())
    assert len(extra) == 20
    (prompt,) = draft_requests(fake_api)
    assert "- repair encodings in this export" in prompt  # told what the set has already
    result.stdout.fnmatch_lines(
        ["*drafted: review these queries before you trust them (20 of 22 queries)"]
    )
    run(pytester, folder, "--trigger-draft=also").assert_outcomes(passed=22)
    assert len(draft_requests(fake_api)) == 1  # the drafted file is there: no second draft


def test_drafting_respects_the_budget(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    result = run(pytester, folder, "--trigger-draft", "--trigger-budget-usd=0.001")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *SKILL.md: no eval set drafted: *cost budget*"])
    assert fake_api.stats["calls"] == 0
    assert not (folder / "csv-tidy" / "evals").exists()


@pytest.mark.parametrize(
    "bad",
    [("--trigger-json", "a-folder"), ("--trigger-baseline", "no-such-report.json")],
)
def test_a_bad_output_path_or_baseline_is_refused_before_any_draft(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, bad: tuple[str, str]
) -> None:
    """Nothing is paid for, and nothing written, when the run could not finish anyway."""
    folder = make_skills(pytester.path, ("csv-tidy",))
    option, value = bad
    if option == "--trigger-json":
        (pytester.path / value).mkdir()  # a folder where the report file should go
    result = run(pytester, folder, "--trigger-draft", f"{option}={pytester.path / value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: *{value}*"])
    assert fake_api.stats["calls"] == 0 and fake_api.stats["improve_calls"] == 0
    assert not (folder / "csv-tidy" / "evals").exists()


def test_a_value_that_is_a_path_is_refused_with_one_line(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skills(pytester.path, ("csv-tidy",))
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "--trigger-draft", "tests"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --trigger-draft: takes no value or 'also', got 'tests'*"])
    assert fake_api.stats["calls"] == 0


def test_also_checks_the_draft_against_the_set_and_says_how_many_are_new(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The stand-in drafts the same twenty requests again: they are not new, so one repair
    asks for others, and the header counts the new ones. A model that keeps repeating them
    gets a one-line error and nothing is written."""
    folder = make_skills(pytester.path, ("csv-tidy",))
    run(pytester, folder, "--trigger-draft").assert_outcomes(passed=20)
    extra = folder / "csv-tidy" / "evals" / "trigger-eval.drafted.json"
    fake_api.stubborn_drafts = True
    stubborn = run(pytester, folder, "--trigger-draft=also")
    assert stubborn.ret == pytest.ExitCode.USAGE_ERROR
    stubborn.stderr.fnmatch_lines(
        [
            "ERROR: *SKILL.md: no eval set drafted (after one repair request): "
            "20 entries repeat queries the eval set has already*nothing written"
        ]
    )
    assert not extra.exists()
    fake_api.stubborn_drafts = False
    result = run(pytester, folder, "--trigger-draft=also")
    result.assert_outcomes(passed=40)
    repaired = draft_requests(fake_api)[-1]
    assert "20 entries repeat queries the eval set has already" in repaired
    result.stdout.fnmatch_lines(
        [
            "*skilltrigger: drafted *trigger-eval.drafted.json for csv-tidy (20 new queries: "
            "10 should trigger, 10 should not): drafted: review*"
        ]
    )
    own = json.loads((folder / "csv-tidy" / "evals" / "trigger-eval.json").read_text())
    added = json.loads(extra.read_text())
    assert not {e["query"] for e in own} & {e["query"] for e in added}
