"""A matrix of permission modes (``--trigger-permission-mode=default,plan``): every query is
asked in each mode, the modes after the first as items of their own, each run's request in
its mode, the results kept apart in the summary and the JSON."""

from __future__ import annotations

import json

import pytest

from pytest_skilltrigger.backends.api.request import MODE_TEXTS
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill, plugin_args


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_each_mode_of_a_matrix_has_its_items_and_its_requests(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, workers: list[str]
) -> None:
    folder = make_skill(
        pytester.path, [("merge these pdf documents into one", True), ("bake some bread", False)]
    )
    out = pytester.path / "out.json"
    args = plugin_args(
        folder, "-v", "--trigger-permission-mode=default,plan", f"--trigger-json={out}", *workers
    )
    result = pytester.runpytest_subprocess(*args)
    names = ["00-merge-these-pdf-documents-into-one", "01-bake-some-bread"]
    for name in [*names, *(f"{n}-plan" for n in names)]:
        assert f"pdf-tools[{name}]" in result.stdout.str()
    result.assert_outcomes(passed=4)
    planned = [b for b in fake_api.requests if MODE_TEXTS["plan"] in json.dumps(b)]
    assert 0 < len(planned) < len(fake_api.requests)  # the plan items' runs, and only theirs
    report = json.loads(out.read_text())
    assert sorted(s.get("permission_mode") or "" for s in report["skills"]) == ["", "plan"]


def test_an_unknown_mode_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these pdfs", True)])
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, "--trigger-permission-mode=default,yolo")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--trigger-permission-mode*default, plan*'default,yolo'*"])
    assert fake_api.stats["calls"] == 0
