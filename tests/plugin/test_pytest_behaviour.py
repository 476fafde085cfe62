"""The plugin behaves as a pytest user expects wherever they go (issue #14): options written
either way, pytest's own last-failed and step-wise selection, outputs checked before any call,
paths relative to the project, the fixture's runs stored under xdist, the user's umask."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import PYTEST
from tests.plugin.test_items import (  # noqa: F401 - the fixture warms the SDK up
    Q_MISS,
    Q_NO,
    Q_WRONG,
    Q_YES,
    SKILL,
    _sdk_warmed_up,
    entry,
    make_skill,
    standard_skill,
)


@pytest.fixture
def project(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> Path:
    """A project whose pyproject lists skills/ in ``skill_paths`` (four items, two fail)."""
    standard_skill(pytester, fake_api)
    (pytester.path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nskill_paths = ["skills"]\n', encoding="utf-8"
    )
    return pytester.path


def test_a_path_option_written_with_a_space_never_drops_the_config(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "r.json"
    first = pytester.runpytest_subprocess(f"--trigger-json={out}", "--trigger-min-accuracy=0.99")
    first.assert_outcomes(passed=2, xfailed=2)
    assert first.ret == 1 and out.exists()
    calls = fake_api.stats["calls"]
    # the file now exists: pytest would take it for a test path and lose pyproject.toml
    second = pytester.runpytest_subprocess(
        "--trigger-json", str(out), "--trigger-min-accuracy=0.99"
    )
    assert second.ret == pytest.ExitCode.USAGE_ERROR
    second.stderr.fnmatch_lines(
        [
            f"*--trigger-json {out}: pytest took this value for a test path*"
            f"write --trigger-json={out}"
        ]
    )
    assert "Traceback" not in second.stderr.str()
    assert fake_api.stats["calls"] == calls
    # a value that does not move rootdir or the config file is fine either way
    inside = pytester.runpytest_subprocess("--trigger-json", "inside.json")
    inside.assert_outcomes(passed=2, failed=2)


def test_last_failed_failed_first_stepwise_and_deselect(
    pytester: pytest.Pytester, project: Path
) -> None:
    pytester.runpytest_subprocess().assert_outcomes(passed=2, failed=2)
    last_failed = pytester.runpytest_subprocess("--lf")
    last_failed.assert_outcomes(failed=2)
    last_failed.stdout.fnmatch_lines(["*rerun previous 2 failures*"])
    failed_first = pytester.runpytest_subprocess("--ff", "-v")
    names = [line.split("::")[1].split(" ")[0] for line in failed_first.outlines if "::" in line]
    assert [n.split("[")[1][:2] for n in names[:2]] == ["02", "03"]
    stepwise = pytester.runpytest_subprocess("--sw")
    stepwise.assert_outcomes(passed=2, failed=1)
    again = pytester.runpytest_subprocess("--sw")
    again.assert_outcomes(failed=1, deselected=2)
    item = f"skills/{SKILL}/SKILL.md::{SKILL}[03-what-is-a-csv-file-anyway]"
    deselected = pytester.runpytest_subprocess("--deselect", item)
    deselected.assert_outcomes(passed=2, failed=1, deselected=1)


@pytest.mark.parametrize(
    "option",
    [
        "--trigger-json={blocker}/r.json",
        "--trigger-report={blocker}/r.html",
        "--trigger-results-dir={blocker}/results",
        "--trigger-store={blocker}/s.sqlite",
    ],
)
def test_an_output_under_a_file_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI, option: str
) -> None:
    blocker = pytester.path / "blocker"
    blocker.write_text("a file, not a folder")

    def files() -> list[Path]:  # (pytester's own files for each run left out)
        return sorted(
            p
            for p in pytester.path.rglob("*")
            if "runpytest-" not in str(p) and p.name not in ("stdout", "stderr")
        )

    before = files()
    result = pytester.runpytest_subprocess(
        option.format(blocker=blocker), "--trigger-optimize", "--trigger-cache=use"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {blocker}/*: cannot be created: {blocker} is a file*"])
    assert "Traceback" not in result.stderr.str()
    assert fake_api.stats["calls"] == 0
    assert files() == before  # nothing created


def test_a_step_summary_in_a_missing_folder_is_written(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "gh" / "step" / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.runpytest_subprocess().assert_outcomes(passed=2, failed=2)
    assert "Skill trigger results" in summary.read_text()


def test_bad_input_writes_nothing(
    pytester: pytest.Pytester, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    (project / "skills" / SKILL / "evals" / "trigger-eval.json").write_text('[{"query": 1}]')
    result = pytester.runpytest_subprocess(f"--trigger-json={tmp_path / 'out' / 'r.json'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not cache.exists() and not (tmp_path / "out").exists()
    assert not list(project.rglob("*.sqlite"))


def read_only(folder: Path, command: list[str]) -> list[str]:
    """``command`` run with ``folder`` read-only: for root (who may write anywhere, so a mode
    would not stop it) a read-only bind mount in a mount namespace of its own; for anyone
    else the folder's mode."""
    if os.geteuid() != 0:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        return command
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare: cannot make a folder read-only")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, str(folder), *command]


