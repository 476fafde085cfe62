"""Controls before the spend, against the stand-in: a session that cannot see a trigger stops
before any item's call, with what the control saw; a rerun pays nothing for them; off says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.engine.controls import CONTROL, NEGATIVE, POSITIVE
from tests.fake_messages_api import FakeMessagesAPI, extract_query
from tests.helpers import make_skill, plugin_args

ENTRIES = [("merge these two pdf files into one", True), ("bake a loaf of bread", False)]


def queries_sent(api: FakeMessagesAPI) -> list[str]:
    return [extract_query(body) for body in api.requests]


def run(pytester: pytest.Pytester, *more: str) -> pytest.RunResult:
    folder = pytester.path / "skills" / "pdf-tools"
    if not folder.exists():
        folder = make_skill(pytester.path, ENTRIES)
    return pytester.runpytest_subprocess(*plugin_args(folder, "--trigger-controls=on", *more))


def test_a_stand_in_that_never_calls_tools_stops_the_session_before_the_items(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(POSITIVE, ["text"] * 10)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*the positive control did not trigger*the model chose a plain answer*Likely: *"]
    )
    assert set(queries_sent(fake_api)) <= {POSITIVE, NEGATIVE}  # no item's query was sent
    assert POSITIVE in queries_sent(fake_api)


def test_a_stand_in_that_always_calls_the_skill_tool_stops_it_on_the_negative(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(NEGATIVE, [f"skill:{CONTROL.name}"] * 10)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the negative control triggered*"])
    assert set(queries_sent(fake_api)) <= {POSITIVE, NEGATIVE}


def test_controls_pass_are_reported_and_a_rerun_makes_no_control_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    store, out = tmp_path / "runs.sqlite", tmp_path / "out.json"
    first = run(pytester, f"--trigger-store={store}", f"--trigger-json={out}")
    first.stdout.fnmatch_lines(
        ["skilltrigger: controls: the positive triggered */* (* calls, ~$*)"]
    )
    report = json.loads(out.read_text())
    (control,) = report["controls"]
    assert control["positive"]["pass"] is True and control["negative"]["pass"] is True
    assert report["totals"]["by_phase"]["controls"]["calls"] > 0
    before = fake_api.stats["calls"]
    again = run(pytester, f"--trigger-store={store}")
    # the items' stored runs decide every one: nothing will be asked, so no control either
    again.stdout.fnmatch_lines(["skilltrigger: controls not run: no item will call*"])
    assert fake_api.stats["calls"] == before


def test_a_failed_control_is_asked_again_once_the_harness_is_fixed(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """A harness that cannot see triggers stops the session; fixed, the next session on the
    same store asks the controls again (the broken one's runs were not kept) and runs."""
    store = tmp_path / "runs.sqlite"
    fake_api.script(POSITIVE, ["text"] * 10)  # a proxy that strips the tools, say
    broken = run(pytester, f"--trigger-store={store}")
    assert broken.ret == pytest.ExitCode.USAGE_ERROR
    broken.stderr.fnmatch_lines(
        ["*did not trigger*Its runs are not kept: the next session asks the controls again*"]
    )
    asked = queries_sent(fake_api).count(POSITIVE)
    fake_api.script(POSITIVE, [f"skill:{CONTROL.name}"] * 10)  # the proxy fixed
    fixed = run(pytester, f"--trigger-store={store}")
    outcomes = fixed.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2  # the items ran
    fixed.stdout.fnmatch_lines(["skilltrigger: controls: the positive triggered */*"])
    assert queries_sent(fake_api).count(POSITIVE) > asked  # asked live, not replayed


def test_a_session_with_nothing_to_ask_makes_no_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Every item decides without a call (a skill Claude Code does not list): the controls
    are not paid for either."""
    folder = make_skill(pytester.path, ENTRIES)
    text = (
        (folder / "SKILL.md")
        .read_text()
        .replace("---\n", "---\ndisable-model-invocation: true\n", 1)
    )
    (folder / "SKILL.md").write_text(text)
    result = run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["skilltrigger: controls not run: no item will call*"])
    assert fake_api.stats["calls"] == 0


def test_off_runs_no_control_and_says_so(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, ENTRIES)
    result = pytester.runpytest_subprocess(*plugin_args(folder, "--trigger-controls=off"))
    result.stdout.fnmatch_lines(["skilltrigger: controls off (--trigger-controls)*"])
    assert POSITIVE not in queries_sent(fake_api)


def test_a_session_whose_every_run_errors_stops_with_one_message(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """Every request answered 500 (the SDK's retries too): the controls' runs error, and the
    session stops there with the cause instead of failing every item."""
    fake_api.fail_first_tries = {"500": 1000}
    fake_api.retry_after_ms = 1
    result = run(pytester, "--trigger-timeout=5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the control query * did not run: *500*"])
    assert set(queries_sent(fake_api)) <= {POSITIVE, NEGATIVE}


def test_under_xdist_the_controls_spend_comes_off_the_workers_budget(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The controls run in the controller before the workers start; the session's budget
    is one, so what they cost is not the workers' to spend again."""
    out = tmp_path / "out.json"
    make_skill(pytester.path, [(f"merge these {n} pdf files into one", True) for n in range(8)])
    run(pytester, f"--trigger-json={out}")
    totals = json.loads(out.read_text())["totals"]["by_phase"]
    controls = totals["controls"]["cost_usd"]
    assert totals["items"]["cost_usd"] > controls  # the items alone would pass the budget
    budget = controls * 4  # room for the controls, and for most items but not all
    run(pytester, "-n", "2", f"--trigger-budget-usd={budget:.8f}", f"--trigger-json={out}")
    report = json.loads(out.read_text())
    assert report["totals"]["by_phase"]["controls"]["calls"] > 0
    assert report["totals"]["cost_usd"] <= budget * 1.01  # one budget, the controls in it


def test_a_failed_control_under_xdist_leaves_nothing_behind(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest skips the session's finish after an error at its start: the folders made for
    the workers (the rate limits they share) are removed all the same."""
    fake_api.script(POSITIVE, ["text"] * 10)
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    result = run(pytester, "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not [p.name for p in temp.iterdir() if p.name.startswith("skilltrigger-")]
