"""Faults, interruption and secrets: the plugin must never report a wrong verdict because
something failed, never corrupt a file, and never leak a key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import PYTEST, interruptible, plugin_args

SECRET = "sk-ant-api03-SECRETsecretSECRET-0123456789abcdef"

ENTRIES = [
    ("convert the quarterly invoice spreadsheet totals into euros", True),
    ("reconcile invoice totals against the quarterly ledger spreadsheet", True),
    ("email the quarterly invoice summary to finance", True),
    ("write a haiku about autumn leaves", False),
    ("explain how photosynthesis works in plants", False),
    ("what time zone is tokyo in", False),
]
DESCRIPTION = (
    "Work with quarterly invoice spreadsheets: totals, currency conversion, ledger "
    "reconciliation and invoice summary emails for finance."
)


def make_skill(root: Path, name: str = "invoice-sheets", description: str = DESCRIPTION) -> Path:
    folder = root / "skills" / name
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# Body\n", encoding="utf-8"
    )
    data = [{"query": q, "should_trigger": s} for q, s in ENTRIES]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def verdicts(report: dict) -> list[tuple[str, bool | None, int, int]]:
    rows = report["skills"][0]["results"]
    return [(r["query"], r["pass"], r["triggers"], r["runs"]) for r in rows]


def test_faults_give_exactly_the_fault_free_verdicts(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    common = plugin_args(folder, "--trigger-no-early-stop", "--trigger-cache", "off")
    clean = pytester.path / "clean.json"
    pytester.runpytest_subprocess(*common, f"--trigger-json={clean}")
    fake_api.retry_after_ms = 1
    fake_api.faults = {"429": 0.08, "529": 0.06, "500": 0.06, "stream_error": 0.05, "drop": 0.05}
    faulty = pytester.path / "faulty.json"
    result = pytester.runpytest_subprocess(*common, f"--trigger-json={faulty}")
    assert sum(fake_api.stats["faults_injected"].values()) > 0
    assert verdicts(json.loads(faulty.read_text())) == verdicts(json.loads(clean.read_text()))
    result.assert_outcomes(passed=len(ENTRIES))


def test_an_outage_is_an_error_not_a_pass(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path)
    fake_api.retry_after_ms = 1
    fake_api.faults = {"drop": 1.0}
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, f"--trigger-json={out}", "--trigger-runs", "1")
    )
    result.assert_outcomes(errors=len(ENTRIES))
    summary = json.loads(out.read_text())["skills"][0]["summary"]
    assert summary["passed"] == 0 and summary["errors"] == len(ENTRIES)


def test_no_secret_in_any_output_or_file(pytester: pytest.Pytester) -> None:
    folder = make_skill(pytester.path)
    with FakeMessagesAPI(api_key=SECRET) as api:
        api.proposals = ["Quarterly invoice spreadsheets and ledger reconciliation helper."]
        api.faults = {"500": 0.2}
        api.retry_after_ms = 1
        env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": SECRET}
        outputs = []
        for key, cache in ((SECRET, "use"), (SECRET + "-wrong", "refresh")):
            env["ANTHROPIC_API_KEY"] = key
            done = subprocess.run(
                [
                    *PYTEST,
                    f"--trigger-skill-path={folder}",
                    "--trigger-optimize",
                    "--trigger-max-iterations",
                    "2",
                    "--trigger-json=out.json",
                    "--trigger-report=report.html",
                    "--trigger-results-dir=results",
                    "--junitxml",
                    "junit.xml",
                    "--trigger-store=store.sqlite",
                    "--trigger-cache",
                    cache,
                    "--html",
                    "page.html",
                ],
                cwd=pytester.path,
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=300,
            )
            outputs.append(done.stdout + done.stderr)
    assert "401" in outputs[1] or "authentication" in outputs[1].lower()
    for text in outputs:
        assert SECRET not in text
    written = [p for p in pytester.path.rglob("*") if p.is_file()]
    assert any(p.name == "store.sqlite" for p in written)
    for path in written:
        assert SECRET.encode() not in path.read_bytes(), path


def test_sigint_during_rounds_keeps_skill_md_and_reports(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, description="Spreadsheet helper.")  # fails train: rounds go on
    original = (folder / "SKILL.md").read_bytes()
    with FakeMessagesAPI(latency=0.4) as api:
        api.proposals = [f"Proposal {i} about gardening tools and seeds." for i in range(9)]
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key"}
        results = tmp_path / "results"
        proc = subprocess.Popen(
            [
                *PYTEST,
                f"--trigger-skill-path={folder}",
                "-p",
                "no:cacheprovider",
                "--trigger-optimize",
                "--trigger-max-iterations",
                "9",
                "--trigger-holdout",
                "0.34",
                f"--trigger-json={tmp_path / 'out.json'}",
                f"--trigger-results-dir={results}",
                "--trigger-concurrency",
                "2",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=interruptible,
            text=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            found = list(results.glob("*/*/iteration-2/description.txt"))
            if found:
                break
            time.sleep(0.1)
        else:
            proc.kill()
            pytest.fail("the rounds never reached iteration 2")
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
        stopped_in = time.monotonic() - sent
    assert stopped_in < 10, output
    assert (folder / "SKILL.md").read_bytes() == original
    assert not [p for p in tmp_path.rglob("*.tmp")]
    (stamp,) = list(results.iterdir())
    snapshot = json.loads((stamp / "results.json").read_text())["skills"][0]
    assert snapshot["history"] and snapshot["history"][0]["iteration"] == 1
    report = json.loads((tmp_path / "out.json").read_text())["skills"][0]
    assert report["interrupted"] is True and "interrupted" in report["exit_reason"]
    assert proc.returncode == 2, output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_in_a_later_skills_rounds_leaves_every_skill_md_as_it_was(
    tmp_path: Path, signum: int
) -> None:
    """The rule: descriptions are written only after all rounds end. Skill a's rounds find a
    winner; b's are interrupted (Ctrl-C, or a CI cancellation's SIGTERM): a's SKILL.md is
    not rewritten either, and the output says so."""
    first = make_skill(tmp_path, name="a-invoices", description="Spreadsheet helper.")
    second = make_skill(tmp_path, name="b-invoices", description="Spreadsheet helper.")
    originals = {p: (p / "SKILL.md").read_bytes() for p in (first, second)}
    with FakeMessagesAPI(latency=0.1) as api:
        api.proposals = [DESCRIPTION] + [f"Proposal {i} about seeds and tools." for i in range(9)]
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "test-key"}
        results = tmp_path / "results"
        proc = subprocess.Popen(
            [
                *PYTEST,
                f"--trigger-skill-path={tmp_path / 'skills'}",
                "-p",
                "no:cacheprovider",
                "--trigger-cache=off",
                "--trigger-optimize",
                "--trigger-max-iterations=9",
                "--trigger-holdout=0.34",
                f"--trigger-results-dir={results}",
                "--trigger-concurrency=2",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=interruptible,
        )
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            if list(results.glob("*/b-invoices/iteration-2/description.txt")):
                break
            time.sleep(0.1)
        else:
            proc.kill()
            pytest.fail(f"b's rounds never reached iteration 2:\n{proc.communicate()[0]}")
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=30)
    snapshot = json.loads(next(results.glob("*/results.json")).read_text())["skills"]
    assert snapshot[0]["skill_name"] == "a-invoices" and snapshot[0]["improved"] is True
    for folder, text in originals.items():
        assert (folder / "SKILL.md").read_bytes() == text, folder
    assert "interrupted: every SKILL.md is left unchanged" in output
    assert proc.returncode == 2, output
