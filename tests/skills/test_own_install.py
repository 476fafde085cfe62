"""The author's own Claude Code as the test bed (``--trigger-crowd=installed``,
``--trigger-harvest``), held against a home the pinned CLI laid out itself: plugins installed
with ``claude plugin install``, usage written by real Skill calls, session files written by
real conversations against the local stand-in."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets
from pytest_skilltrigger.skills.harvest import folder_name
from pytest_skilltrigger.skills.installed import read_install
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.backends.test_manifests_cli import builtin_lines, install, marketplace, skill, write
from tests.cli_session import cli_env, cli_request, listing_lines
from tests.fake_messages_api import FakeMessagesAPI

HAIKU = "claude-haiku-4-5"
LONG = " ".join(["with careful notes on every step of the work"] * 6)
PLANTED = "sk-ant-api03-PLANTEDsecretPLANTEDsecret0123456789"


def user_skills(home: Path, count: int) -> list[str]:
    names = [f"u{n}" for n in range(1, count + 1)]
    for name in names:
        skill(home / ".claude" / "skills" / name, f"Handle {name} chores {LONG}.", evals=False)
    return names


def project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    folder = root / ".claude" / "skills" / "pdf-tools"
    write(
        folder / "SKILL.md",
        "---\nname: pdf-tools\ndescription: Merge, split and rotate PDF documents.\n---\nBody\n",
    )
    rows = [{"query": "merge the two contract pdfs", "should_trigger": True}]
    write(folder / "evals" / "trigger-eval.json", json.dumps(rows))
    return folder


def say(claude: str, api: FakeMessagesAPI, root: Path, home: Path, prompt: str, *more: str) -> None:
    """One ``claude -p`` turn in ``root`` with ``home`` as HOME (``--continue`` in ``more``
    goes on with the last session)."""
    done = subprocess.run(
        [claude, "-p", prompt, *more],
        cwd=root,
        env=cli_env(api, home),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_installed_crowd_lists_as_the_cli_does_in_that_home(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """User skills, a marketplace's plugins installed by the CLI, and usage the CLI wrote
    after real Skill calls: the builtin listing of the installed crowd equals the CLI's, line
    for line, bare names included (the usage moved which skills keep their text)."""
    home = tmp_path / "home"
    names = user_skills(home, 8)
    market = tmp_path / "mkt-repo"
    marketplace(market, ["zeta", "alpha"], text="{} job number {}: " + LONG)
    install(claude_bin, fake_api, home, market, ["zeta", "alpha"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fake_api.script("do the u8 chores now", ["skill:u8"])
    fake_api.script("run the alpha job", ["skill:alpha:alpha-s2"])
    say(claude_bin, fake_api, elsewhere, home, "do the u8 chores now")
    say(claude_bin, fake_api, elsewhere, home, "run the alpha job")
    state = json.loads((home / ".claude.json").read_text())
    assert {"u8", "alpha:alpha-s2"} <= set(state["skillUsage"])
    # an old use, decayed to a fraction of today's: it ranks below the fresh ones
    state["skillUsage"]["u2"] = {"usageCount": 1, "lastUsedAt": 1_700_000_000_000}
    (home / ".claude.json").write_text(json.dumps(state))
    root = tmp_path / "proj"
    tested = project(root)
    found = find_targets([str(tested)], TargetOptions(install=read_install(str(home), str(root))))
    (target,) = found.targets
    ours = builtin_lines(target, HAIKU)
    cli = listing_lines(cli_request(claude_bin, fake_api, root, home, model=HAIKU))
    mine = {*names, "pdf-tools"}

    def own(lines: list[str]) -> list[str]:
        return [
            line
            for line in lines
            if line[2:].split(":", 1)[0].split(" ", 1)[0] in mine
            or "job number" in line
            or line[2:].startswith(("zeta:", "alpha:"))
        ]

    assert own(ours) == own(cli)
    # the claude-code backend lists it so too, in its own workspace, from the same install
    backend = ClaudeCodeBackend(model=HAIKU, timeout=90, claude_bin=claude_bin)
    try:
        seen = len(fake_api.requests)
        backend.run(target.start_context.on_model(HAIKU), "merge the two contract pdfs")
    finally:
        backend.close()
    sent = [
        b for b in fake_api.requests[seen:] if any(t.get("name") == "Skill" for t in b["tools"])
    ]
    assert own(listing_lines(sent[0])) == own(cli)
    assert any(line in ("- u7", "- pdf-tools") for line in own(cli))  # the budget bit
    assert any(line.startswith("- u8: ") for line in own(cli))  # used: it kept its text


def test_an_install_without_files_is_empty_and_a_broken_settings_file_is_named(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert read_install(str(home)).skills == ()
    write(home / ".claude" / "settings.json", "{not json")
    with pytest.raises(Exception, match=r"settings\.json: --trigger-crowd=installed"):
        read_install(str(home))


def test_an_unreadable_command_is_left_out_alone_and_said(tmp_path: Path) -> None:
    """One command file that cannot be read keeps only itself out of the crowd, user's or
    plugin's, and the header's left-out lines name it."""
    home = tmp_path / "home"
    commands = home / ".claude" / "commands"
    write(commands / "deploy.md", "---\ndescription: Deploy the site.\n---\nGo.\n")
    write(commands / "ops" / "rollback.md", "Roll the last deploy back.\n")
    (commands / "broken.md").write_bytes(b"---\ndescription: caf\xe9\n---\n")
    found = read_install(str(home))
    assert [s.name for s in found.skills] == ["deploy", "ops:rollback"]
    assert len(found.left_out) == 1
    assert "broken.md: is not valid UTF-8" in found.left_out[0]


def harvest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--trigger-skill-path=.claude/skills", *args
    )


def converse(claude: str, api: FakeMessagesAPI, root: Path, home: Path) -> None:
    """Three conversations, as a user has them: a load then another mid-conversation; a
    miss the user forces next with /pdf-tools; a load (of a prompt with a key in it) the
    user undoes next."""
    api.script("merge the two contract pdfs", ["skill:pdf-tools"])
    api.script("combine the scanned report pages", ["text"])
    api.script(f"rotate my holiday photos, key {PLANTED}", ["skill:pdf-tools"])
    api.script("now split the merged pdf into chapters", ["skill:pdf-tools"])
    say(claude, api, root, home, "merge the two contract pdfs")
    say(claude, api, root, home, "now split the merged pdf into chapters", "--continue")
    say(claude, api, root, home, "combine the scanned report pages")
    say(claude, api, root, home, "/pdf-tools combine the scanned report pages", "--continue")
    say(claude, api, root, home, f"rotate my holiday photos, key {PLANTED}")
    say(claude, api, root, home, "no, don't use pdf-tools for photos", "--continue")


def check_cases(cases: list[dict[str, Any]]) -> None:
    """One entry per signal and prompt, the mid-conversation one with its history."""
    by_signal = {c["signal"]: c for c in cases}
    assert set(by_signal) == {"observed", "missed", "undone"}
    observed = [c for c in cases if c["signal"] == "observed"]
    assert [c["prompt"] for c in observed] == [
        "merge the two contract pdfs",
        "now split the merged pdf into chapters",
    ]
    assert "history" not in observed[0]
    assert [t["role"] for t in observed[1]["history"]] == ["user", "assistant"]
    assert observed[1]["history"][0]["content"] == "merge the two contract pdfs"
    assert by_signal["missed"]["prompt"] == "combine the scanned report pages"
    assert by_signal["missed"]["should_trigger"] is True
    assert by_signal["undone"]["should_trigger"] is False
    assert all(c["harvested"] and c["expected_skill"] == "pdf-tools" for c in cases)
    assert all(c["source"]["file"].startswith("~/.claude/projects/") for c in cases)
    assert all(c["date"][:2] == "20" for c in cases)


@pytest.mark.slow
def test_a_harvest_of_sessions_the_cli_wrote(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three conversations the CLI itself wrote: a load, a miss the user forced next with
    /pdf-tools, a load the user undid; the harvest finds each, with its history, date and
    source, keeps the planted key and the home path out, adds nothing the second time, and
    merging twice adds nothing twice."""
    root = pytester.path
    home = root.parent / "home"
    project(root)
    api = fake_api
    converse(claude_bin, api, root, home)
    sessions = home / ".claude" / "projects" / folder_name(str(root))
    assert len(list(sessions.glob("*.jsonl"))) == 3, "the CLI kept its sessions where we look"
    monkeypatch.setenv("HOME", str(home))
    out = root / "harvest.json"
    result = harvest(pytester, f"--trigger-harvest={out}")
    assert result.ret == 0, result.stdout.str()
    text = out.read_text()
    assert PLANTED not in text and str(home) not in text and str(root) not in text
    cases = json.loads(text)["cases"]
    check_cases(cases)
    output = result.stdout.str()
    assert "2 observed, 1 missed, 1 undone" in output
    assert "no call was made" in output
    calls = api.stats["calls"]
    again = harvest(pytester, f"--trigger-harvest={out}")
    assert "wrote 0 new entries" in again.stdout.str()
    assert json.loads(out.read_text())["cases"] == cases
    eval_file = root / ".claude" / "skills" / "pdf-tools" / "evals" / "trigger-eval.json"
    merged = harvest(pytester, f"--trigger-harvest={out}", "--trigger-harvest-merge")
    # the first observed prompt is in the set already: only the other three are added
    assert "merged 3 new entries" in merged.stdout.str()
    twice = harvest(pytester, f"--trigger-harvest={out}", "--trigger-harvest-merge")
    assert "merged 0 new entries" in twice.stdout.str()
    entries = json.loads(eval_file.read_text())
    assert len(entries) == 4
    assert [e.get("harvested", False) for e in entries] == [False, True, True, True]
    assert api.stats["calls"] == calls  # harvesting and merging made no call
    report = root / "report.json"
    ran = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--trigger-skill-path=.claude/skills",
        "--trigger-cache=off",
        f"--trigger-json={report}",
    )
    assert "harvested from your own sessions (3 of 4 queries" in ran.stdout.str()
    assert json.loads(report.read_text())["skills"][0]["harvested"]["queries"] == 3


