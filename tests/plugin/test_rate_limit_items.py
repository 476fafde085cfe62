"""Rate limits from the command line: one limit for the whole session under ``-n 4``, what
the terminal says of it, and what the JSON counts per phase. The fake API enforces the
limits with the real headers; every bound is its count."""

from __future__ import annotations

import json

import pytest

from tests.fake_messages_api import FakeMessagesAPI, RateLimits
from tests.helpers import make_skill, plugin_args


def run_skill(pytester: pytest.Pytester, queries: int, *more: str) -> pytest.RunResult:
    entries = [(f"merge PDF documents batch {i}", True) for i in range(queries)]
    folder = make_skill(pytester.path, entries)
    args = plugin_args(folder, "--trigger-runs", "1", "--trigger-json=out.json", *more)
    return pytester.runpytest_subprocess(*args, timeout=300)


@pytest.mark.parametrize("workers", [[], ["-n", "4"]], ids=["plain", "xdist"])
def test_the_session_keeps_one_limit_and_no_item_errors(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, workers: list[str]
) -> None:
    """20 requests a "minute" of two seconds, 60 queries: every item passes, the server
    refuses few requests (the first wave knows no limit yet), and under ``-n 4`` the four
    workers keep the one limit between them."""
    fake_api.rate_limits = RateLimits(rpm=20, minute=2.0)
    result = run_skill(pytester, 60, *workers)
    result.assert_outcomes(passed=60)
    calls = fake_api.stats["calls"]
    assert fake_api.stats["rate_limited"] <= 0.05 * calls + 12
    report = json.loads((pytester.path / "out.json").read_text())
    items = report["totals"]["by_phase"]["items"]
    assert items["rate_limited"] == fake_api.stats["rate_limited"]
    assert items["waited_seconds"] > 0
    result.stdout.fnmatch_lines(["*rate limits: runs waited * in all for the limit; *"])


def test_the_limit_and_the_time_at_it_are_said_once_known(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    fake_api.rate_limits = RateLimits(rpm=50, itpm=400_000, minute=2.0)
    result = run_skill(pytester, 4)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*skilltrigger: rate limit (opus): 50 requests, 400,000 input tokens a minute; "
            "at it this session's calls take *"
        ]
    )


def test_off_paces_nothing(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    result = run_skill(pytester, 4, "--trigger-rate-limit=off")
    result.assert_outcomes(passed=4)
    report = json.loads((pytester.path / "out.json").read_text())
    assert report["totals"]["by_phase"]["items"]["waited_seconds"] == 0
    assert "rate limit (" not in result.stdout.str()


def test_a_bad_rate_limit_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    folder = make_skill(pytester.path, [("merge these", True)])
    result = pytester.runpytest_subprocess(*plugin_args(folder, "--trigger-rate-limit=fast"))
    result.stderr.fnmatch_lines(
        ["*--trigger-rate-limit: must be off or RPM[[],ITPM[[],OTPM[]][]] in whole numbers*"]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
