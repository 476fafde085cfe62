"""The options' former names: every flag and ini key of the one-prefix rename still works, is
hidden from ``pytest --help``, and says its new name in a deprecation warning; the new name
wins when both are given."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.model.options import OPTIONS
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill

QUERY = "merge these two PDFs"


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--trigger-cache=off", "--trigger-confidence=off", *args
    )


def test_a_former_flag_and_ini_key_still_work_with_a_warning_each(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """``--skill-path`` and ``--runs-per-query`` on the command line, ``trigger_models`` in
    the ini file: the run is the one their new names would give (4 runs of the one query),
    and each former name is said once, with its new name."""
    fake_api.script(QUERY, ["skill:pdf-tools"])
    make_skill(pytester.path, [(QUERY, True)])
    pytester.makeini("[pytest]\ntrigger_models = claude-opus-5-5\n")
    result = _run(pytester, "--skill-path=skills", "--runs-per-query=4", "--no-early-stop")
    result.assert_outcomes(passed=1)
    assert fake_api.stats["trigger_calls"] == 4
    for said in (
        "--skill-path is now --trigger-skill-path",
        "--runs-per-query is now --trigger-runs",
        "--no-early-stop is now --trigger-no-early-stop",
        "the ini key trigger_models is now trigger_model",
    ):
        assert result.stdout.str().count(said) == 1, said
    assert "PytestDeprecationWarning" in result.stdout.str()


def test_the_new_name_wins_over_the_former(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.script(QUERY, ["skill:pdf-tools"])
    make_skill(pytester.path, [(QUERY, True)])
    pytester.makeini("[pytest]\nruns_per_query = 5\ntrigger_runs = 2\n")
    result = _run(pytester, "--trigger-skill-path=skills", "--trigger-no-early-stop")
    result.assert_outcomes(passed=1)
    assert fake_api.stats["trigger_calls"] == 2


def test_every_renamed_option_is_declared_with_its_former_name_once() -> None:
    """The former names are the ones the docs and users' ini files have: each is kept, on one
    option, and none is a name an option has now."""
    former = [opt.was for opt in OPTIONS if opt.was]
    assert len(former) == len(set(former)) >= 17
    assert not set(former) & {opt.flag for opt in OPTIONS}
    assert all(not flag.startswith("--trigger-") for flag in former if flag != "--trigger-models")
