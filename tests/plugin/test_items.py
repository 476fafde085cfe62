"""End-to-end tests of the pytest plugin: items, verdicts, failures, errors, reports, input.

Each test builds a small skill folder inside ``pytester.path``, scripts the fake Messages API
per query so every outcome is known, runs pytest on it and checks what the user would see.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.model.context import DEFAULT_COMPETITORS, TriggerContext
from tests.fake_messages_api import LISTING_RE, FakeMessagesAPI, extract_query
from tests.helpers import no_store, reference_rule

SKILL = "csv-tidy"
DESCRIPTION = (
    "Clean and repair messy CSV files (encodings, delimiters, duplicated rows, dates). "
    "Use when the user wants a data file tidied."
)

# queries (with scripted outcomes) used by most tests
Q_YES = "please fix the broken delimiters in orders.csv"
Q_NO = "draw a pie chart of market share"
Q_MISS = "dedupe leads.csv by email"
Q_WRONG = "what is a csv file anyway"

BASE_ARGS = ("-p", "no:cacheprovider")


@pytest.fixture(scope="module", autouse=True)
def _sdk_warmed_up() -> None:
    """Make one call before any in-process run.

    The SDK imports thousands of modules lazily on its first request, and pytester drops every
    module an in-process run imported; without this each run pays seconds of CPU for them.
    """
    with FakeMessagesAPI() as api, pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_BASE_URL", api.url)
        mp.setenv("ANTHROPIC_API_KEY", "test-key")
        backend = AnthropicBackend()
        try:
            backend.run(TriggerContext("warm-up", "Warms the SDK up."), "warm up")
        finally:
            backend.close()


def entry(query: str, should: bool, **extra: Any) -> dict[str, Any]:
    return {"query": query, "should_trigger": should, **extra}


def make_skill(
    root: Path,
    name: str = SKILL,
    entries: list[dict[str, Any]] | None = None,
    description: str = DESCRIPTION,
    *,
    skill_md: str | None = None,
    eval_text: str | None = None,
) -> Path:
    """Create ``root/name/SKILL.md`` and ``root/name/evals/trigger-eval.json``."""
    folder = root / name
    (folder / "evals").mkdir(parents=True, exist_ok=True)
    if skill_md is None:
        skill_md = f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nBody.\n"
    (folder / "SKILL.md").write_text(skill_md, encoding="utf-8")
    if eval_text is None:
        eval_text = json.dumps(entries if entries is not None else [entry(Q_YES, True)])
    (folder / "evals" / "trigger-eval.json").write_text(eval_text, encoding="utf-8")
    return folder


def standard_skill(pytester: pytest.Pytester, api: FakeMessagesAPI) -> Path:
    """Four entries: a clear hit, a clear non-hit, a missed hit, a wrong hit."""
    api.script(Q_YES, [f"skill:{SKILL}"])
    api.script(Q_NO, ["text"])
    api.script(Q_MISS, ["tool:Bash"])
    api.script(Q_WRONG, [f"skill:{SKILL}"])
    return make_skill(
        pytester.path / "skills",
        entries=[
            entry(Q_YES, True),
            entry(Q_NO, False),
            entry(Q_MISS, True),
            entry(Q_WRONG, False),
        ],
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*BASE_ARGS, *no_store(args), *reference_rule(args), *args)


def outcomes_by_id(result: pytest.RunResult) -> dict[str, str]:
    """``{item name: PASSED|FAILED|ERROR|SKIPPED}`` from a ``-v`` run."""
    found: dict[str, str] = {}
    for line in result.outlines:
        m = re.match(r"^\S+::(\S+\[.*\]) (PASSED|FAILED|ERROR|SKIPPED)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def trigger_calls(api: FakeMessagesAPI) -> int:
    return int(api.stats["trigger_calls"])


# --------------------------------------------------------------------------------------------
# collection: ids, order, markers, selection, reportinfo
# --------------------------------------------------------------------------------------------


def test_one_item_per_entry_in_file_order_with_readable_ids(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills.parent}", "--collect-only", "-q")
    assert result.ret == 0
    ids = [line.split("::", 1)[1] for line in result.outlines if "::" in line]
    assert ids == [
        "csv-tidy[00-please-fix-the-broken-delimiters-in-orde]",
        "csv-tidy[01-draw-a-pie-chart-of-market-share]",
        "csv-tidy[02-dedupe-leads-csv-by-email]",
        "csv-tidy[03-what-is-a-csv-file-anyway]",
    ]
    assert all(
        line.split("::")[0].endswith("csv-tidy/SKILL.md")
        for line in result.outlines
        if "::" in line
    )
    assert trigger_calls(fake_api) == 0  # collecting makes no call


def test_ids_are_stable_between_runs(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    skills = standard_skill(pytester, fake_api)
    first = run(pytester, f"--trigger-skill-path={skills}", "--collect-only", "-q").outlines
    second = run(pytester, f"--trigger-skill-path={skills}", "--collect-only", "-q").outlines
    assert [x for x in first if "::" in x] == [x for x in second if "::" in x]
    assert len([x for x in first if "::" in x]) == 4


def test_marker_selects_and_deselects(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    skills = standard_skill(pytester, fake_api)
    pytester.makepyfile(test_plain="def test_ordinary():\n    assert True\n")
    both = (str(pytester.path / "test_plain.py"), f"--trigger-skill-path={skills}")
    result = run(pytester, *both, "-m", "skill_trigger")
    result.assert_outcomes(passed=2, failed=2, deselected=1)
    result = run(pytester, *both, "-m", "not skill_trigger")
    result.assert_outcomes(passed=1, deselected=4)
    # the marker is registered: --strict-markers does not complain
    result = run(pytester, *both, "--strict-markers", "-m", "skill_trigger", "--collect-only")
    assert result.ret == 0


def test_keyword_selection(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", "-k", "dedupe or pie", "-v")
    result.assert_outcomes(passed=1, failed=1, deselected=2)
    assert outcomes_by_id(result) == {
        "csv-tidy[01-draw-a-pie-chart-of-market-share]": "PASSED",
        "csv-tidy[02-dedupe-leads-csv-by-email]": "FAILED",
    }
    # only the selected queries were sent
    queries = {extract_query(r) for r in fake_api.requests}
    assert queries == {Q_NO, Q_MISS}


def test_reportinfo_points_at_the_eval_file(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    pytester.makeconftest(
        """
        def pytest_collection_finish(session):
            for item in session.items:
                path, line, desc = item.reportinfo()
                print("INFO", str(path), line, desc)
        """
    )
    result = run(pytester, f"--trigger-skill-path={skills}", "--collect-only", "-s")
    infos = [line for line in result.outlines if line.startswith("INFO ")]
    assert len(infos) == 4
    eval_file = str(skills / "evals" / "trigger-eval.json")
    assert all(line.startswith(f"INFO {eval_file} None ") for line in infos)
    assert infos[0].endswith(Q_YES)
    # -vv shows where each item comes from: the eval file
    result = run(pytester, f"--trigger-skill-path={skills}", "-k", "dedupe", "-vv")
    result.stdout.fnmatch_lines(
        ["*csv-tidy[[]02-dedupe-leads-csv-by-email[]] <- skills/csv-tidy/evals/trigger-eval.json*"]
    )


# --------------------------------------------------------------------------------------------
# verdicts and failure messages
# --------------------------------------------------------------------------------------------


def test_verdicts_of_the_four_kinds(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", "-v")
    assert outcomes_by_id(result) == {
        "csv-tidy[00-please-fix-the-broken-delimiters-in-orde]": "PASSED",
        "csv-tidy[01-draw-a-pie-chart-of-market-share]": "PASSED",
        "csv-tidy[02-dedupe-leads-csv-by-email]": "FAILED",
        "csv-tidy[03-what-is-a-csv-file-anyway]": "FAILED",
    }
    assert result.ret == 1


@pytest.mark.parametrize(
    ("should", "expected"), [(True, "passed"), (False, "failed")], ids=["should", "should-not"]
)
def test_boundary_rate_equal_to_threshold_counts_as_triggered(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, should: bool, expected: str
) -> None:
    fake_api.script(Q_YES, [f"skill:{SKILL}", "text"])
    skills = make_skill(pytester.path / "skills", entries=[entry(Q_YES, should)])
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "--trigger-runs",
        "2",
        "--trigger-threshold",
        "0.5",
        "--trigger-no-early-stop",
    )
    result.assert_outcomes(**{expected: 1})
    assert trigger_calls(fake_api) == 2
    if not should:
        result.stdout.fnmatch_lines(["*triggered 1/2 runs, rate 0.50 >= threshold 0.50*"])


def test_runs_and_threshold_as_ini_keys(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    # 1 trigger in 4 runs: rate 0.25 passes threshold 0.25 but not the default 0.5
    fake_api.script(Q_YES, [f"skill:{SKILL}", "text", "text", "text"])
    skills = make_skill(pytester.path / "skills", entries=[entry(Q_YES, True)])
    pytester.makeini("[pytest]\ntrigger_runs = 4\ntrigger_threshold = 0.25\n")
    result = run(pytester, f"--trigger-skill-path={skills}", "--trigger-no-early-stop")
    result.assert_outcomes(passed=1)
    assert trigger_calls(fake_api) == 4
    result.stdout.fnmatch_lines(["*4 runs per query, threshold 0.25*"])
    # the command line wins over the ini file
    fake_api.script(Q_YES, [f"skill:{SKILL}", "text", "text", "text"])
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "--trigger-no-early-stop",
        "--trigger-threshold",
        "0.5",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*triggered 1/4 runs, rate 0.25 < threshold 0.50*"])


def test_failure_explains_query_expectation_rate_and_choice(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    q_skill, q_tool, q_text = "clean up sales.csv", "fix encoding in names.csv", "csv help"
    fake_api.script(q_skill, ["skill:other-skill"])
    fake_api.script(q_tool, ["tool:Bash"])
    fake_api.script(q_text, ["text"])
    fake_api.script(Q_WRONG, [f"skill:{SKILL}"])
    skills = make_skill(
        pytester.path / "skills",
        entries=[
            entry(q_skill, True),
            entry(q_tool, True),
            entry(q_text, True),
            entry(Q_WRONG, False),
        ],
    )
    result = run(pytester, f"--trigger-skill-path={skills}", "--trigger-no-early-stop")
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert "Traceback" not in out
    result.stdout.fnmatch_lines(
        [
            f"query: {q_skill!r}",
            f"expected {SKILL!r} to trigger: triggered 0/3 runs, rate 0.00 < threshold 0.50"
            " (95% interval 0.00–0.56)",
            "the model chose instead: skill 'other-skill' x3",
        ]
    )
    result.stdout.fnmatch_lines(
        [f"query: {q_tool!r}", "*triggered 0/3*", "the model chose instead: tool Bash x3"]
    )
    result.stdout.fnmatch_lines(
        [f"query: {q_text!r}", "*triggered 0/3*", "the model chose instead: a plain answer x3"]
    )
    # the summary groups them: the listing once, the misses with what won, the false trigger
    result.stdout.fnmatch_lines(
        [
            f"{SKILL}: 0 passed, 4 failed*",
            f"  listed as: - {SKILL}: *",
            "  missed 3 of 3 should-trigger queries; chosen instead: skill 'other-skill' x3, "
            "a plain answer x3, tool Bash x3",
            f"    - {q_skill!r} (0/3)",
            f"    - {q_tool!r} (0/3)",
            f"    - {q_text!r} (0/3)",
            "  took 1 of 1 should-not queries",
            f"    - {Q_WRONG!r} (3/3)",
        ]
    )
    assert result.stdout.str().count("listed as: -") == 1
    result.stdout.fnmatch_lines(
        [
            f"query: {Q_WRONG!r}",
            f"expected {SKILL!r} to not trigger: triggered 3/3 runs, rate 1.00 >= threshold 0.50"
            " (95% interval 0.44–1.00)",
            f"the model chose: skill {SKILL!r} x3",
        ]
    )


# --------------------------------------------------------------------------------------------
# early stopping
# --------------------------------------------------------------------------------------------


def test_early_stop_makes_fewer_calls_with_identical_verdicts(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", "-v", "--trigger-runs", "5")
    early = outcomes_by_id(result)
    early_calls = trigger_calls(fake_api)
    # clear-cut queries stop once 3 of 5 runs agree
    assert early_calls == 4 * 3

    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "-v",
        "--trigger-runs",
        "5",
        "--trigger-no-early-stop",
    )
    assert trigger_calls(fake_api) - early_calls == 4 * 5
    assert outcomes_by_id(result) == early
    assert len(early) == 4


def test_early_stop_still_decides_mixed_queries_exactly(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    # alternating outcomes: 2 of 3 trigger, so the query needs all three runs
    fake_api.script(Q_YES, [f"skill:{SKILL}", "text"])
    skills = make_skill(pytester.path / "skills", entries=[entry(Q_YES, True)])
    result = run(pytester, f"--trigger-skill-path={skills}")
    result.assert_outcomes(passed=1)
    assert trigger_calls(fake_api) == 3


# --------------------------------------------------------------------------------------------
# API failures, outages, credentials
# --------------------------------------------------------------------------------------------


def test_failed_api_call_errors_the_item(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.faults = {"500": 1.0}
    fake_api.retry_after_ms = 1
    fake_api.script(Q_NO, ["text"])
    skills = make_skill(pytester.path / "skills", entries=[entry(Q_NO, False)])
    report = pytester.path / "report.json"
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "--trigger-runs",
        "1",
        f"--trigger-json={report}",
    )
    # an outage never makes a should-not query pass, nor fails it: it is an error
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of csv-tidy[[]00-draw-a-pie-chart-of-market-share[]]*",
            f"query: {Q_NO!r}",
            "trigger run failed: 500 api_error: Internal server error*",
        ]
    )
    out = result.stdout.str()
    # the message is the API's, not a traceback through pytest's internals
    assert "raise " not in out and "runtest_setup" not in out and "items.py" not in out
    # the JSON report counts it as an error, with no verdict
    skill = json.loads(report.read_text(encoding="utf-8"))["skills"][0]
    row = skill["results"][0]
    assert row["pass"] is None
    assert row["errors"] >= 1
    assert "Internal server error" in row["error"]
    assert skill["summary"]["errors"] == 1
    assert skill["summary"]["passed"] == 0 and skill["summary"]["failed"] == 0


def test_wrong_key_stops_the_session_with_one_message(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
    queries = [f"query number {i} about csv files" for i in range(6)]
    skills = make_skill(pytester.path / "skills", entries=[entry(q, True) for q in queries])
    result = run(pytester, f"--trigger-skill-path={skills}", "--trigger-concurrency", "1")
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", outcomes.get("error")) == 1
    assert "passed" not in outcomes and "failed" not in outcomes
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*Interrupted: stopping: 401 authentication_error*"])
    assert out.count("invalid x-api-key") >= 1
    assert out.count("authentication_error") <= 3  # one item's error plus the stop reason
    # one run in flight at a time: nothing was called after the first 401
    assert fake_api.stats["calls"] == 1


def test_no_credentials_and_no_cli_skips_with_a_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CONFIG_DIR",
        "ANTHROPIC_FEDERATION_RULE_ID",
        "ANTHROPIC_IDENTITY_TOKEN",
        "ANTHROPIC_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("APPDATA", str(home))
    monkeypatch.setenv("PATH", str(empty_bin))
    skills = make_skill(pytester.path / "skills", entries=[entry(Q_YES, True), entry(Q_NO, False)])
    result = run(pytester, f"--trigger-skill-path={skills}", "-rs")
    result.assert_outcomes(skipped=2)
    out = result.stdout.str()
    assert "ANTHROPIC_API_KEY" in out
    assert "`claude`" in out or "claude CLI" in out


# --------------------------------------------------------------------------------------------
# numbers on reports and the JSON report
# --------------------------------------------------------------------------------------------


def test_user_properties_on_reports_via_junitxml(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    xml = pytester.path / "junit.xml"
    run(pytester, f"--trigger-skill-path={skills}", f"--junitxml={xml}", "--trigger-no-early-stop")
    cases = ET.parse(xml).getroot().iter("testcase")
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in cases
    }
    assert props["csv-tidy[00-please-fix-the-broken-delimiters-in-orde]"] == {
        "trigger_rate": "1.0",
        "interval_low": "0.4385",
        "interval_high": "1.0",
        "decided": "True",
        "borderline": "False",
        "triggers": "3",
        "runs": "3",
        "chosen": json.dumps({f"skill:{SKILL}": 3}),
    }
    assert props["csv-tidy[02-dedupe-leads-csv-by-email]"] == {
        "trigger_rate": "0.0",
        "interval_low": "0.0",
        "interval_high": "0.5615",
        "decided": "True",
        "borderline": "False",
        "triggers": "0",
        "runs": "3",
        "chosen": json.dumps({"tool:Bash": 3}),
    }


def test_user_properties_are_plain_values(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    pytester.makeconftest(
        """
        import json

        def pytest_runtest_logreport(report):
            if report.when == "call":
                with open("props.jsonl", "a", encoding="utf-8") as f:
                    name = report.nodeid.split("::")[1]
                    f.write(json.dumps([name, dict(report.user_properties)]) + "\\n")
        """
    )
    run(pytester, f"--trigger-skill-path={skills}")
    lines = (pytester.path / "props.jsonl").read_text(encoding="utf-8").splitlines()
    props = dict(json.loads(line) for line in lines)
    assert len(props) == 4
    hit = props["csv-tidy[00-please-fix-the-broken-delimiters-in-orde]"]
    assert hit["trigger_rate"] == 1.0 and hit["triggers"] == hit["runs"] == 2
    assert json.loads(hit["chosen"]) == {f"skill:{SKILL}": 2}
    wrong = props["csv-tidy[03-what-is-a-csv-file-anyway]"]
    assert wrong["trigger_rate"] == 1.0 and json.loads(wrong["chosen"]) == {f"skill:{SKILL}": 2}


REQUIRED_ROW_KEYS = {
    "query",
    "should_trigger",
    "trigger_rate",
    "triggers",
    "runs",
    "pass",
    "errors",
    "chosen",
}
REQUIRED_SUMMARY_KEYS = {
    "total",
    "passed",
    "failed",
    "errors",
    "precision",
    "recall",
    "accuracy",
    "input_tokens",
    "output_tokens",
}


def test_trigger_json_structure(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    fake_api.script(Q_YES, [f"skill:{SKILL}"])
    fake_api.script(Q_NO, ["text"])
    fake_api.script(Q_MISS, ["tool:Bash"])
    fake_api.script(Q_WRONG, [f"skill:{SKILL}"])
    skills = make_skill(
        pytester.path / "skills",
        entries=[
            entry(Q_YES, True, id="yes-1", reason="the core job"),
            entry(Q_NO, False),
            entry(Q_MISS, True, category="dedupe"),
            entry(Q_WRONG, False),
        ],
    )
    out = pytester.path / "report.json"
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        f"--trigger-json={out}",
        "--trigger-no-early-stop",
    )
    result.assert_outcomes(passed=2, failed=2)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["version"] == 1
    assert report["backend"] == "anthropic"
    assert isinstance(report["model"], str) and report["model"]
    assert report["runs_per_query"] == 3
    assert report["trigger_threshold"] == 0.5
    assert len(report["skills"]) == 1
    skill = report["skills"][0]
    assert skill["skill_name"] == SKILL
    assert Path(skill["skill_path"]) == skills
    assert skill["description"] == DESCRIPTION
    rows = skill["results"]
    assert [r["query"] for r in rows] == [Q_YES, Q_NO, Q_MISS, Q_WRONG]
    for row in rows:
        assert REQUIRED_ROW_KEYS <= set(row)
    assert {k: rows[0][k] for k in REQUIRED_ROW_KEYS} == {
        "query": Q_YES,
        "should_trigger": True,
        "trigger_rate": 1.0,
        "triggers": 3,
        "runs": 3,
        "pass": True,
        "errors": 0,
        "chosen": {f"skill:{SKILL}": 3},
    }
    assert [r["pass"] for r in rows] == [True, True, False, False]
    assert rows[2]["chosen"] == {"tool:Bash": 3}
    assert rows[1]["chosen"] == {"text": 3}
    # extra keys of the entries are kept in their rows (at top level or under "extra")
    first_extra = {**rows[0], **rows[0].get("extra", {})}
    assert first_extra["id"] == "yes-1" and first_extra["reason"] == "the core job"
    assert {**rows[2], **rows[2].get("extra", {})}["category"] == "dedupe"
    assert "id" not in {**rows[1], **rows[1].get("extra", {})}

    summary = skill["summary"]
    assert REQUIRED_SUMMARY_KEYS <= set(summary)
    assert {k: summary[k] for k in ("total", "passed", "failed", "errors")} == {
        "total": 4,
        "passed": 2,
        "failed": 2,
        "errors": 0,
    }
    # runs: TP 3 (Q_YES), FN 3 (Q_MISS), FP 3 (Q_WRONG), TN 3 (Q_NO)
    assert summary["precision"] == 0.5
    assert summary["recall"] == 0.5
    assert summary["accuracy"] == 0.5
    # the prompt is cached up to its last block, where Claude Code marks it
    prompt = summary["input_tokens"] + summary["cache_creation_input_tokens"]
    assert prompt > 0 and summary["output_tokens"] > 0


# --------------------------------------------------------------------------------------------
# bad input: a usage error, one line, no traceback, nothing written
# --------------------------------------------------------------------------------------------

GOOD_MD = f"---\nname: {SKILL}\ndescription: {DESCRIPTION}\n---\nBody\n"


def _bad_eval(text: str):
    def build(root: Path) -> tuple[list[str], str]:
        folder = make_skill(root, eval_text=text)
        return [f"--trigger-skill-path={folder}"], str(folder / "evals" / "trigger-eval.json")

    return build


def _bad_md(text: str | bytes):
    def build(root: Path) -> tuple[list[str], str]:
        folder = make_skill(root, skill_md=text if isinstance(text, str) else None)
        if isinstance(text, bytes):
            (folder / "SKILL.md").write_bytes(text)
        return [f"--trigger-skill-path={folder}"], str(folder / "SKILL.md")

    return build


def _missing_path(root: Path) -> tuple[list[str], str]:
    return [f"--trigger-skill-path={root / 'nowhere'}"], str(root / "nowhere")


def _no_skills(root: Path) -> tuple[list[str], str]:
    (root / "empty" / "sub").mkdir(parents=True)
    return [f"--trigger-skill-path={root / 'empty'}"], str(root / "empty")


def _option(*args: str):
    def build(root: Path) -> tuple[list[str], str]:
        folder = make_skill(root)
        return [f"--trigger-skill-path={folder}", *args], args[0]

    return build


BAD_INPUTS = [
    pytest.param(_bad_eval("[{'query': 'x', 'should_trigger': true}"), id="eval-not-json"),
    pytest.param(_bad_eval("[]"), id="empty-set"),
    pytest.param(_bad_eval(json.dumps([entry("q one", "yes")])), id="should-trigger-yes"),
    pytest.param(
        _bad_eval(json.dumps([entry("same q", True), entry("same q", False)])),
        id="duplicate-query",
    ),
    pytest.param(_bad_md(b"---\nname: x\ndescription: caf\xe9\n---\n"), id="not-utf8"),
    pytest.param(_missing_path, id="missing-skill-path"),
    pytest.param(_no_skills, id="folder-without-skills"),
    pytest.param(_option("--trigger-runs", "0"), id="runs-0"),
    pytest.param(_option("--trigger-threshold", "1.5"), id="threshold-1.5"),
    pytest.param(_option("--trigger-runs", "three"), id="runs-not-a-number"),
]


@pytest.mark.parametrize("build", BAD_INPUTS)
def test_bad_input_is_a_one_line_usage_error(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, build
) -> None:
    args, where = build(pytester.path / "skills")
    out = pytester.path / "report.json"
    result = run(pytester, *args, f"--trigger-json={out}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stdout.str() + "\n" + result.stderr.str()
    assert "Traceback" not in text
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, text
    assert errors[0].startswith(f"ERROR: {where}"), errors
    assert len(errors[0].split(": ", 2)) == 3  # ERROR: <where>: <problem>
    assert not out.exists()
    assert trigger_calls(fake_api) == 0


# --------------------------------------------------------------------------------------------
# several skills: siblings as competitors
# --------------------------------------------------------------------------------------------


def test_folder_of_skills_collects_all_and_lists_siblings(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    root = pytester.path / "skills"
    make_skill(root, "alpha-skill", [entry("alpha query one", True)], "Alpha does alpha things.")
    make_skill(root, "beta-skill", [entry("beta query one", False)], "Beta does beta things.")
    fake_api.script("alpha query one", ["skill:alpha-skill"])
    fake_api.script("beta query one", ["text"])
    result = run(pytester, f"--trigger-skill-path={root}", "-v")
    assert outcomes_by_id(result) == {
        "alpha-skill[00-alpha-query-one]": "PASSED",
        "beta-skill[00-beta-query-one]": "PASSED",
    }
    generic = {s.name for s in DEFAULT_COMPETITORS}
    seen_for = {}
    for body in fake_api.requests:
        query = extract_query(body)
        listing = "\n".join(
            block["text"]
            for m in body["messages"]
            for block in m["content"]
            if isinstance(block, dict) and block.get("type") == "text"
        )
        names = [m.group("name") for m in LISTING_RE.finditer(listing)]
        seen_for[query] = names
    assert set(seen_for) == {"alpha query one", "beta query one"}
    for query, names in seen_for.items():
        assert names.count("alpha-skill") == 1, names
        assert names.count("beta-skill") == 1, names
        assert generic & set(names), names
        assert len(names) == len(set(names)), names
        assert query not in names


# --------------------------------------------------------------------------------------------
# the result store and the cost budget
# --------------------------------------------------------------------------------------------


def test_result_store_reuses_runs(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    skills = standard_skill(pytester, fake_api)
    store = tmp_path / "store.sqlite"
    args = (f"--trigger-skill-path={skills}", "-v", f"--trigger-store={store}")
    first = run(pytester, *args)
    verdicts = outcomes_by_id(first)
    assert len(verdicts) == 4
    calls = trigger_calls(fake_api)
    assert calls > 0

    second = run(pytester, *args)
    assert trigger_calls(fake_api) == calls, "a repeated run must make no call"
    assert outcomes_by_id(second) == verdicts
    second.stdout.fnmatch_lines(["session total: 0 calls, $0.00 (no call was made)"])

    off = run(pytester, *args, "--trigger-cache", "off")
    assert trigger_calls(fake_api) == 2 * calls
    assert outcomes_by_id(off) == verdicts

    refresh = run(pytester, *args, "--trigger-cache", "refresh")
    assert trigger_calls(fake_api) == 3 * calls
    assert outcomes_by_id(refresh) == verdicts

    again = run(pytester, *args, "--trigger-cache", "use")
    assert trigger_calls(fake_api) == 3 * calls
    assert outcomes_by_id(again) == verdicts


def test_result_store_depends_on_the_description(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    skills = standard_skill(pytester, fake_api)
    store = tmp_path / "store.sqlite"
    args = (f"--trigger-skill-path={skills}", f"--trigger-store={store}")
    run(pytester, *args)
    calls = trigger_calls(fake_api)
    run(pytester, *args, "--trigger-description", "A different description of csv tidying.")
    assert trigger_calls(fake_api) == 2 * calls


def test_zero_budget_skips_items_naming_the_budget(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", "--trigger-budget-usd", "0", "-rs")
    result.assert_outcomes(skipped=4)
    assert "budget" in result.stdout.str()
    assert trigger_calls(fake_api) == 0


def test_tiny_budget_stops_calls_and_skips_the_rest(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = standard_skill(pytester, fake_api)
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "--trigger-budget-usd",
        "0.0000001",
        "-rs",
    )
    # every call is estimated from its request before it is sent: none fits (counted on
    # the server's side, at the default concurrency)
    assert trigger_calls(fake_api) == 0
    result.assert_outcomes(skipped=4)
    result.stdout.fnmatch_lines(["SKIPPED*cost budget of $0.0000001 reached*"])


def test_the_budget_bounds_the_estimate_of_what_is_sent_at_the_default_concurrency(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Each call's cost is estimated from its request before it is sent: with room for two
    estimates, at most two calls reach the server, even with ten in flight at once."""
    from pytest_skilltrigger.backends.api.backend import AnthropicBackend
    from pytest_skilltrigger.engine.cost_guard import CostGuard
    from pytest_skilltrigger.model.prices import load_prices
    from pytest_skilltrigger.skills.catalog import load_targets

    skills = standard_skill(pytester, fake_api)
    target = load_targets([str(skills)])[0]
    backend = AnthropicBackend()
    guard = CostGuard(backend.model, load_prices(None))
    estimates = [
        guard.estimate_usd(backend.estimate(target.context(), e.query))
        for e in target.eval_set.entries
    ]
    budget = 2.5 * max(estimates)
    result = run(
        pytester,
        f"--trigger-skill-path={skills}",
        "--trigger-budget-usd",
        f"{budget:.8f}",
        "--trigger-within=first-call",  # one request a run (a turn reserves for its bound)
    )
    assert 1 <= trigger_calls(fake_api) <= 2
    assert sum(sorted(estimates)[: trigger_calls(fake_api)]) <= budget
    result.stdout.fnmatch_lines(["*cost budget*was reached*queries were skipped*"])


