"""``--trigger-within=turn``: a skill loaded after the model has looked around counts.

Against the stand-in, a model that reads a file first and then calls ``Skill`` gets in
``turn`` the verdicts of a model that calls it at once, and in ``first-call`` the read is its
choice; on both backends. The API backend answers the read from the project's own file, in
the shape the pinned CLI sends back (held against the CLI's own follow-up request), and never
reads outside the project, writes or runs a command. Follow-ups are counted and priced, a
rerun replays the whole turn from the store with no call, and the budget holds."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.api.backend import AnthropicBackend
from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.backends.looking_around import ProjectFiles
from pytest_skilltrigger.model.turn import TurnRule
from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.fake_messages_api import FakeMessagesAPI

LOOKS_FIRST = "merge notes.md into the contract pdf"  # reads notes.md, then the skill
AT_ONCE = "merge these two pdf files into one"  # the skill straight away
README = "# Notes\n\nthe contract is in contract.pdf\r\nsecond line\n"


def project(root: Path) -> Path:
    """A project with a skill and a file its queries name."""
    skill = root / "skills" / "pdf-tools"
    (skill / "evals").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Merge, split and rotate PDF documents.\n---\nBody\n"
    )
    entries = [{"query": q, "should_trigger": True} for q in (LOOKS_FIRST, AT_ONCE)]
    (skill / "evals" / "trigger-eval.json").write_text(json.dumps(entries))
    (root / "notes.md").write_text(README)
    return skill


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--trigger-skill-path=skills",
        "--trigger-confidence=off",
        "--trigger-cache=off",
        *args,
    )


def results(path: Path) -> dict[str, dict[str, Any]]:
    report = json.loads(path.read_text())
    return {row["query"]: row for row in report["skills"][0]["results"]}


def test_a_read_then_the_skill_is_a_trigger_in_turn_and_the_read_in_first_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project(pytester.path)
    fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
    fake_api.turns(AT_ONCE, ["skill:pdf-tools"])
    turn, first = pytester.path / "turn.json", pytester.path / "first.json"
    run(pytester, "--trigger-within=turn", f"--trigger-json={turn}").assert_outcomes(passed=2)
    calls = fake_api.stats["calls"]
    assert calls == 2 * 2 + 2  # two runs decide each query; the looking one takes 2 calls each
    in_turn = results(turn)
    assert in_turn[LOOKS_FIRST]["chosen"] == in_turn[AT_ONCE]["chosen"] == {"skill:pdf-tools": 2}
    assert json.loads(turn.read_text())["totals"]["calls"] == calls  # every follow-up counted
    result = run(pytester, "--trigger-within=first-call", f"--trigger-json={first}")
    result.assert_outcomes(passed=1, failed=1)
    assert results(first)[LOOKS_FIRST]["chosen"] == {"tool:Read": 2}
    result.stdout.fnmatch_lines(["the model chose instead: tool Read x2"])


def test_the_failure_shows_the_way_and_the_bound_is_its_own_outcome(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project(pytester.path)
    fake_api.turns(LOOKS_FIRST, ["tool:Read", "tool:Bash"])
    fake_api.turns(AT_ONCE, ["tool:Read"] * 10)
    result = run(pytester, "--trigger-within=turn", "--trigger-within-bound=2")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "the model chose instead: tool Bash x2",
            "the turns: read notes.md, then chose tool Bash x2",
            "the model chose instead: still looking around at the bound "
            "(--trigger-within-bound) x2",
        ]
    )
    # the bound: two reads answered, the third call ended the run (3 requests a run)
    assert fake_api.stats["calls"] == 2 * 2 + 2 * 3


def test_the_read_is_answered_from_the_project_in_the_clis_shape(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project(pytester.path)
    fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
    fake_api.turns(AT_ONCE, ["skill:pdf-tools"])
    run(pytester, "--trigger-within=turn", "--trigger-runs=1")
    follow_ups = [b for b in fake_api.requests if len(b["messages"]) > 2]
    assert follow_ups
    echoed, answered = follow_ups[0]["messages"][-2:]
    call = echoed["content"][-1]
    assert echoed["role"] == "assistant" and call["name"] == "Read"
    # echoed as it came (the stand-in adds thinking and a preamble to some answers, by chance)
    kinds = [b["type"] for b in echoed["content"]]
    assert kinds[-1] == "tool_use" and set(kinds) <= {"thinking", "text", "tool_use"}
    thoughts = [b for b in echoed["content"] if b["type"] == "thinking"]
    assert all(b["signature"] for b in thoughts)  # thinking goes back with its signature
    assert answered == {
        "role": "user",
        "content": [
            {
                "tool_use_id": call["id"],
                "type": "tool_result",
                "content": (
                    "1\t# Notes\n2\t\n3\tthe contract is in contract.pdf\n4\tsecond line\n5\t"
                ),
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    # the one cache mark is on the last block: none is left on earlier messages' blocks
    marks = json.dumps(follow_ups[0]["messages"][:-1]).count("cache_control")
    assert marks == 0


def test_a_path_out_of_the_project_a_write_and_a_command_are_never_carried_out(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    (root / "a.txt").write_text("inside\n")
    files = ProjectFiles(str(root), frozenset({"Read", "Glob", "Grep"}))
    for path in ("../secret.txt", str(tmp_path / "secret.txt"), "link.txt", "/etc/hostname"):
        answer = files.answer("Read", {"file_path": path})
        assert answer.is_error and "TOPSECRET" not in str(answer.content), path
        assert "permission" in str(answer.content)
    for tool, given in (
        ("Write", {"file_path": "b.txt", "content": "x"}),
        ("Edit", {"file_path": "a.txt", "old_string": "inside", "new_string": "pwned"}),
        ("Bash", {"command": "touch pwned.txt"}),
    ):
        assert files.answer(tool, given).is_error
    assert sorted(os.listdir(root)) == ["a.txt", "link.txt"]
    assert (root / "a.txt").read_text() == "inside\n"
    grep = files.answer("Grep", {"pattern": "TOP", "path": ".."})
    assert grep.is_error and "TOPSECRET" not in str(grep.content)
    assert files.answer("Grep", {"pattern": "TOP"}).content == "No files found"


def test_a_command_ends_the_turn_without_running(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A Bash call after a read is the run's choice: it is not run, and the run ends."""
    project(pytester.path)
    query = "look at notes.md then run `touch pwned.txt`"
    entries = [{"query": query, "should_trigger": False}]
    (pytester.path / "skills/pdf-tools/evals/trigger-eval.json").write_text(json.dumps(entries))
    fake_api.turns(query, ["tool:Read", "tool:Bash"])
    run(pytester, "--trigger-within=turn").assert_outcomes(passed=1)
    assert not (pytester.path / "pwned.txt").exists()
    assert fake_api.stats["calls"] == 2 * 2


