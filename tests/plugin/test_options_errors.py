"""Bad options found in review: each is a one-line usage error (never an INTERNALERROR or a
traceback), with or without a skill in play, and nothing is written."""

from __future__ import annotations

import pytest

from tests.helpers import make_skill


@pytest.mark.parametrize(
    "args,message",
    [
        (["--trigger-prices=missing.json"], "*missing.json: cannot read price table*"),
        (["--trigger-store=/proc/no/store.sqlite"], "*cannot use as the result store*"),
        (["--trigger-timeout", "nan"], "*--trigger-timeout: must be positive*"),
        (["--trigger-budget-usd", "nan"], "*--trigger-budget-usd: must be a number >= 0*"),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "--trigger-json=out.json", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "out.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--trigger-runs=0"], "*--trigger-runs: must be at least 1, got 0*"),
        (["--trigger-backend=two words"], "*--trigger-backend: must be a backend's name*"),
        (["--trigger-cache=bogus"], "*--trigger-cache: must be one of use, refresh, off*"),
    ],
)
def test_a_bad_option_is_a_usage_error_also_without_skills(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    """The engine's settings are built lazily in a project without skills, but a given option
    is still checked at configure (a bad choice included, which argparse no longer checks)."""
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
