"""Exported cases under the pinned CLI's own runner, ``claude plugin eval``, offline.

An eval set exported with :func:`write_plugin_eval` must load in the official runner and be
judged there as the model answered: a small plugin (``acme``, skills ``alpha`` and ``beta``)
holds the cases, the runner's child CLIs ask the suite's fake Messages API, and every case's
verdict in the runner's JSON must agree with what the fake chose for its prompt (read back
from the requests it received). Two prompts are scripted to go the wrong way, so agreement
is checked on failing cases too. The runner must write nothing into the plugin folder when
given ``--output-dir``, and the exported cases read back as the same trigger items.

Slow (each case is a CLI process): marked ``slow``; deselect with ``-m "not slow"``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.skills.evalset import EvalEntry, EvalSet
from pytest_skilltrigger.skills.plugin_eval.read import read_plugin_eval
from pytest_skilltrigger.skills.plugin_eval.write import CaseSkill, write_plugin_eval
from tests.backends import test_claude_code_cli as cli_tests
from tests.fake_messages_api import FakeMessagesAPI, decide, extract_query, parse_listing

pytestmark = pytest.mark.slow

# the pinned CLI, installed on first use (a missing npm skips), shared with the CLI tests
claude_bin = cli_tests.claude_bin

ALPHA = "Convert zebra spreadsheets into llama reports. Use for zebra or llama data."
BETA = "Polish walrus invoices for accountants. Use for walrus billing."
# (query, should trigger acme:alpha, what the fake is scripted to answer or None for its
# keyword model): the scripted two make the runner fail those cases, as the model would.
QUERIES: list[tuple[str, bool, str | None]] = [
    ("convert these zebra spreadsheets please", True, None),
    ("turn my llama data into reports", True, None),
    ("the zebra spreadsheets need llama reports today", True, "skill:acme:beta"),
    ("polish the walrus invoices for the accountants", False, None),
    ("What is the capital of France?", False, None),
    ("what is the tallest mountain in Europe?", False, "skill:acme:alpha"),
    # a call by the bare name, which the CLI loads as acme:alpha: a trigger in both
    ("llama reports from the zebra sheet", True, "skill:alpha"),
]
# the names the CLI loads acme:alpha by
ALPHA_NAMES = ("skill:acme:alpha", "skill:alpha")


def make_plugin(root: Path) -> Path:
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "acme", "version": "0.1.0", "description": "Test plugin"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest), encoding="utf-8")
    for name, description in (("alpha", ALPHA), ("beta", BETA)):
        folder = root / "skills" / name
        folder.mkdir(parents=True)
        text = f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody.\n"
        (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    return {
        str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def run_official_runner(
    claude: str, plugin: Path, api: FakeMessagesAPI, work: Path
) -> subprocess.CompletedProcess[str]:
    """``claude plugin eval`` as CI would run it: no TTY, a fresh HOME, the fake's address."""
    home, cwd = work / "home", work / "cwd"
    home.mkdir()
    cwd.mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": api.url,
        "ANTHROPIC_API_KEY": "test-key",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    command = [
        claude,
        "plugin",
        "eval",
        str(plugin),
        "--ablation",
        "none",
        "--runs",
        "1",
        "--trust-plugin",
        "--no-publish",
        "--json",
        str(work / "out.json"),
        "-j",
        "2",
        "--output-dir",
        str(work / "report"),
    ]
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def case_runs(case: dict[str, Any]) -> list[dict[str, Any]]:
    """A case's runs in the runner's JSON: those of each of its arms."""
    return [run for runs in case["arms"].values() for run in runs]