def test_a_bad_session_file_is_skipped_with_a_warning_and_no_sessions_is_a_notice(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    home = root.parent / "home"
    project(root)
    monkeypatch.setenv("HOME", str(home))
    out = root / "harvest.json"
    result = harvest(pytester, f"--trigger-harvest={out}")
    assert result.ret == 0
    notice = [line for line in result.stdout.lines if "no Claude Code session" in line]
    assert len(notice) == 1 and not out.exists()
    sessions = home / ".claude" / "projects" / folder_name(str(root))
    sessions.mkdir(parents=True)
    line = {
        "type": "user",
        "uuid": "a",
        "parentUuid": None,
        "timestamp": "2026-12-01T10:00:00.000Z",
        "cwd": str(root),
        "message": {"role": "user", "content": "merge the pdfs"},
    }
    (sessions / "cut.jsonl").write_text(json.dumps(line) + "\n" + json.dumps(line)[:40])
    (sessions / "bad.jsonl").write_text("not json\n" + json.dumps(line) + "\n")
    (sessions / "good.jsonl").write_text(json.dumps(line) + "\n")
    result = harvest(pytester, f"--trigger-harvest={out}")
    assert result.ret == 0, result.stdout.str()
    warnings = [line for line in result.stdout.lines if "warning:" in line]
    assert len(warnings) == 2
    assert any("cut.jsonl: line 2 is cut short" in w for w in warnings)
    assert any("bad.jsonl: line 1 is not JSON" in w for w in warnings)
    assert "read 1 session file(s)" in result.stdout.str()


def test_the_header_says_what_the_install_holds_and_how_the_skill_is_listed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = pytester.path
    home = root.parent / "home"
    project(root)
    user_skills(home, 3)
    write(home / ".claude" / "settings.json", json.dumps({"enabledPlugins": {"gone@mkt": True}}))
    monkeypatch.setenv("HOME", str(home))
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--trigger-skill-path=.claude/skills",
        "--trigger-crowd=installed",
        "--co",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*your install (~): 3 user skills and commands, 0 enabled plugin(s)*",
            "*your install: left out gone@mkt: enabled but not installed*",
            "*pdf-tools: among * listed skills and commands of your install, listed full*",
        ]
    )


