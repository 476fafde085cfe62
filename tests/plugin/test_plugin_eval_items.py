"""The official runner's cases under pytest: ``claude plugin eval`` cases that check the
Skill tool become trigger items (the others are named, with why, and never run), and
``--trigger-export-plugin-eval`` writes an eval set as such cases without a call. Nothing is written
into the plugin folder uninvited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.skills.plugin_eval.read import read_plugin_eval
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

ALPHA = "Convert zebra spreadsheets into llama reports."


def make_plugin(root: Path, with_eval_set: bool = False) -> Path:
    plugin = root / "acme-plugin"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "acme"}))
    for name, text in (("alpha", ALPHA), ("beta", "Polish walrus invoices.")):
        folder = plugin / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n\nBody.\n")
    if with_eval_set:
        evals = plugin / "skills" / "alpha" / "evals"
        evals.mkdir()
        rows = [
            {"query": "convert my zebra spreadsheets into llama reports", "should_trigger": True},
            {"query": "what is the capital of france", "should_trigger": False},
        ]
        (evals / "trigger-eval.json").write_text(json.dumps(rows))
    return plugin


def write_case(plugin: Path, name: str, prompt: str, grader: str, model: str = "") -> None:
    folder = plugin / "evals" / name
    folder.mkdir(parents=True)
    pinned = f"  model: {model}\n" if model else ""
    text = (
        f'schema_version: "1.0"\nname: {name}\nexecution:\n  prompt: "{prompt}"\n{pinned}'
        f"graders:\n  - {grader}\n"
    )
    (folder / "case.yaml").write_text(text)


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_trigger_cases_become_items_and_the_others_are_named(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path)
    skill = 'name: used, type: tool_used, tool: Skill, input_match: \'"skill":"(acme:)?alpha"\''
    prompt = "convert my zebra spreadsheets into llama reports"
    write_case(plugin, "zebra", prompt, "{" + skill + "}", model="claude-haiku-4-5")
    write_case(plugin, "france", "what is the capital of france", "{" + skill + ", max: 0, min: 0}")
    write_case(plugin, "judged", "write a poem", "{name: good, type: llm, criteria: nice}")
    before = files_of(plugin)
    result = pytester.runpytest_subprocess(*plugin_args(plugin, "-v", "--trigger-runs=1"))
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*no eval set, so listed but not tested: acme:beta*",
            "skilltrigger: 1 claude plugin eval case(s) not collected:",
            "*acme-plugin/evals/judged: *llm*",
            # in the order the runner reads cases: by folder
            "*::acme:alpha?00-france? PASSED*",
            "*::acme:alpha?01-zebra? PASSED*",
        ]
    )
    # a pinned model is not followed: that is said, at the skill, not silently dropped
    result.stdout.fnmatch_lines(
        [
            "*alpha/SKILL.md*case *evals/zebra pins execution.model claude-haiku-4-5; its trigger"
            " item runs on the session's model*"
        ]
    )
    assert files_of(plugin) == before  # read, never written
    assert fake_api.stats["trigger_calls"] == 2


def test_under_q_the_summary_says_what_was_not_tested_or_collected(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """-q hides the header: the untested skills and the cases not collected (one the
    official runner refuses among them, while the others run) are in the summary."""
    plugin = make_plugin(pytester.path)
    skill = 'name: used, type: tool_used, tool: Skill, input_match: \'"skill":"(acme:)?alpha"\''
    write_case(plugin, "zebra", "convert my zebra spreadsheets", "{" + skill + "}")
    write_case(plugin, "judged", "write a poem", "{name: good, type: llm, criteria: nice}")
    (plugin / "evals" / "broken").mkdir()
    (plugin / "evals" / "broken" / "case.yaml").write_text('schema_version: "1.0"\nruns: 0\n')
    result = pytester.runpytest_subprocess(*plugin_args(plugin, "-q", "--trigger-runs=1"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*no eval set, so listed but not tested: acme:beta*",
            "skilltrigger: 2 claude plugin eval case(s) not collected:",
            "*evals/broken: the official runner refuses it: *",
            "*evals/judged: *llm*",
        ]
    )


def test_when_no_case_is_a_trigger_check_the_error_says_what_was_seen(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path)
    write_case(plugin, "judged", "write a poem", "{name: good, type: llm, criteria: nice}")
    result = pytester.runpytest_subprocess(*plugin_args(plugin))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*none of the 2 skills here has an eval set (acme:alpha, acme:beta); looked for*"
            "1 claude plugin eval case(s) seen, none a trigger check: judged (*llm*"
        ]
    )
    assert fake_api.stats["trigger_calls"] == 0


def test_an_eval_set_is_exported_as_cases_without_a_call(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path, with_eval_set=True)
    out = pytester.path / "exported"
    result = pytester.runpytest_subprocess(
        *plugin_args(plugin, f"--trigger-export-plugin-eval={out}")
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        ["*skilltrigger: wrote 2 claude plugin eval cases for acme:alpha into exported*"]
    )
    said = result.stdout.str() + result.stderr.str()
    assert said.count("wrote 2 claude plugin eval cases") == 1  # once, not again as an Exit
    assert fake_api.stats["calls"] == 0
    cases = read_plugin_eval(str(pytester.path), "exported", names=["acme:alpha"])
    assert [(c.prompt, c.skill, c.should_trigger) for c in cases.cases] == [
        ("convert my zebra spreadsheets into llama reports", "acme:alpha", True),
        ("what is the capital of france", "acme:alpha", False),
    ]
    assert not (plugin / "evals").exists()


def test_an_export_folder_that_cannot_be_written_is_a_one_line_error(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    plugin = make_plugin(pytester.path, with_eval_set=True)
    blocker = pytester.path / "a-file"
    blocker.write_text("not a folder")
    result = pytester.runpytest_subprocess(
        *plugin_args(plugin, f"--trigger-export-plugin-eval={blocker}")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "a-file" in line]
    assert len(errors) == 1 and "Traceback" not in result.stderr.str()
    assert fake_api.stats["calls"] == 0


def test_an_export_does_not_draft(pytester: pytest.Pytester, fake_api: FakeMessagesAPI) -> None:
    """The export makes no call, and drafting is paid: together they are a one-line error
    before any draft is asked for, and nothing is written."""
    plugin = make_plugin(pytester.path, with_eval_set=True)
    out = pytester.path / "exported"
    result = pytester.runpytest_subprocess(
        *plugin_args(plugin, f"--trigger-export-plugin-eval={out}", "--trigger-draft")
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if "--trigger-export-plugin-eval" in line]
    assert len(errors) == 1 and "--trigger-draft first" in errors[0]
    assert "Traceback" not in result.stderr.str()
    assert fake_api.stats["calls"] == 0 and not out.exists()


def test_a_case_resuming_a_conversation_is_collected_and_asked_after_it(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """``context.history_file`` (a session file in the case folder): its trigger item sends
    the history before the prompt, as the runner's resumed run does."""
    from pytest_skilltrigger.skills.history import session_lines

    plugin = make_plugin(pytester.path)
    skill = 'name: used, type: tool_used, tool: Skill, input_match: \'"skill":"(acme:)?alpha"\''
    write_case(plugin, "resumed", "now convert the zebra spreadsheets", "{" + skill + "}")
    turns = [
        {"role": "user", "content": "I keep zebra spreadsheets for the zoo"},
        {"role": "assistant", "content": "Noted. What should I do with them?"},
    ]
    lines = session_lines(turns, str(plugin))
    (plugin / "evals" / "resumed" / "h.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines)
    )
    case = plugin / "evals" / "resumed" / "case.yaml"
    case.write_text(case.read_text() + "context:\n  history_file: h.jsonl\n")
    result = pytester.runpytest_subprocess(*plugin_args(plugin, "-v", "--trigger-runs=1"))
    result.assert_outcomes(passed=1)
    (body,) = list(fake_api.requests)
    assert body["messages"][0]["content"] == turns[0]["content"]