def test_a_rerun_replays_the_turn_from_the_store_and_the_budget_holds(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    project(pytester.path)
    fake_api.turns(LOOKS_FIRST, ["tool:Read", "tool:Bash"])
    fake_api.turns(AT_ONCE, ["skill:pdf-tools"])
    store = f"--trigger-store={pytester.path / 'runs.sqlite'}"
    args = ("--trigger-within=turn", store, "--trigger-cache=use")
    first = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--trigger-skill-path=skills", "--trigger-confidence=off", *args
    )
    first.assert_outcomes(passed=1, failed=1)
    calls = fake_api.stats["calls"]
    again = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--trigger-skill-path=skills", "--trigger-confidence=off", *args
    )
    again.assert_outcomes(passed=1, failed=1)
    assert fake_api.stats["calls"] == calls  # no call: the whole turn came from the store
    again.stdout.fnmatch_lines(["the turns: read notes.md, then chose tool Bash x2"])
    # a budget that covers one turn's worst case, not two: the follow-ups stay within it
    out = pytester.path / "budget.json"
    budget = 0.05
    run(
        pytester,
        "--trigger-within=turn",
        f"--trigger-budget-usd={budget}",
        f"--trigger-json={out}",
    )
    assert json.loads(out.read_text())["totals"]["cost_usd"] <= budget


