"""The team's CI loop, in a temporary git repository against the stand-in: a commit that
changes one skill runs that skill's queries alone (``--trigger-changed-since``), and its
competitors in the baseline; the pull request's comment for a regression, an improvement and
no change; shards whose union is every item and whose merge is a single run's report, with no
call; a session stopped at its start still writes its JSON, JUnit XML, step summary and
comment."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.engine.controls import POSITIVE
from pytest_skilltrigger.reports.pr_comment import MARKER
from tests.fake_messages_api import FakeMessagesAPI, extract_query

#: three skills of one folder, each with its queries (should trigger, should not)
SKILLS: dict[str, list[tuple[str, bool]]] = {
    "pdf-tools": [
        ("merge these two scanned contracts into one document", True),
        ("rotate page three of the invoice scan", True),
        ("tidy the columns of the orders export", False),
    ],
    "csv-tidy": [
        ("dedupe the rows of leads export by email", True),
        ("fix the broken delimiters in the orders export", True),
        ("write a haiku about autumn", False),
    ],
    "slide-deck": [
        ("turn these notes into a ten slide talk", True),
        ("what is the capital of peru", False),
    ],
}
BASE_ARGS = ("-p", "no:cacheprovider", "--trigger-cache=off", "--trigger-confidence=off")


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def write_skills(root: Path, descriptions: dict[str, str] | None = None) -> Path:
    folder = root / "skills"
    for name, entries in SKILLS.items():
        skill = folder / name
        (skill / "evals").mkdir(parents=True, exist_ok=True)
        description = (descriptions or {}).get(name, f"Helps with {name.replace('-', ' ')} work.")
        (skill / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n")
        data = [{"query": q, "should_trigger": s} for q, s in entries]
        (skill / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder


def script_all(api: FakeMessagesAPI, flip: dict[str, str] | None = None) -> None:
    """Every query answered as its entry expects, but those in ``flip`` (query: outcome)."""
    for name, entries in SKILLS.items():
        for query, should in entries:
            outcome = f"skill:{name}" if should else "text"
            api.script(query, [(flip or {}).get(query, outcome)] * 20)


def repository(pytester: pytest.Pytester) -> Path:
    folder = write_skills(pytester.path)
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-qm", "the skills")
    return folder


def asked(api: FakeMessagesAPI) -> set[str]:
    return {extract_query(body) for body in api.requests}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*BASE_ARGS, "--trigger-skill-path=skills", *args)


def queries_of(*names: str) -> set[str]:
    return {q for name in names for q, _ in SKILLS[name]}


# -- --trigger-changed-since ----------------------------------------------------------------


def test_a_commit_changing_one_skill_runs_that_skills_queries_alone(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = repository(pytester)
    script_all(fake_api)
    skill_md = folder / "csv-tidy" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Helps with", "Cleans"))
    _git(pytester.path, "commit", "-qam", "a better csv-tidy description")
    out = pytester.path / "out.json"
    result = run(pytester, "--trigger-changed-since=HEAD~1", f"--trigger-json={out}")
    result.assert_outcomes(passed=3, deselected=5)
    assert asked(fake_api) == queries_of("csv-tidy")
    result.stdout.fnmatch_lines(
        [
            "skilltrigger: changed since HEAD~1: 1 skill(s) run (competitors unknown without a "
            "baseline), 2 not re-run",
            "skilltrigger: 2 skills not re-run (unchanged since HEAD~1): pdf-tools, slide-deck",
        ]
    )
    report = json.loads(out.read_text())
    assert report["changed_since"] == "HEAD~1"
    assert [s["skill_name"] for s in report["skills"]] == ["csv-tidy"]
    assert {u["skill"] for u in report["not_rerun"]} == {"pdf-tools", "slide-deck"}


def test_an_uncommitted_eval_set_change_and_nothing_changed(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """The working tree counts (a run before the commit tests the change); with nothing
    changed, nothing runs and no call is made."""
    folder = repository(pytester)
    script_all(fake_api)
    nothing = run(pytester, "--trigger-changed-since=HEAD")
    nothing.assert_outcomes(deselected=8)
    assert fake_api.requests == []
    evals = folder / "slide-deck" / "evals" / "trigger-eval.json"
    evals.write_text(evals.read_text().replace("ten slide", "twelve slide"))
    SKILLS["slide-deck"][0] = ("turn these notes into a twelve slide talk", True)
    try:
        script_all(fake_api)
        one = run(pytester, "--trigger-changed-since=HEAD")
        one.assert_outcomes(passed=2, deselected=6)
        assert asked(fake_api) == queries_of("slide-deck")
    finally:
        SKILLS["slide-deck"][0] = ("turn these notes into a ten slide talk", True)


def test_the_competitors_of_a_changed_skill_in_the_baseline_run_too(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """In the baseline a pdf-tools query went to csv-tidy: the two compete, so a change to
    csv-tidy's description re-runs pdf-tools' queries too, and slide-deck's not."""
    repository(pytester)
    stolen = "tidy the columns of the orders export"
    script_all(fake_api, {stolen: "skill:csv-tidy"})
    base = pytester.path / "base.json"
    run(pytester, f"--trigger-json={base}").assert_outcomes(passed=8)  # (a pass for pdf-tools)
    skill_md = pytester.path / "skills" / "csv-tidy" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("Helps with", "Cleans"))
    fake_api.requests.clear()
    result = run(pytester, "--trigger-changed-since=HEAD", f"--trigger-baseline={base}")
    assert asked(fake_api) == queries_of("csv-tidy", "pdf-tools")
    result.assert_outcomes(passed=6, deselected=2)
    result.stdout.fnmatch_lines(
        ["*1 skill not re-run (unchanged since HEAD, competing with no changed skill): slide-deck"]
    )