def test_a_harvest_keeps_the_home_out_of_the_names_it_writes(tmp_path: Path) -> None:
    from pytest_skilltrigger.skills.harvest import _Scrubber

    home = str(tmp_path / "home" / "ana")
    scrub = _Scrubber(home)
    name = folder_name(f"{home}/work/reports")
    cleaned = scrub(f"{home}/.claude/projects/{name}/a.jsonl, see /Users/bob/x {PLANTED}")
    assert "ana" not in cleaned and "bob" not in cleaned and PLANTED not in cleaned
    assert cleaned.startswith("~/.claude/projects/~-work-reports/a.jsonl")


def test_a_skill_without_an_eval_set_is_harvested_and_a_typed_unknown_command_forces_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the CLI writes it in a folder where it does not list the skill: the typed
    ``/name`` stays a plain prompt. The miss before it is harvested, and merging gives the
    skill its first eval set."""
    root = pytester.path
    home = root.parent / "home"
    folder = root / ".claude" / "skills" / "ledger"
    write(folder / "SKILL.md", "---\nname: ledger\ndescription: Balance ledgers.\n---\nBody\n")
    sessions = home / ".claude" / "projects" / folder_name(str(root))
    sessions.mkdir(parents=True)
    lines = [
        {"prompt": "balance the march books", "uuid": "a", "parent": None},
        {"answer": "Here is how.", "uuid": "b", "parent": "a"},
        {"prompt": "/ledger balance the march books", "uuid": "c", "parent": "b"},
    ]
    records = []
    for line in lines:
        role = "user" if "prompt" in line else "assistant"
        content = line.get("prompt") or [{"type": "text", "text": line["answer"]}]
        records.append(
            {
                "type": role,
                "uuid": line["uuid"],
                "parentUuid": line["parent"],
                "timestamp": "2026-11-30T09:00:00.000Z",
                "cwd": str(root),
                "message": {"role": role, "content": content},
            }
        )
    (sessions / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setenv("HOME", str(home))
    out = root / "harvest.json"
    result = harvest(pytester, f"--trigger-harvest={out}", "--trigger-harvest-merge")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*ledger: 0 observed, 1 missed, 0 undone*"])
    (case,) = json.loads(out.read_text())["cases"]
    assert (case["prompt"], case["signal"], case["date"]) == (
        "balance the march books",
        "missed",
        "2026-11-30",
    )
    made = json.loads((folder / "evals" / "trigger-eval.json").read_text())
    assert [(e["query"], e["should_trigger"], e["harvested"]) for e in made] == [
        ("balance the march books", True, True)
    ]
