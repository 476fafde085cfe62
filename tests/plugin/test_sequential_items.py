"""Sequential verdicts end to end: each item sampled until settled at the confidence, borderline
as its own failure, intervals everywhere the rate is shown, the reference rule one option away.
Runs are scripted per query on the fake API, so every count is known."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.plugin.test_items import _sdk_warmed_up, entry, make_skill  # noqa: F401

SKILL = "csv-tidy"
CLEAR = "please fix the broken delimiters in orders.csv"
NEVER = "draw a pie chart of market share"
SPLIT = "dedupe leads.csv by email"


def scripted(pytester: pytest.Pytester, api: FakeMessagesAPI) -> Path:
    api.script(CLEAR, [f"skill:{SKILL}"])
    api.script(NEVER, ["text"])
    api.script(SPLIT, [f"skill:{SKILL}", "text"])  # alternates: never settles
    return make_skill(
        pytester.path / "skills",
        SKILL,
        [entry(CLEAR, True), entry(NEVER, False), entry(SPLIT, True)],
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--trigger-cache=off", *args)


def test_items_settle_at_the_confidence_and_borderline_fails_saying_so(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = scripted(pytester, fake_api)
    out, xml = pytester.path / "out.json", pytester.path / "junit.xml"
    result = run(
        pytester, f"--trigger-skill-path={skills}", f"--trigger-json={out}", f"--junitxml={xml}"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*sequential at 95% (threshold 0.5 ± 0.15, 3 to 15 runs per query)*",
            f"expected '{SKILL}' to trigger: borderline: triggered 7 of 13 runs, 95% interval "
            "0.29–0.77: this request is decided by chance",
            f"{SKILL}: 2 passed, 1 failed (1 borderline), 0 errors | queries passed 2/3 (0.67), "
            "95% interval 0.21–0.94*",
        ]
    )
    # four runs settle each clear query; the split one goes on while a bound is in reach
    assert fake_api.stats["trigger_calls"] == 4 + 4 + 13
    rows = json.loads(out.read_text())["skills"][0]["results"]
    assert [(r["runs"], r["decided"], r["borderline"], r["pass"]) for r in rows] == [
        (4, True, False, True),
        (4, True, False, True),
        (13, False, True, False),
    ]
    assert rows[0]["interval"] == [0.5101, 1.0] and rows[1]["interval"] == [0.0, 0.4899]
    summary = json.loads(out.read_text())["skills"][0]["summary"]
    assert summary["borderline"] == 1 and summary["query_pass_interval"] == [0.2077, 0.9385]
    assert json.loads(out.read_text())["verdict_rule"]["kind"] == "sequential"
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    }
    split = next(v for k, v in props.items() if k.startswith(f"{SKILL}[02"))
    assert split["borderline"] == "True" and split["decided"] == "False"
    assert (split["interval_low"], split["interval_high"]) == ("0.2914", "0.7679")


def test_the_reference_rule_is_one_option_away(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = scripted(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", "--trigger-confidence=off")
    # 2 + 2 runs settle the clear ones; the split one's third run decides 2 of 3
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*3 runs per query, threshold 0.5,*"])
    assert fake_api.stats["trigger_calls"] == 2 + 2 + 3


@pytest.mark.parametrize(
    "args,problem",
    [
        (["--trigger-confidence=sure"], "--trigger-confidence: must be a number or off"),
        (["--trigger-confidence=1"], "--trigger-confidence: must be above 0.5 and below 1"),
        (["--trigger-margin=0.6"], "--trigger-margin: must be above 0 and below 0.5"),
        (["--trigger-max-runs=2"], "--trigger-max-runs: must be at least --trigger-runs"),
        (["--trigger-max-runs=101"], "--trigger-max-runs: must be at most 100, got 101"),
        (
            ["--trigger-confidence=0.9", "--trigger-no-early-stop"],
            "--trigger-no-early-stop: makes every run",
        ),
    ],
)
def test_bad_rule_options_are_one_line_before_any_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, args: list[str], problem: str
) -> None:
    skills = scripted(pytester, fake_api)
    result = run(pytester, f"--trigger-skill-path={skills}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{problem}*"])
    assert fake_api.stats["calls"] == 0


def test_the_fixture_follows_the_sessions_rule(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    skills = scripted(pytester, fake_api)
    pytester.makepyfile(
        test_checks=f"""
        def test_clear(skill_trigger):
            check = skill_trigger({str(skills)!r}, {CLEAR!r})
            assert check.triggered and check.decided and check.runs == 4
            assert check.interval[0] > 0.5

        def test_split(skill_trigger):
            check = skill_trigger({str(skills)!r}, {SPLIT!r})
            assert not check.triggered and check.borderline and check.runs == 13
    """
    )
    result = run(pytester, "test_checks.py")
    result.assert_outcomes(passed=2)