def test_a_revision_that_is_not_there_is_one_line_before_any_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    repository(pytester)
    result = run(pytester, "--trigger-changed-since=origin/main")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --trigger-changed-since: 'origin/main' is not a revision of the repository at *"]
    )
    assert fake_api.requests == []
    assert "Traceback" not in result.stderr.str()


# -- --trigger-pr-comment -------------------------------------------------------------------


def _base_and_head(
    pytester: pytest.Pytester, api: FakeMessagesAPI, flip: dict[str, str]
) -> tuple[str, dict[str, Any]]:
    """A baseline with every query as expected, then a head run with ``flip``: the comment
    and the head's JSON."""
    repository(pytester)
    script_all(api)
    base = pytester.path / "base.json"
    run(pytester, f"--trigger-json={base}")
    script_all(api, flip)
    comment, head = pytester.path / "comment.md", pytester.path / "head.json"
    run(
        pytester,
        f"--trigger-baseline={base}",
        f"--trigger-pr-comment={comment}",
        f"--trigger-json={head}",
        "--trigger-runs=2",
    )
    return comment.read_text(), json.loads(head.read_text())


#: more of csv-tidy's queries, so that five flips are a significant change at 95%
MORE_CSV = [(f"merge the duplicated rows of export number {n} by email", True) for n in range(3)]


@pytest.fixture
def six_csv_queries() -> Any:
    SKILLS["csv-tidy"].extend(MORE_CSV)
    yield
    del SKILLS["csv-tidy"][-len(MORE_CSV) :]