@pytest.mark.parametrize(
    ("key", "said"),
    [
        (
            "disable-model-invocation: true",
            "disable-model-invocation: true in SKILL.md: Claude Code does not list this skill",
        ),
        (
            'paths: "**/*.xlsx"',
            "paths: '**/*.xlsx' in SKILL.md: Claude Code lists this skill "
            "only once the session works on matching files",
        ),
        ("paths:\n  - data/*.csv", "paths: ?'data/*.csv'? in SKILL.md: Claude Code lists"),
    ],
    ids=["disable-model-invocation", "paths-glob", "paths-list"],
)
def test_a_skill_the_model_is_not_shown_fails_its_positives_without_a_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, key: str, said: str
) -> None:
    skills = make_skill(
        pytester.path / "skills",
        entries=[entry(Q_YES, True), entry(Q_NO, False)],
        skill_md=f"---\nname: {SKILL}\ndescription: {DESCRIPTION}\n{key}\n---\n# Body\n",
    )
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.xlsx").write_bytes(b"")  # a matching file changes nothing
    out = pytester.path / "out.json"
    result = run(pytester, f"--trigger-skill-path={skills}", f"--trigger-json={out}")
    result.assert_outcomes(passed=1, failed=1)
    assert trigger_calls(fake_api) == 0
    result.stdout.fnmatch_lines([f"*{said}*", f"*{SKILL}/SKILL.md:1: PytestConfigWarning: *"])
    report = json.loads(out.read_text())
    assert report["skills"][0]["listed_description"] is None


