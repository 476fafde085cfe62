"""A rerun of unchanged skills makes no call and changes no verdict.

The example skills' sets share five queries, one expected to trigger one skill and not
another: both skills' samplings read the runs of one request, each adds runs of its own, and
their processes finish in any order. On the graded stand-in (rates spread over (0, 1), a fresh
draw per request) a verdict that read other runs on a rerun would show it at once. Five runs
on one store: after the first, not one request reaches the server, and every item's counts,
interval and outcome are the first run's. The same holds under ``-n 2`` and with message
batches.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.graded_model import GradedModel

EXAMPLES = Path(__file__).resolve().parents[2] / "example_skills"
RUNS = 5


@pytest.fixture(autouse=True)
def _not_inside_an_outer_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner runs are plain or controllers even when this suite runs under -n."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


def outcomes(report: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What a user reads of each item: its counts, interval and outcome."""
    rows = [
        (
            s["skill_name"],
            s["model"],
            r["query"],
            r["triggers"],
            r["runs"],
            r["interval"],
            r["pass"],
            r["decided"],
            r["borderline"],
            r["chosen"],
        )
        for s in report["skills"]
        for r in s["results"]
    ]
    for table in report["routing"]:
        rows += [(table["folder"], json.dumps(table["rows"], sort_keys=True))]
    return rows


def calls(api: FakeMessagesAPI) -> int:
    """Every request the server took: live ones and each request of a batch."""
    return len(api.requests) + sum(api.batch_sizes)


@pytest.mark.parametrize(
    "more",
    [
        pytest.param((), id="plain"),
        pytest.param(("-n", "2"), id="xdist"),
        pytest.param(("--trigger-batch", "--trigger-batch-poll=0.05"), id="batch"),
    ],
)
def test_five_runs_on_one_store_pay_once_and_never_flip(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, more: tuple[str, ...]
) -> None:
    fake_api.graded = GradedModel(seed=3)
    skills = pytester.path / "skills"
    shutil.copytree(EXAMPLES, skills)
    store = pytester.path / "store.sqlite"
    seen: list[list[tuple[Any, ...]]] = []
    paid: list[int] = []
    for run in range(RUNS):
        before = calls(fake_api)
        out = pytester.path / f"run{run}.json"
        result = pytester.runpytest_subprocess(
            "-p",
            "no:cacheprovider",
            f"--trigger-skill-path={skills}",
            f"--trigger-store={store}",
            f"--trigger-json={out}",
            *more,
        )
        paid.append(calls(fake_api) - before)
        if run:  # the header knows before any call that none is needed
            result.stdout.fnmatch_lines(["*estimate for 69 queries: no call, stored runs decide*"])
        seen.append(outcomes(json.loads(out.read_text())))
    assert paid[0] > 100
    assert paid[1:] == [0] * (RUNS - 1)
    for later in seen[1:]:
        assert later == seen[0]