def test_the_comment_of_a_regression(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, six_csv_queries: None
) -> None:
    worse = [q for q, should in SKILLS["csv-tidy"] if should]
    comment, head = _base_and_head(pytester, fake_api, dict.fromkeys(worse, "text"))
    lines = comment.splitlines()
    assert lines[0] == MARKER
    assert lines[1] == "### Skill triggers: 5 of 11 queries failed :x:"
    assert "3 skills run against the baseline: 1 regressed, 0 improved, 2 with no " in comment
    assert (
        "| csv-tidy | 6/6 (0.61–1.00) | 1/6 (0.03–0.56) | **regressed**: 5 worse, 0 better "
        "(sign test p = 0.0312) |"
    ) in lines
    assert "<details><summary>Flipped queries (5)</summary>" in lines
    assert (
        "| csv-tidy | dedupe the rows of leads export by email | pass | fail | 0/2 (0.00–0.66) |"
        in lines
    )
    cost = head["totals"]["cost_usd"]
    assert any(line.startswith(f"Cost: ${cost:.3f}"[:10]) for line in lines), comment


def test_the_comment_of_an_improvement_and_of_no_change(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, six_csv_queries: None
) -> None:
    """An improvement: the base missed five queries the head now passes. No change: every
    verdict the same, the gate's verdict and nothing folded but the skills."""
    better = [q for q, should in SKILLS["csv-tidy"] if should]
    repository(pytester)
    script_all(fake_api, dict.fromkeys(better, "text"))
    base = pytester.path / "base.json"
    run(pytester, f"--trigger-json={base}")
    script_all(fake_api)
    comment = pytester.path / "comment.md"
    run(pytester, f"--trigger-baseline={base}", f"--trigger-pr-comment={comment}")
    text = comment.read_text()
    assert "1 regressed" not in text and "0 regressed, 1 improved" in text
    assert "**improved**: 0 worse, 5 better (sign test p = 0.0312)" in text
    assert "### Skill triggers: all 11 queries passed :white_check_mark:" in text
    # the same again: no change
    run(pytester, f"--trigger-baseline={pytester.path / 'base.json'}")
    same = pytester.path / "same.json"
    run(pytester, f"--trigger-json={same}")
    run(
        pytester,
        f"--trigger-baseline={same}",
        f"--trigger-pr-comment={comment}",
        "--trigger-min-accuracy=0.9",
    )
    text = comment.read_text()
    assert "### Skill triggers: gate passed :white_check_mark:" in text
    assert "0 regressed, 0 improved, 3 with no significant change" in text
    assert "Flipped queries" not in text
    assert text.count("| no query changed |") == 3