def test_an_empty_paths_list_is_listed(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = make_skill(
        pytester.path / "skills",
        entries=[entry(Q_YES, True)],
        skill_md=f"---\nname: {SKILL}\ndescription: {DESCRIPTION}\npaths: []\n---\n# Body\n",
    )
    fake_api.script(Q_YES, [f"skill:{SKILL}"])
    run(pytester, f"--trigger-skill-path={skills}").assert_outcomes(passed=1)
    assert trigger_calls(fake_api) > 0
    assert f"- {SKILL}: {DESCRIPTION}" in json.dumps(fake_api.requests[0], ensure_ascii=False)


def test_the_exact_listed_line_is_in_the_failure_and_the_json_and_a_cut_is_warned(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    api = fake_api
    api.script(Q_MISS, ["tool:Bash"])
    long_when = "Also for <tsv> files and every other kind of table. " * 40
    skills = make_skill(
        pytester.path / "skills",
        entries=[entry(Q_MISS, True)],
        skill_md=(
            f"---\nname: {SKILL}\ndescription: {DESCRIPTION}\n"
            f"when_to_use: {json.dumps(long_when)}\n---\n# Body\n"
        ),
    )
    out = pytester.path / "out.json"
    result = run(pytester, f"--trigger-skill-path={skills}", f"--trigger-json={out}")
    result.assert_outcomes(failed=1)
    listed = json.loads(out.read_text())["skills"][0]["listed_description"]
    assert listed.startswith(DESCRIPTION + " - Also for &lt;tsv&gt;") and listed.endswith("\u2026")
    out_text = result.stdout.str()
    assert out_text.count(f"listed as: - {SKILL}: {listed}") == 1  # once, in the summary
    assert "listed to the model as" not in out_text
    result.stdout.fnmatch_lines(["*Claude Code cuts it, so the model never sees what follows*"])
    verbose = run(pytester, f"--trigger-skill-path={skills}", "-v")  # -v: under each failure too
    assert f"listed to the model as: - {SKILL}: {listed}" in verbose.stdout.str()
