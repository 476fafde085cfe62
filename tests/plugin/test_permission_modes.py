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


def test_a_single_mode_is_said_in_the_header_the_summary_the_json_and_the_baseline(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """``--trigger-permission-mode=plan`` alone: the header, the summary and the JSON say plan,
    and a default-mode baseline compared with it says the two modes differ."""
    folder = make_skill(
        pytester.path, [("merge these pdf documents into one", True), ("bake some bread", False)]
    )
    before, after = pytester.path / "before.json", pytester.path / "after.json"
    first = pytester.runpytest_subprocess(*plugin_args(folder, f"--trigger-json={before}"))
    first.assert_outcomes(passed=2)
    assert json.loads(before.read_text())["permission_mode"] == "default"
    result = pytester.runpytest_subprocess(
        *plugin_args(
            folder,
            "--trigger-permission-mode=plan",
            f"--trigger-json={after}",
            f"--trigger-baseline={before}",
        )
    )
    result.stdout.fnmatch_lines(
        [
            "skilltrigger: 1 skill(s), *, permission mode plan",
            "every query was asked in plan mode",
            "*baseline*; the baseline asked in default mode, this run in plan mode*",
        ]
    )
    report = json.loads(after.read_text())
    assert report["permission_mode"] == "plan"
    assert [s["permission_mode"] for s in report["skills"]] == ["plan"]


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