@pytest.mark.slow
def test_the_claude_code_backend_goes_past_reads_and_answers_like_the_api_backend(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pinned CLI runs the Read itself and goes on to the Skill call (two requests, on
    the server's count); in first-call the Read is the choice. Its follow-up request holds
    the file's content as the API backend answers it: the same tool_result content."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "repo"
    tested = project(root)
    (root / ".git").mkdir()
    rule = TurnRule(root=str(root))
    turn = find_targets([str(tested)], TargetOptions(within=rule)).targets[0].start_context
    first = find_targets([str(tested)], TargetOptions()).targets[0].start_context
    fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        seen = len(fake_api.requests)
        in_turn = backend.run(turn, LOOKS_FIRST)
        assert len(fake_api.requests) - seen == 2
        cli_follow_up = fake_api.requests[-1]
        at_first = backend.run(first, LOOKS_FIRST)
    finally:
        backend.close()
    assert (in_turn.status, in_turn.chosen) == ("triggered", "skill:pdf-tools")
    assert in_turn.path == ("read notes.md",)
    assert in_turn.requests == 2
    assert (at_first.status, at_first.chosen) == ("not_triggered", "tool:Read")
    results = [
        b
        for m in cli_follow_up["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert results, "the CLI's follow-up carries the Read's result"
    cli_content = results[-1]["content"]
    cli_text = cli_content if isinstance(cli_content, str) else cli_content[0]["text"]
    ours = ProjectFiles(str(root)).answer("Read", {"file_path": "notes.md"}).content
    assert cli_text.split("\n\n<system-reminder>")[0] == ours
    assert list(results[-1])[:3] == ["tool_use_id", "type", "content"]
    api = AnthropicBackend(model="claude-opus-5-5")
    try:
        fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
        by_api = api.run(turn, LOOKS_FIRST)
    finally:
        api.close()
    assert (by_api.status, by_api.chosen, by_api.path) == (
        in_turn.status,
        in_turn.chosen,
        in_turn.path,
    )


@pytest.mark.slow
def test_a_capture_in_turn_records_the_clis_follow_up_and_the_replay_answers_like_it(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Capture mode in turn: the capture goes on through a Read of its own file and records
    the CLI's follow-up; the replayed turn's Read result ends as the CLI's does (whatever the
    CLI adds after a file's lines), and the user's folder gets no file."""
    from pytest_skilltrigger.backends.capture import PROBE_FILE, Captures

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "repo"
    tested = project(root)
    (root / ".git").mkdir()
    before = sorted(p.name for p in root.rglob("*"))
    turn = find_targets([str(tested)], TargetOptions(within=TurnRule(root=str(root))))
    context = turn.targets[0].start_context
    cli = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    api = AnthropicBackend(timeout=60, captures=Captures(lambda: cli))
    try:
        captured, _template = api.captures.get(context)  # type: ignore[union-attr]
        fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
        seen = len(fake_api.requests)
        outcome = api.run(context, LOOKS_FIRST)
        fake_api.turns(LOOKS_FIRST, ["tool:Read", "skill:pdf-tools"])
        by_cli = cli.run(context, LOOKS_FIRST)
    finally:
        api.close()
        cli.close()
    assert (outcome.status, outcome.path, outcome.requests) == ("triggered", ("read notes.md",), 2)
    ours = fake_api.requests[seen + 1]["messages"][-1]["content"][-1]["content"]
    theirs = fake_api.requests[-1]["messages"][-1]["content"][-1]["content"]
    theirs = theirs if isinstance(theirs, str) else theirs[0]["text"]
    assert by_cli.status == "triggered"
    assert ours == theirs
    assert ours.endswith(captured.read_suffix)
    assert sorted(p.name for p in root.rglob("*")) == before
    assert PROBE_FILE not in before