def fake_choices(api: FakeMessagesAPI) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Per prompt: what the fake chose (its script, else its keyword model on the listing it
    read from the request), and that listing."""
    found = {}
    for body in cli_tests.first_turns(api):
        query = extract_query(body)
        listing = parse_listing(body)
        scripted = dict((q, s) for q, _, s in QUERIES if s is not None)
        found[query] = (scripted.get(query) or decide(query, listing, api.min_overlap), listing)
    return found


def test_exported_cases_load_and_run_under_the_official_runner(
    fake_api: FakeMessagesAPI, claude_bin: str, tmp_path: Path
) -> None:
    plugin = make_plugin(tmp_path / "acme")
    for query, _, scripted in QUERIES:
        if scripted:
            fake_api.script(query, [scripted])
    entries = tuple(EvalEntry(i, q, expected) for i, (q, expected, _) in enumerate(QUERIES))
    source = EvalSet(str(tmp_path / "alpha-eval.json"), entries)
    skill = CaseSkill(("alpha",), str(plugin))
    written = write_plugin_eval(str(plugin / "evals"), "acme:alpha", source, skill=skill)
    before = snapshot(plugin)

    done = run_official_runner(claude_bin, plugin, fake_api, tmp_path)

    assert "Couldn't load" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr  # the two scripted cases fail, and only they
    report: dict[str, Any] = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    names = [Path(path).parent.name for path in written]
    assert [case["name"] for case in report["cases"]] == names  # every exported case loaded
    choices = fake_choices(fake_api)
    assert sorted(choices) == sorted(q for q, _, _ in QUERIES)  # one request per case
    for case, (query, should_trigger, scripted) in zip(report["cases"], QUERIES, strict=True):
        assert case["dir"] == f"evals/{case['name']}"
        assert case["promptMarkdown"] == query
        chosen, listing = choices[query]
        # the fake read the plugin's skills from the CLI's listing, by their listed names
        assert ("acme:alpha", ALPHA) in listing and ("acme:beta", BETA) in listing
        agrees = (chosen in ALPHA_NAMES) == should_trigger
        assert agrees == (scripted is None or scripted == "skill:alpha"), (query, chosen)
        expected = 1 if agrees else 0
        assert case["aggregates"] == {"score": expected, "passRate": expected}, case["name"]
    assert report["aggregates"]["casesPassed"] == len(QUERIES) - 2
    # two turns: the skill's turn ends the run cleanly, with no turn-limit error recorded
    errors = [run.get("error") for case in report["cases"] for run in case_runs(case)]
    assert errors and not any(errors), errors
    # with --output-dir the runner writes nothing into the plugin folder
    assert snapshot(plugin) == before
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == [
        "aggregate-result.json",
        "report.html",
    ]
    # and the exported cases read back as the same trigger items
    read = read_plugin_eval(str(plugin), names=["acme:alpha", "acme:beta"])
    assert read.not_collected == ()
    assert [(c.prompt, c.should_trigger, c.skill) for c in read.cases] == [
        (q, expected, "acme:alpha") for q, expected, _ in QUERIES
    ]


# (query, should trigger acme:alpha, the model's answers turn by turn, requests it takes)
LOOKING_AROUND: list[tuple[str, bool, list[str], int]] = [
    ("read notes.md and then convert the zebra sheet", True, ["tool:Read", "skill:acme:alpha"], 2),
    ("convert the zebra sheet and keep going", True, ["skill:alpha", "tool:Read", "text"], 1),
    ("read notes.md twice then answer", False, ["tool:Read", "tool:Read", "text"], 3),
    ("read notes.md then polish walrus bills", False, ["tool:Read", "skill:acme:beta", "text"], 3),
]


def test_exported_cases_end_cleanly_when_the_model_looks_around_or_keeps_going(
    fake_api: FakeMessagesAPI, claude_bin: str, tmp_path: Path
) -> None:
    """A model that reads first, or keeps working after loading the skill: every run ends
    with no error in the runner's report (its stopping plugin ends it at the skill's call,
    the turn limit is the runner's own), graded over the whole run, and stops asking once
    the skill is called."""
    plugin = make_plugin(tmp_path / "acme")
    for query, _, answers, _ in LOOKING_AROUND:
        fake_api.turns(query, answers)
    entries = tuple(EvalEntry(i, q, should) for i, (q, should, _, _) in enumerate(LOOKING_AROUND))
    source = EvalSet(str(tmp_path / "alpha-eval.json"), entries)
    skill = CaseSkill(("alpha",), str(plugin))
    write_plugin_eval(str(plugin / "evals"), "acme:alpha", source, skill=skill)

    done = run_official_runner(claude_bin, plugin, fake_api, tmp_path)

    assert done.returncode == 0, done.stderr  # every case passes
    report: dict[str, Any] = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    errors = [run.get("error") for case in report["cases"] for run in case_runs(case)]
    assert len(errors) == len(LOOKING_AROUND) and not any(errors), errors
    asked: dict[str, int] = {}
    for body in fake_api.requests:
        if any(t.get("name") == "Skill" for t in body.get("tools") or []):
            first = next(m for m in body["messages"] if m.get("role") == "user")
            query = extract_query({"messages": [first]})
            asked[query] = asked.get(query, 0) + 1
    assert asked == {q: n for q, _, _, n in LOOKING_AROUND}
