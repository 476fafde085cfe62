"""What a session shows and when it stops, found in review: a skill's warnings reach pytest's
warnings summary, and an unknown model stops the session at its first answer."""

from __future__ import annotations

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill, plugin_args


def test_skill_warnings_show_in_the_warnings_summary(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    (folder / "SKILL.md").write_text(
        "---\nname: Other_Name\ndescription: Merge and split PDF documents.\n---\n"
    )
    result = pytester.runpytest_subprocess(f"--trigger-skill-path={folder}", "-q")
    result.stdout.fnmatch_lines(["*PytestConfigWarning*", "*Other_Name*"])


def test_an_unknown_model_stops_the_session(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A 404 for the model is fatal: the first answer stops the session instead of erroring
    every item after its own calls."""
    fake_api.known_models = {"claude-opus-5-5"}
    folder = make_skill(
        pytester.path,
        [(f"merge these PDF documents, part {i}", True) for i in range(12)],
    )
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, "--trigger-model=claude-nonexistent-1", "--trigger-concurrency=1")
    )
    result.stdout.fnmatch_lines(["*stopping: 404 not_found_error*claude-nonexistent-1*"])
    assert fake_api.stats["calls"] == 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", outcomes.get("error")) == 1 and "passed" not in outcomes


def test_an_unknown_model_close_to_a_known_one_gets_a_suggestion(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A typo (a dot for a dash): the header says so before any call, and the stop too."""
    fake_api.known_models = {"claude-opus-4-5"}
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, "--trigger-model=claude-opus-4.5", "--trigger-concurrency=1")
    )
    result.stdout.fnmatch_lines(
        [
            "*cost unknown (claude-opus-4.5 is not in the price table; "
            "did you mean claude-opus-4-5?)*",
            "*stopping: 404 not_found_error*claude-opus-4.5*; did you mean claude-opus-4-5?*",
        ]
    )
