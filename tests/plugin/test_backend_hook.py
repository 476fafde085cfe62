"""A third backend needs no edit of the package: a conftest registers it through the plugin's
own hook (``pytest_skilltrigger_make_backend``, first answer wins, as xdist's scheduler hook)
and the items run on it, under xdist too. The built-in backends are made through the same
hook; a name nobody makes is a one-line error before any call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import make_skill

TOY_CONFTEST = '''
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.support.errors import AskError

RUNS = []


class ToyBackend:
    """Chooses the skill when the query says "merge"; counts its runs in a file."""

    name = "toy"
    model = "toy-1"

    def __init__(self, log):
        self.log = log

    def context_key(self, context):
        return context.key(backend=self.name)

    def estimate(self, context, query):
        return Usage(10, 1)

    def run(self, context, query):
        with open(self.log, "a") as f:
            f.write(query + "\\n")
        chosen = f"skill:{context.skill_name}" if "merge" in query else "text"
        return RunOutcome.of_choice(chosen, context, usage=Usage(10, 1), model=self.model)

    def ask(self, prompt, model=None):
        raise AskError("the toy backend answers no question")

    def close(self):
        pass


def pytest_skilltrigger_make_backend(name, settings, parts):
    if name == "toy":
        import os
        return ToyBackend(os.path.join(os.path.dirname(__file__), "toy-runs.log"))
'''


@pytest.fixture(autouse=True)
def _not_inside_an_outer_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def toy_project(root: Path) -> Path:
    (root / "conftest.py").write_text(TOY_CONFTEST)
    return make_skill(
        root,
        [("merge these two PDF files", True), ("what is a PDF", False), ("split a.pdf", True)],
    )


@pytest.mark.parametrize("more", [(), ("-n", "2")], ids=["plain", "xdist"])
def test_a_conftest_adds_a_backend_and_the_items_run_on_it(
    pytester: pytest.Pytester, more: tuple[str, ...]
) -> None:
    folder = toy_project(pytester.path)
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}",
        "-p",
        "no:cacheprovider",
        "--trigger-backend=toy",
        "--trigger-cache=off",
        "--trigger-confidence=off",
        *more,
    )
    result.assert_outcomes(passed=2, failed=1)  # "split a.pdf" is not merged: a miss
    result.stdout.fnmatch_lines(["*backend toy*"])
    runs = (pytester.path / "toy-runs.log").read_text().splitlines()
    assert sorted(set(runs)) == ["merge these two PDF files", "split a.pdf", "what is a PDF"]


def test_a_backend_nobody_makes_is_one_line_before_any_call(pytester: pytest.Pytester) -> None:
    folder = toy_project(pytester.path)
    result = pytester.runpytest_subprocess(
        f"--trigger-skill-path={folder}", "-p", "no:cacheprovider", "--trigger-backend=tyo"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --trigger-backend: no backend named 'tyo': built in are anthropic, "
            "claude-code; a plugin or a conftest adds one with the "
            "pytest_skilltrigger_make_backend hook"
        ]
    )
    assert len([line for line in result.errlines if line.strip()]) == 1
    assert not (pytester.path / "toy-runs.log").exists()
