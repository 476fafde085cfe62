"""The default result store found in review: it lives in the user's cache folder, whatever
rootdir is and whether pytest's cache plugin is on."""

from __future__ import annotations

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill


def test_default_store_lives_in_the_user_cache_whatever_rootdir_and_cache_plugin(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_cache = pytester.path / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    first = pytester.runpytest_subprocess(f"--trigger-skill-path={folder}")
    first.assert_outcomes(passed=1)
    calls = fake_api.stats["calls"]
    assert calls >= 1
    store = user_cache / "pytest-skilltrigger" / "results.sqlite"
    assert store.is_file()
    assert not list((pytester.path / ".pytest_cache").rglob("*.sqlite"))
    first.stdout.fnmatch_lines([f"skilltrigger: *store {store}*"])
    # without pytest's cache plugin the store is the same one
    second = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "-p", "no:cacheprovider"
    )
    second.assert_outcomes(passed=1)
    assert fake_api.stats["calls"] == calls  # served from the default store
