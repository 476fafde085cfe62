"""Trigger tests inside an ordinary project: ini-configured skills, pytest's own selection,
the ``skill_trigger`` fixture, and the CI gates (accuracy floor, required backend, baseline,
JUnit properties, GitHub step summary)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI

DESCRIPTION = "Merge, split and rotate PDF documents; extract pages from PDF files."
ENTRIES = [
    ("merge these PDF documents into one file", True),
    ("split this PDF into separate pages", True),
    ("rotate the pages of the PDF documents", True),
    ("write a limerick about cats", False),
]


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    """A repository with an app, its own tests, and a skills/ folder with one skill."""
    root = pytester.path
    (root / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nskill_paths = ["skills"]\ntestpaths = ["tests"]\n'
        'addopts = "-p no:cacheprovider"\ntrigger_cache = "off"\n'
        # the reference rule: these tests pin its runs (the sequential rule has its own)
        'trigger_confidence = "off"\n'
    )
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text(
        "from app import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    )
    (root / "tests" / "test_fixture.py").write_text(
        "def test_merge_triggers(skill_trigger):\n"
        "    result = skill_trigger('skills/pdf-tools', 'merge these PDF documents please',"
        " runs=3, threshold=1.0)\n"
        "    assert result.triggered and result.runs == 3 and result.rate == 1.0\n"
        "    assert result.chosen == {'skill:pdf-tools': 3}\n"
        "\n"
        "def test_unrelated_does_not(skill_trigger):\n"
        "    result = skill_trigger('skills/pdf-tools', 'write a limerick about cats',"
        " threshold=0.9)\n"
        "    assert not result.triggered and result.triggers == 0\n"
    )
    skill = root / "skills" / "pdf-tools"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: pdf-tools\ndescription: {DESCRIPTION}\n---\n\n# PDF tools\n"
    )
    data = [{"query": q, "should_trigger": s} for q, s in ENTRIES]
    (skill / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return root


def test_selection_follows_pytest(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    everything = pytester.runpytest_subprocess()
    everything.assert_outcomes(passed=1 + 2 + len(ENTRIES))
    only_skills = pytester.runpytest_subprocess("skills")
    only_skills.assert_outcomes(passed=len(ENTRIES))
    one_file = pytester.runpytest_subprocess("tests/test_app.py")
    one_file.assert_outcomes(passed=1)
    not_triggers = pytester.runpytest_subprocess("-m", "not skill_trigger")
    not_triggers.assert_outcomes(passed=3)
    by_keyword = pytester.runpytest_subprocess("-k", "rotate")
    by_keyword.assert_outcomes(passed=1, deselected=len(ENTRIES) - 1 + 3)
    under_xdist = pytester.runpytest_subprocess("-n", "2")
    under_xdist.assert_outcomes(passed=1 + 2 + len(ENTRIES))


def test_a_broken_eval_set_only_stops_runs_that_collect_it(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    broken = project / "skills" / "broken"
    (broken / "evals").mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: broken\ndescription: Anything.\n---\n")
    (broken / "evals" / "trigger-eval.json").write_text('[{"query": "no verdict field"}]')
    pytester.runpytest_subprocess("tests/test_app.py").assert_outcomes(passed=1)
    pytester.runpytest_subprocess("skills/pdf-tools").assert_outcomes(passed=len(ENTRIES))
    calls = fake_api.stats["calls"]
    for args in ((), ("skills",), ("skills/broken/SKILL.md",)):
        result = pytester.runpytest_subprocess(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*skills/broken/evals/trigger-eval.json*"])
        assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert fake_api.stats["calls"] == calls  # nothing ran in the refused sessions


def test_min_accuracy_turns_misses_into_xfail_and_gates_the_session(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script("rotate the pages of the PDF documents", ["text"])  # one miss of four
    gated = pytester.runpytest_subprocess("skills", "--trigger-min-accuracy", "0.7")
    gated.assert_outcomes(passed=3, xfailed=1)
    assert gated.ret == 0
    failing = pytester.runpytest_subprocess("skills", "--trigger-min-accuracy", "0.9", "-n", "2")
    failing.assert_outcomes(passed=3, xfailed=1)
    assert failing.ret == 1
    failing.stdout.fnmatch_lines(
        [
            "*GATE FAILED pdf-tools: queries passed 0.75 (3/4, 95% interval 0.30–0.95) is below "
            "--trigger-min-accuracy 0.9"
        ]
    )
    # the last line says so too, not a green "3 passed, 1 xfailed" on a session that exits 1
    assert "3 passed, 1 xfailed, 1 gate failed in" in failing.outlines[-1]
    plain = pytester.runpytest_subprocess("skills")
    plain.assert_outcomes(passed=3, failed=1)


def test_require_backend_stops_the_session_with_one_line_instead_of_skipping(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(project / "home"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    skipped = pytester.runpytest_subprocess("skills")
    skipped.assert_outcomes(skipped=len(ENTRIES))
    skipped.stdout.fnmatch_lines(["*ANTHROPIC_API_KEY*claude*"])
    for more in ((), ("-n", "2")):
        required = pytester.runpytest_subprocess("skills", "--trigger-require-backend", *more)
        assert required.ret == pytest.ExitCode.USAGE_ERROR
        errors = [line for line in required.errlines if line.strip()]
        assert len(errors) == 1 and "Traceback" not in required.stdout.str()
        assert errors[0].startswith("ERROR: no backend can run the trigger tests: ")
        assert errors[0].endswith("(--trigger-require-backend is set)")


def test_baseline_regressions_junit_and_step_summary(
    pytester: pytest.Pytester,
    project: Path,
    fake_api: FakeMessagesAPI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    baseline = project / "baseline.json"
    pytester.runpytest_subprocess("skills", f"--trigger-json={baseline}")
    fake_api.script("split this PDF into separate pages", ["tool:Bash"])
    fake_api.script("write a limerick about cats", ["skill:pdf-tools"])
    summary = project / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest_subprocess(
        "skills",
        f"--trigger-baseline={baseline}",
        "--trigger-fail-on-regression",
        "--junitxml",
        "junit.xml",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*REGRESSED pdf-tools: 'split this PDF into separate pages' (pass -> fail)*",
            "*REGRESSED pdf-tools: 'write a limerick about cats' (pass -> fail)*",
            # two of four worse and none better: the sign test's p is 0.25, chance at 95%
            "pdf-tools: 2 queries worse, 0 better against the baseline (sign test p = 0.25): "
            "not a regression at 95%, within the noise of the runs",
        ]
    )
    assert "GATE FAILED" not in result.stdout.str()
    cases = ET.parse(project / "junit.xml").getroot().iter("testcase")
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in cases
    }
    split = next(v for k, v in props.items() if "split" in k)
    assert split["triggers"] == "0" and split["trigger_rate"] == "0.0"
    assert "tool:Bash" in split["chosen"] and split["runs"] in ("2", "3")
    text = summary.read_text()
    assert "| pdf-tools | 2 | 2 | 0 |" in text
    assert "split this PDF into separate pages" in text

    fake_api.script("split this PDF into separate pages", ["skill:pdf-tools"])
    fake_api.script("write a limerick about cats", ["text"])
    clean = pytester.runpytest_subprocess(
        "skills", f"--trigger-baseline={baseline}", "--trigger-fail-on-regression"
    )
    assert clean.ret == 0

    # against the failing run's report, the same clean run lists what improved
    worse = project / "worse.json"
    fake_api.script("split this PDF into separate pages", ["tool:Bash"])
    pytester.runpytest_subprocess("skills", f"--trigger-json={worse}")
    fake_api.script("split this PDF into separate pages", ["skill:pdf-tools"])
    better = pytester.runpytest_subprocess("skills", f"--trigger-baseline={worse}")
    better.stdout.fnmatch_lines(
        ["*improved pdf-tools: 'split this PDF into separate pages' (fail -> pass)*"]
    )
    assert "REGRESSED" not in better.stdout.str()
