"""The errors that carry bad input to the user: an InputError is one line naming the file
and the problem; an AskError keeps how many requests were sent all the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_skilltrigger.support.errors import AskError, InputError


def test_an_input_error_names_the_file_then_the_problem() -> None:
    error = InputError("skills/pdf/evals/trigger-eval.json", "entry 3: missing should_trigger")
    assert str(error) == "skills/pdf/evals/trigger-eval.json: entry 3: missing should_trigger"
    assert error.where == "skills/pdf/evals/trigger-eval.json"
    assert error.problem == "entry 3: missing should_trigger"


def test_an_input_error_takes_a_path_object() -> None:
    error = InputError(Path("skills") / "SKILL.md", "no description")
    assert error.where == "skills/SKILL.md" and isinstance(error.where, str)
    assert str(error) == "skills/SKILL.md: no description"


def test_an_input_error_is_always_one_line() -> None:
    error = InputError("SKILL.md", "bad YAML:\n  mapping values are not allowed\there\r\n")
    assert str(error) == "SKILL.md: bad YAML: mapping values are not allowed here"
    assert "\n" not in str(error) and "\r" not in str(error)


@pytest.mark.parametrize("where", [None, ""])
def test_an_input_error_without_a_file_is_the_problem_alone(where: str | None) -> None:
    error = InputError(where, "--trigger-runs: must be at least 1, got 0")
    assert str(error) == "--trigger-runs: must be at least 1, got 0"


def test_an_ask_error_counts_the_requests_sent() -> None:
    assert AskError("529 overloaded").requests == 0
    error = AskError("timed out after 3 retries", requests=4)
    assert (str(error), error.requests) == ("timed out after 3 retries", 4)
    assert isinstance(error, Exception) and not isinstance(error, InputError)