def test_the_comment_escapes_what_users_wrote(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    SKILLS["slide-deck"].append(("<script>alert(1)</script> | deck", True))
    try:
        repository(pytester)
        script_all(fake_api, {"<script>alert(1)</script> | deck": "text"})
        comment = pytester.path / "comment.md"
        run(pytester, f"--trigger-pr-comment={comment}")
    finally:
        SKILLS["slide-deck"].pop()
    text = comment.read_text()
    assert "<script>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt; \\| deck" in text


# -- --trigger-shard and --trigger-merge ------------------------------------------------------

USAGE_KEYS = {
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_1h_input_tokens",
    "cost_usd",
}


def _without_usage(value: Any) -> Any:
    """A report with its token counts and costs left out: a prompt cache is warm or cold by
    process, so they differ between one session and three."""
    if isinstance(value, dict):
        return {k: _without_usage(v) for k, v in value.items() if k not in USAGE_KEYS}
    if isinstance(value, list):
        return [_without_usage(v) for v in value]
    return value


def test_shards_cover_every_item_once_and_their_merge_is_a_single_runs_report(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    repository(pytester)
    script_all(fake_api, {"rotate page three of the invoice scan": "text"})
    single = pytester.path / "single.json"
    one = run(pytester, f"--trigger-json={single}", "-q")
    parts = pytester.path / "parts"
    ids = []
    for k in (1, 2, 3):
        part = run(pytester, f"--trigger-shard={k}/3", f"--trigger-json={parts}/{k}.json")
        data = json.loads((parts / f"{k}.json").read_text())
        assert data["shard"] == f"{k}/3"
        ids.append([item["nodeid"] for item in data["items"]])
        part.stdout.fnmatch_lines([f"skilltrigger: shard {k}/3: this part's items run"])
    assert sorted(len(part) for part in ids) == [2, 3, 3]  # even parts
    every = [i for part in ids for i in part]
    assert len(every) == len(set(every)) == 8  # each item in one part
    calls = len(fake_api.requests)
    merged, page = pytester.path / "merged.json", pytester.path / "merged.html"
    merge = run(
        pytester,
        f"--trigger-merge={parts}/*.json",
        f"--trigger-json={merged}",
        f"--trigger-report={page}",
    )
    assert len(fake_api.requests) == calls  # no call
    assert merge.ret == one.ret == pytest.ExitCode.TESTS_FAILED
    merge.assert_outcomes(passed=7, failed=1)
    merge.stdout.fnmatch_lines(["skilltrigger: merging 3 parts of 3 (8 items' results): no call*"])
    a, b = json.loads(single.read_text()), json.loads(merged.read_text())
    assert b.pop("merged") == [str(parts / f"{k}.json") for k in (1, 2, 3)]
    assert _without_usage(a) == _without_usage(b)
    spent = [json.loads((parts / f"{k}.json").read_text())["totals"] for k in (1, 2, 3)]
    assert b["totals"]["output_tokens"] == sum(s["output_tokens"] for s in spent)
    assert page.exists()


def test_a_missing_part_and_a_part_that_is_not_one_are_one_line_each(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    repository(pytester)
    script_all(fake_api)
    parts = pytester.path / "parts"
    run(pytester, "--trigger-shard=1/2", f"--trigger-json={parts}/1.json")
    missing = run(pytester, f"--trigger-merge={parts}/*.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: --trigger-merge: part 2/2 missing: did its job fail?"])
    (parts / "2.json").write_text('{"skills": []}')
    wrong = run(pytester, f"--trigger-merge={parts}/*.json")
    wrong.stderr.fnmatch_lines(
        [
            f"ERROR: {parts / '2.json'}: not a shard's report: write the parts with "
            "--trigger-shard=K/N"
        ]
    )
    bad = run(pytester, "--trigger-shard=3/2")
    bad.stderr.fnmatch_lines(["ERROR: --trigger-shard: K must be within 1..N, got '3/2'"])


# -- a session stopped at its start -----------------------------------------------------------


def test_a_stopped_session_writes_its_json_junit_step_summary_and_comment(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository(pytester)
    script_all(fake_api)
    fake_api.script(POSITIVE, ["text"] * 20)  # the positive control never triggers
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out, junit, comment = (pytester.path / n for n in ("out.json", "junit.xml", "comment.md"))
    result = run(
        pytester,
        "--trigger-controls=on",
        f"--trigger-json={out}",
        f"--junit-xml={junit}",
        f"--trigger-pr-comment={comment}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    report = json.loads(out.read_text())
    assert report["stopped"].startswith("the positive control did not trigger")
    assert report["skills"] == [] and report["totals"]["by_phase"]["controls"]["calls"] > 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("errors") == "1" and suite.get("tests") == "1"
    error = suite.find("testcase/error")
    assert error is not None and error.get("message") == report["stopped"]
    assert (
        "**The session stopped before any trigger test ran:** the positive" in summary.read_text()
    )
    assert comment.read_text().startswith(f"{MARKER}\n### Skill triggers: stopped :warning:")


def test_no_backend_with_require_backend_writes_them_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    repository(pytester)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    out = pytester.path / "out.json"
    result = run(
        pytester,
        "--trigger-require-backend",
        "--trigger-backend=anthropic",
        f"--trigger-json={out}",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no backend can run the trigger tests" in json.loads(out.read_text())["stopped"]


def test_bad_input_writes_nothing(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    """Unlike a stopped session, bad input is an error before anything is written."""
    repository(pytester)
    out = pytester.path / "out.json"
    result = run(pytester, "--trigger-backend=nobody-makes-this", f"--trigger-json={out}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not out.exists()