def test_a_read_only_skill_folder_is_refused_before_the_rounds(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A skill the user may not write: --trigger-optimize stops at once with one line
    instead of failing after every round was paid for."""
    folder = standard_skill(pytester, fake_api)
    command = [
        *PYTEST,
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={folder}",
        "--trigger-cache=off",
        "--trigger-optimize",
        "--trigger-holdout=0.5",
    ]
    try:
        done = subprocess.run(
            read_only(folder, command),
            cwd=pytester.path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert f"{folder}/SKILL.md: is not writable (SKILL.md)" in done.stderr
    assert "Traceback" not in done.stderr
    assert fake_api.stats["calls"] == 0


def test_relative_paths_belong_to_the_project_wherever_pytest_starts(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    tests = project / "tests"
    tests.mkdir()
    (tests / "test_fixture.py").write_text(
        "def test_hit(skill_trigger):\n"
        f"    assert skill_trigger('skills/{SKILL}', {Q_YES!r}, runs=1).triggered\n"
    )
    os.chdir(tests)
    pytester.runpytest_subprocess("test_fixture.py").assert_outcomes(passed=1)
    os.chdir(project / "skills" / SKILL)
    inside = pytester.runpytest_subprocess("-v")
    inside.assert_outcomes(passed=2, failed=2)  # that skill, not the whole project
    os.chdir(project)


def test_fixture_runs_are_stored_by_the_controller_under_xdist(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    (project / "test_fixture.py").write_text(
        "def test_hit(skill_trigger):\n"
        f"    assert skill_trigger('skills/{SKILL}', {Q_YES!r}, runs=2).triggered\n"
    )
    store = pytester.path / "store.sqlite"
    args = (
        "-n",
        "2",
        f"--trigger-store={store}",
        "test_fixture.py",
        f"--trigger-json={store}.json",
    )
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    calls = fake_api.stats["calls"]
    assert calls >= 1
    report = json.loads(Path(f"{store}.json").read_text())
    assert report["totals"]["by_phase"]["checks"]["calls"] == calls
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert fake_api.stats["calls"] == calls  # the second run reused the stored runs


def test_fixture_runs_in_a_fixtures_setup_and_teardown_are_counted_under_xdist(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    """A check made while a fixture sets up or tears down crosses to the controller on that
    phase's report: its calls are counted (equal to the server's) and its runs stored."""
    (project / "test_fixture.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def checked(skill_trigger):\n"
        f"    assert skill_trigger('skills/{SKILL}', {Q_YES!r}, runs=1).triggered\n"
        "    yield\n"
        f"    assert not skill_trigger('skills/{SKILL}', {Q_NO!r}, runs=1).triggered\n\n"
        "def test_uses(checked):\n"
        "    pass\n"
    )
    store = pytester.path / "store.sqlite"
    args = (
        "-n",
        "2",
        f"--trigger-store={store}",
        "test_fixture.py",
        f"--trigger-json={store}.json",
    )
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    calls = fake_api.stats["calls"]
    assert calls == 2
    report = json.loads(Path(f"{store}.json").read_text())
    assert report["totals"]["by_phase"]["checks"]["calls"] == calls
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)
    assert fake_api.stats["calls"] == calls  # both checks' runs were stored


def test_files_are_written_with_the_users_umask(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.proposals = ["Clean and repair messy CSV files, and answer what a CSV file is."]
    old = os.umask(0o022)
    try:
        pytester.runpytest_subprocess(
            "--trigger-json=out.json",
            "--trigger-report=report.html",
            "--trigger-results-dir=results",
            "--trigger-optimize",
            "--trigger-max-iterations=1",
            "--trigger-holdout=0.5",
        )
    finally:
        os.umask(old)
    written = [
        pytester.path / "out.json",
        pytester.path / "report.html",
        *(p for p in (pytester.path / "results").rglob("*") if p.is_file()),
    ]
    assert len(written) > 3
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path


def test_warnings_point_at_the_skill_and_a_symlinked_folder_is_collected_once(
    pytester: pytest.Pytester, project: Path
) -> None:
    skill_md = project / "skills" / SKILL / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("---\n# ", "unknown-key: 1\n---\n# ", 1))
    (project / "more").symlink_to(project / "skills")
    result = pytester.runpytest_subprocess(f"--trigger-skill-path={project / 'more'}", "skills")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines([f"*{SKILL}/SKILL.md:1: PytestConfigWarning:*unknown-key*"])


def test_the_gate_prints_the_number_it_compares(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest_subprocess("--trigger-min-accuracy=0.645")
    result.stdout.fnmatch_lines(
        [
            "*queries passed 2/4 (0.50)*",
            "*GATE FAILED csv-tidy: queries passed 0.5 (2/4, 95% interval 0.15–0.85) is below "
            "--trigger-min-accuracy 0.645",
        ]
    )


def test_the_optimizers_lines_start_on_a_line_of_their_own_under_q(
    pytester: pytest.Pytester, project: Path, fake_api: FakeMessagesAPI
) -> None:
    fake_api.proposals = ["Clean and repair messy CSV files, and answer what a CSV file is."]
    result = pytester.runpytest_subprocess(
        "-q", "--trigger-optimize", "--trigger-max-iterations=1", "--trigger-holdout=0.5"
    )
    lines = result.stdout.lines
    first = next(i for i, line in enumerate(lines) if f"{SKILL} iteration 1/1" in line)
    assert lines[first].startswith(f"{SKILL} iteration 1/1"), lines[first]
