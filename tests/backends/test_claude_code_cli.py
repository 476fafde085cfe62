"""The claude-code backend against the real Claude Code CLI, offline.

The pinned CLI (``.ci/install_claude_code.sh``, installed into the git-ignored ``.tools/``)
talks to the suite's fake Messages API through ``ANTHROPIC_BASE_URL``, with an isolated HOME
that holds a *same-named* user skill with another description. What must hold, with several
CLI processes at once and under ``-n 2``:

* every first request of every run lists the skill under test exactly once, with the
  description under test (never the user's shadowing copy, never another run's copy);
* its sibling skill is listed exactly once too;
* the runs decide (triggered / not) and leave no workspace and nothing in HOME behind.

Why the fake server and not a mock: it is the CLI's real request that proves the isolation.
Slow (a CLI start costs ~1 s of CPU): marked ``slow``; deselect with ``-m "not slow"``.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pytest_skilltrigger.backends.claude_code.backend import ClaudeCodeBackend
from pytest_skilltrigger.backends.claude_code.workspace import skill_file
from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
from tests.fake_messages_api import LISTING_RE, FakeMessagesAPI, bare_names

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools" / "claude-code"
CLI = TOOLS / "node_modules" / ".bin" / "claude"
INSTALL = ROOT / ".ci" / "install_claude_code.sh"

SKILL = "pdf-tools"
DESCRIPTION = (
    "Merge, split and extract pages from PDF documents. Use when the user wants to combine "
    "or cut up PDF files."
)
SHADOW = "USER COPY that must never be listed: convert images to PDF."
SIBLING = "csv-tidy"
SIBLING_DESCRIPTION = "Clean messy CSV files: delimiters, encodings, duplicate rows."


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The pinned CLI; installed on first use so plain ``pytest`` works on a fresh clone.

    A lock file serialises the install across xdist workers. Only a missing npm skips: a
    failing install is a failure, not a silent skip.
    """
    if CLI.exists():
        return str(CLI)
    if shutil.which("npm") is None:
        if os.environ.get("CI"):  # CI must test the isolation, never pass without it
            pytest.fail("npm is not installed: cannot install the pinned Claude Code CLI")
        pytest.skip("npm is not installed: cannot install the pinned Claude Code CLI")
    TOOLS.mkdir(parents=True, exist_ok=True)
    with open(TOOLS.parent / ".claude-code.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(
            ["bash", str(INSTALL)], capture_output=True, text=True, timeout=600, check=False
        )
    if done.returncode != 0 or not CLI.exists():
        pytest.fail(f"installing Claude Code failed:\n{done.stdout}\n{done.stderr}")
    return str(CLI)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            out.append(block["text"])
    return out


def first_turns(api: FakeMessagesAPI) -> list[dict[str, Any]]:
    """The requests that asked the model to choose (Skill tool offered, no tool result yet)."""
    found = []
    for body in list(api.requests):
        if not any(t.get("name") == "Skill" for t in body.get("tools") or []):
            continue
        blocks = [b for m in body["messages"] for b in m.get("content") or []]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            continue
        found.append(body)
    return found


def listed(body: dict[str, Any], name: str) -> list[str]:
    """Every description listed under ``name`` in one request (all copies, not deduplicated)."""
    texts = [t for m in body["messages"] for t in _texts(m.get("content"))]
    return [
        m.group("desc").strip()
        for text in texts
        for m in LISTING_RE.finditer(text)
        if m.group("name") == name
    ]


def assert_one_copy_each(bodies: list[dict[str, Any]]) -> None:
    for body in bodies:
        assert listed(body, SKILL) == [DESCRIPTION]
        assert listed(body, SIBLING) == [SIBLING_DESCRIPTION]


def shadow_home(home: Path) -> None:
    """A user skill folder with a same-named skill, as a user who installed it would have."""
    folder = home / ".claude" / "skills" / SKILL
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, SHADOW), encoding="utf-8")


def test_concurrent_runs_each_see_exactly_one_copy(
    fake_api: FakeMessagesAPI,
    claude_bin: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    shadow_home(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("CLAUDE_SECURESTORAGE_CONFIG_DIR", raising=False)
    queries = [f"merge the quarterly pdf reports, batch {i}" for i in range(6)]
    expected = ["skill:pdf-tools"] * 3 + ["skill:csv-tidy", "tool:Bash", "text"]
    for query, outcome in zip(queries, expected, strict=True):
        fake_api.script(query, [outcome])
    context = TriggerContext(SKILL, DESCRIPTION, (ListedSkill(SIBLING, SIBLING_DESCRIPTION),))
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    spans: list[tuple[float, float]] = []
    lock = threading.Lock()

    def timed(query: str) -> Any:
        start = time.monotonic()
        outcome = backend.run(context, query)
        with lock:
            spans.append((start, time.monotonic()))
        return outcome

    try:
        assert backend.cli_version == "2.1.328"
        with ThreadPoolExecutor(3) as pool:
            outcomes = list(pool.map(timed, queries))
        assert [o.chosen for o in outcomes] == expected, [o.error for o in outcomes]
        assert [o.status for o in outcomes] == ["triggered"] * 3 + ["not_triggered"] * 3
        # the runs really overlapped
        spans.sort()
        assert any(b[0] < a[1] for a, b in itertools.pairwise(spans))
        bodies = first_turns(fake_api)
        assert len(bodies) == len(queries)
        assert_one_copy_each(bodies)
        assert len(backend.observed_listings) == len(queries)
        for skills in backend.observed_listings:
            assert skills.count(SKILL) == 1 and skills.count(SIBLING) == 1
        # workspaces are reused one run at a time (at most one per concurrent run), so the
        # workspace path in Claude Code's system prompt stays stable and the prefix is cached
        assert len(list(Path(backend._root).iterdir())) <= 3
        assert sum(o.usage.cache_read_input_tokens for o in outcomes) > 0
        # nothing was written to the user's home: config and scratch files stay per run
        written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
        assert written == [f".claude/skills/{SKILL}/SKILL.md"]
    finally:
        backend.close()
    assert not Path(backend._root).exists()


def _without_metadata(body: dict[str, Any]) -> dict[str, Any]:
    """A request without its metadata (ids of the process and of its fresh config folder;
    the model never sees them)."""
    return {k: v for k, v in body.items() if k != "metadata"}


def test_a_kept_process_sends_what_a_fresh_one_sends(
    fake_api: FakeMessagesAPI,
    claude_bin: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process answers the runs of its context one after another: the query after a skill
    call, a tool call and a plain answer is sent exactly as the same process sent it first,
    and as a fresh process in the same folder sends it; no request is made but the runs'."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    query = "merge the quarterly pdf reports into one"
    fake_api.script(query, [f"skill:{SKILL}"])
    fake_api.script("list the files here", ["tool:Bash"])
    fake_api.script("what is a good name for a cat", ["text"])
    fake_api.script("tidy the csv please", [f"skill:{SIBLING}"])
    context = TriggerContext(SKILL, DESCRIPTION, (ListedSkill(SIBLING, SIBLING_DESCRIPTION),))
    other = TriggerContext(SKILL, "Another description under test.", ())
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        first = [
            backend.run(context, q)
            for q in [query, "list the files here", "what is a good name for a cat", query]
        ]
        chosen = [o.chosen for o in first]
        assert chosen == [f"skill:{SKILL}", "tool:Bash", "text", f"skill:{SKILL}"], first
        assert backend.run(other, "tidy the csv please").status != "error"  # the kept one goes
        assert backend.run(context, query).chosen == f"skill:{SKILL}"  # a fresh process
    finally:
        backend.close()
    bodies = list(fake_api.requests)
    assert len(bodies) == 6  # one request a run: no interrupt or rewind reached the API
    kept_first, kept_again, fresh = bodies[0], bodies[3], bodies[5]
    assert kept_again == kept_first  # the same process: byte for byte
    assert _without_metadata(fresh) == _without_metadata(kept_first)
    assert fresh["metadata"] != kept_first["metadata"]  # it really was another process
    assert listed(bodies[4], SKILL) == ["Another description under test."]


def test_plugin_under_xdist_with_concurrent_cli_runs(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, claude_bin: str
) -> None:
    """``pytest -n 2 --trigger-backend claude-code --trigger-concurrency 3``, end to end."""
    shadow_home(Path.home())  # pytester points HOME at its own folder
    skills = pytester.path / "skills"
    entries: dict[str, list[tuple[str, bool, str]]] = {
        SKILL: [
            ("combine these three pdf files into one", True, f"skill:{SKILL}"),
            ("cut pages 2 to 5 out of report.pdf", True, f"skill:{SKILL}"),
            ("split the contract pdf per chapter", True, f"skill:{SKILL}"),
            ("what is the weather like on mars", False, "text"),
        ],
        SIBLING: [
            ("the delimiters in orders.csv are broken", True, f"skill:{SIBLING}"),
            ("run the unit tests in the terminal", False, "tool:Bash"),
        ],
    }
    descriptions = {SKILL: DESCRIPTION, SIBLING: SIBLING_DESCRIPTION}
    for name, rows in entries.items():
        folder = skills / name
        (folder / "evals").mkdir(parents=True)
        (folder / "SKILL.md").write_text(skill_file(name, descriptions[name]), encoding="utf-8")
        evals = [{"query": q, "should_trigger": s} for q, s, _ in rows]
        (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals), encoding="utf-8")
        for query, _should, outcome in rows:
            fake_api.script(query, [outcome])

    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "-v",
        "--trigger-backend",
        "claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-concurrency",
        "3",
        "--trigger-timeout",
        "90",
        "--trigger-runs",
        "2",
        "--trigger-no-early-stop",
        "--trigger-cache",
        "off",
        f"--trigger-skill-path={skills}",
        f"--trigger-json={pytester.path / 'out.json'}",
        timeout=240,
    )
    result.assert_outcomes(passed=6)
    bodies = first_turns(fake_api)
    assert len(bodies) == 6 * 2
    assert_one_copy_each(bodies)
    # every request the CLI sent is counted and priced, and none follows a decision: the
    # process group is killed at once (a grace period lets it send its next request)
    report = json.loads((pytester.path / "out.json").read_text())
    assert fake_api.stats["calls"] == 6 * 2
    assert report["totals"]["calls"] == fake_api.stats["calls"]
    assert report["totals"]["by_phase"]["items"]["calls"] == 12
    # the model the CLI really used names the results and prices them
    assert report["model"] == fake_api.requests[0]["model"]
    assert report["totals"]["cost_usd"] is not None and report["totals"]["cost_usd"] > 0
    # every request came from the real CLI, not from the Messages API backend
    agents = {h.get("user-agent", "").split(" ")[0] for h in fake_api.request_headers}
    assert agents == {"claude-cli/2.1.328"}


@pytest.mark.slow
def test_optimizer_proposals_through_the_cli(
    fake_api: FakeMessagesAPI,
    claude_bin: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With only a Claude Code login, the improvement rounds ask the CLI for proposals."""
    from pytest_skilltrigger.optimizer.proposer import DescriptionProposer

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    fake_api.proposals = ["Merge, split and tidy PDF reports for the quarterly batch."]
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        proposal = DescriptionProposer(
            lambda p: (a := backend.ask(p)) and (a.text, a.usage)
        ).propose(
            "Improve this.\n<current_description>\nOld.\n</current_description>\n"
            "Answer inside <new_description></new_description> tags."
        )
    finally:
        backend.close()
    assert proposal.error is None, proposal.error
    assert proposal.description == "Merge, split and tidy PDF reports for the quarterly batch."
    assert fake_api.stats["decisions"].get("improve", 0) >= 1


def test_the_model_the_cli_will_use_keys_the_store(
    claude_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ANTHROPIC_MODEL`` changes the CLI's model, so results stored for the default model
    must not be reused for it."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    context = TriggerContext(SKILL, DESCRIPTION)
    keys = []
    for env_model in (None, "claude-haiku-4-5", "claude-sonnet-5"):
        if env_model is None:
            monkeypatch.delenv("ANTHROPIC_MODEL", raising=False)
        else:
            monkeypatch.setenv("ANTHROPIC_MODEL", env_model)
        backend = ClaudeCodeBackend(timeout=60, claude_bin=claude_bin)
        try:
            keys.append(backend.context_key(context))
            assert backend.model == (env_model or "claude-code-default")
        finally:
            backend.close()
    assert len(set(keys)) == 3


def listing_lines(body: dict[str, Any]) -> dict[str, str]:
    """Every ``- name: text`` line of the listing in one request, by name."""
    texts = [t for m in body["messages"] for t in _texts(m.get("content"))]
    texts += _texts(body.get("system"))
    found: dict[str, str] = {}
    for text in texts:
        for line in text.splitlines():
            if line.startswith("- ") and ": " in line:
                name, _, rest = line[2:].partition(": ")
                found.setdefault(name, rest)
    return found


def test_the_cli_lists_the_real_skill_md_as_our_listing_rules_say(
    fake_api: FakeMessagesAPI, claude_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend installs the real SKILL.md (every key, only the description replaced), so
    the CLI applies its own rules; the line it lists is exactly the line our rules give
    (when_to_use suffix, folded newlines, escaped brackets, the cut at 1,536 characters), and
    a sibling with disable-model-invocation is not listed at all."""
    from pytest_skilltrigger.skills.catalog import load_targets

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "skills"
    long_when = "Use it for quarterly <reports> & ledgers, " * 40  # pushes past 1,536
    skills = {
        SKILL: (
            "---\nname: pdf-tools\ndescription: |\n  Merge and split <PDF> files.\n"
            f"  Second line of the description.\nwhen_to_use: {json.dumps(long_when)}\n"
            "license: MIT\n---\n\n# PDF tools\n\nReal body.\n"
        ),
        SIBLING: f"---\nname: {SIBLING}\ndescription: {SIBLING_DESCRIPTION}\n"
        "when_to_use: When a CSV file is broken.\n---\n\n# CSV\n",
        "hidden-tool": "---\nname: hidden-tool\ndescription: Never listed.\n"
        "disable-model-invocation: true\n---\n\n# Hidden\n",
    }
    for name, text in skills.items():
        (root / name / "evals").mkdir(parents=True)
        (root / name / "SKILL.md").write_text(text, encoding="utf-8")
        (root / name / "evals" / "trigger-eval.json").write_text(
            json.dumps([{"query": "merge the reports", "should_trigger": True}])
        )
    target = next(t for t in load_targets([str(root)]) if t.name == SKILL)
    tested = "Merge, split and rotate PDF documents.\nA second line."
    context = target.context(tested)
    fake_api.script("merge the quarterly reports", ["text"])
    backend = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    try:
        outcome = backend.run(context, "merge the quarterly reports")
    finally:
        backend.close()
    assert outcome.status == "not_triggered", outcome.error
    (body,) = first_turns(fake_api)
    lines = listing_lines(body)
    ours = {s.name: s.line.split(": ", 1)[1] for s in context.listing()}
    assert lines[SKILL] == ours[SKILL]
    assert lines[SKILL].endswith("\u2026") and "&lt;reports&gt;" in lines[SKILL]
    assert lines[SIBLING] == ours[SIBLING]
    assert "hidden-tool" not in lines and "hidden-tool" not in ours
    texts = [t for m in body["messages"] for t in _texts(m.get("content"))]
    block = next(t for t in texts if f"- {SKILL}: " in t)  # the skill listing
    names = [ln[2:].split(": ", 1)[0] for ln in block.splitlines() if ln.startswith("- ")]
    names = names[names.index(SIBLING) :]  # (the agent listing may come first)
    # the project's skills first, sorted by name, then the built-ins
    assert names[:2] == [SIBLING, SKILL] and len(names) > 2


def test_a_captured_request_is_replayed_through_the_api_as_the_cli_sends_it(
    fake_api: FakeMessagesAPI, claude_bin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--trigger-context claude-code: the CLI's own request, captured once on a loopback
    recorder, is sent through the SDK with only the query replaced. For the same skill and
    query it has the CLI's tools, thinking, message roles, listing and beta headers; a second
    session reads the capture from the store and starts no CLI."""
    from pytest_skilltrigger.backends.api.backend import AnthropicBackend
    from pytest_skilltrigger.backends.capture import Captures
    from pytest_skilltrigger.engine.store import ResultStore

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    context = TriggerContext(SKILL, DESCRIPTION, (ListedSkill(SIBLING, SIBLING_DESCRIPTION),))
    query = 'merge the "quarterly" pdf reports \u2014 all of them'
    fake_api.script(query, [f"skill:{SKILL}", f"skill:{SKILL}"])
    store = ResultStore(str(tmp_path / "store.sqlite"))
    cli = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    replaying = AnthropicBackend(timeout=60, captures=Captures(lambda: cli, store))
    try:
        replayed = replaying.run(context, query)
        key = replaying.context_key(context)
        direct = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
        try:
            own = direct.run(context, query)
        finally:
            direct.close()
    finally:
        replaying.close()
    assert replayed.status == own.status == "triggered", (replayed.error, own.error)
    assert replayed.model == own.model
    sent = list(zip(fake_api.requests, fake_api.request_headers, strict=True))
    # ours: the SDK's; theirs: the CLI's own request that offers the skills (not a side one)
    ((ours, ours_headers),) = [
        (b, h) for b, h in sent if h["user-agent"].startswith("Anthropic/Python")
    ]
    theirs, theirs_headers = next(
        (b, h)
        for b, h in sent
        if h["user-agent"].startswith("claude-cli/") and b in first_turns(fake_api)
    )
    assert ours_headers["anthropic-beta"] == theirs_headers["anthropic-beta"]
    assert [t["name"] for t in ours["tools"]] == [t["name"] for t in theirs["tools"]]
    assert ours["thinking"] == theirs["thinking"] and ours["max_tokens"] == theirs["max_tokens"]
    assert [m["role"] for m in ours["messages"]] == [m["role"] for m in theirs["messages"]]
    assert listing_lines(ours)[SKILL] == listing_lines(theirs)[SKILL] == DESCRIPTION
    assert listing_lines(ours).keys() == listing_lines(theirs).keys()
    assert ours["messages"][0]["content"][-1]["text"] == query  # spliced in exactly
    assert "SKILLTRIGGER-QUERY" not in json.dumps(ours)

    # the next session finds the capture in the store: no CLI is started for it
    def no_cli(*_args: object) -> None:
        raise AssertionError("the stored capture should have been used")

    again_cli = ClaudeCodeBackend(timeout=90, claude_bin=claude_bin)
    monkeypatch.setattr(again_cli, "capture", no_cli)
    again = AnthropicBackend(timeout=60, captures=Captures(lambda: again_cli, store))
    try:
        assert again.context_key(context) == key
    finally:
        again.close()
        store.close()


def test_the_plugin_names_the_captured_context_and_runs_it(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, claude_bin: str
) -> None:
    skills = pytester.path / "skills"
    folder = skills / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, DESCRIPTION), encoding="utf-8")
    rows = [
        ("combine these three pdf files into one", True, f"skill:{SKILL}"),
        ("what is the weather like on mars", False, "text"),
    ]
    evals = [{"query": q, "should_trigger": s} for q, s, _ in rows]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals), encoding="utf-8")
    for query, _should, outcome in rows:
        fake_api.script(query, [outcome])
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={skills}",
        "--trigger-backend=anthropic",
        "--trigger-context=claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-runs=1",
        "--trigger-cache=off",
        timeout=240,
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["skilltrigger: context claude-code (captured from the Claude Code CLI 2.1.328)"]
    )
    agents = {h["user-agent"].split("/")[0] for h in fake_api.request_headers}
    assert agents == {"Anthropic"}  # the runs went through the SDK, not the CLI
    assert all(len(body["tools"]) > 4 for body in fake_api.requests)  # the CLI's tools


def test_the_captured_listing_has_the_bare_names_builtin_mode_predicts(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, claude_bin: str
) -> None:
    """Capture mode on claude-haiku-4-5: the CLI itself lists the last five of ten
    ~300-character skills by name alone, the replayed request the server saw says so, and the
    report gives the skill under test as bare, as builtin mode does for the same folder."""
    from tests.plugin.test_listing import write_ten_skills

    skills = pytester.path / "skills"
    query = write_ten_skills(skills)
    fake_api.script(query, ["text"])
    out = pytester.path / "out.json"
    pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={skills / 'skill-009'}",
        "--trigger-backend=anthropic",
        "--trigger-context=claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-model=claude-haiku-4-5",
        "--trigger-runs=1",
        "--trigger-confidence=off",
        "--trigger-cache=off",
        f"--trigger-json={out}",
        timeout=240,
    )
    (replayed,) = [
        b
        for b, h in zip(fake_api.requests, fake_api.request_headers, strict=True)
        if h["user-agent"].startswith("Anthropic/Python")
    ]
    assert [n for n in bare_names(replayed) if n.startswith("skill-")] == [
        f"skill-{i:03d}" for i in range(5, 10)
    ]
    assert json.loads(out.read_text())["skills"][0]["listed"] == "bare"


def test_one_hour_cache_writes_of_the_captured_request_are_priced_apart(
    pytester: pytest.Pytester,
    fake_api: FakeMessagesAPI,
    claude_bin: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CLI asks for one-hour caching when ENABLE_PROMPT_CACHING_1H is set; its captured
    request, replayed, makes the server bill one-hour writes, and the session's cost is the
    server's usage at claude-haiku-4-5's rates (a one-hour write at 2x input, not 1.25x)."""
    from tests.plugin.test_cost_tiers import HAIKU_4_5, billed

    monkeypatch.setenv("ENABLE_PROMPT_CACHING_1H", "1")
    skills = pytester.path / "skills"
    folder = skills / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, DESCRIPTION), encoding="utf-8")
    query = "combine these three pdf files into one"
    (folder / "evals" / "trigger-eval.json").write_text(
        json.dumps([{"query": query, "should_trigger": True}]), encoding="utf-8"
    )
    fake_api.script(query, [f"skill:{SKILL}"])
    out = pytester.path / "out.json"
    pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={skills}",
        "--trigger-backend=anthropic",
        "--trigger-context=claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-model=claude-haiku-4-5",
        "--trigger-runs=3",
        "--trigger-confidence=off",
        "--trigger-cache=off",
        f"--trigger-json={out}",
        timeout=240,
    ).assert_outcomes(passed=1)
    # the capture's own request was answered by the recorder, not the server: only the
    # replayed runs (two: early stopping settles 2 of 3) reached the server and were billed
    assert len(fake_api.usages) == 2
    # one run wrote the prefix for an hour, the other read it back (in either order)
    assert any(u["cache_creation"]["ephemeral_1h_input_tokens"] > 0 for u in fake_api.usages)
    assert any(u["cache_read_input_tokens"] > 0 for u in fake_api.usages)
    totals = json.loads(out.read_text())["totals"]
    assert totals["calls"] == 2
    assert totals["cost_usd"] == round(sum(billed(u, HAIKU_4_5) for u in fake_api.usages), 6)


def test_a_batch_sends_the_captured_request_whole(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, claude_bin: str
) -> None:
    """--trigger-batch with the captured context: each batch request is the live replay of
    the CLI's own request (its tools, thinking, roles, caching markers and the spliced
    query), not streamed and with max_tokens capped above the thinking budget; the CLI's
    betas go with the batch."""
    from pytest_skilltrigger.backends.api.message_batches import DECISION_MAX_TOKENS

    skills = pytester.path / "skills"
    folder = skills / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, DESCRIPTION), encoding="utf-8")
    query = "combine these three pdf files into one"
    evals = [{"query": query, "should_trigger": True}]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals), encoding="utf-8")
    common = (
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={skills}",
        "--trigger-backend=anthropic",
        "--trigger-context=claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-runs=1",
        "--trigger-confidence=off",  # one run, the reference rule
        "--trigger-within=first-call",  # as a batch judges a run: the same context
        # the capture is stored and replayed by both runs; the runs are made afresh
        "--trigger-cache=refresh",
        f"--trigger-store={pytester.path / 'store.sqlite'}",
    )
    fake_api.script(query, [f"skill:{SKILL}"])
    pytester.runpytest_subprocess(*common, timeout=240).assert_outcomes(passed=1)
    (live,) = fake_api.requests
    (live_headers,) = fake_api.request_headers
    fake_api.script(query, [f"skill:{SKILL}"])
    batch = pytester.runpytest_subprocess(
        *common, "--trigger-batch", "--trigger-batch-poll=0.05", timeout=240
    )
    batch.assert_outcomes(passed=1)
    assert fake_api.stats["trigger_calls"] == 1  # the live run's only: the capture is local
    (params,) = fake_api.batch_requests_log
    budget = (live.get("thinking") or {}).get("budget_tokens") or 0
    assert live["stream"] is True and len(live["tools"]) > 4  # the CLI's request
    assert params.keys() == live.keys() - {"stream"}
    assert params["max_tokens"] == min(live["max_tokens"], DECISION_MAX_TOKENS + budget)
    assert params == {k: v for k, v in live.items() if k not in ("stream", "max_tokens")} | {
        "max_tokens": params["max_tokens"]
    }
    assert any(b.get("cache_control") for b in params["system"])  # caching markers kept
    (headers,) = fake_api.batch_headers
    assert headers["anthropic-beta"] == live_headers["anthropic-beta"]


def test_under_xdist_the_controller_captures_and_stores_the_request(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, claude_bin: str
) -> None:
    """Workers store nothing: the controller captures each skill's request once, before
    they start, and stores it, so they (and the next session) replay it."""
    import sqlite3

    skills = pytester.path / "skills"
    folder = skills / SKILL
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_file(SKILL, DESCRIPTION), encoding="utf-8")
    queries = [f"combine these {n} pdf files into one" for n in ("two", "three", "four")]
    evals = [{"query": q, "should_trigger": True} for q in queries]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(evals), encoding="utf-8")
    for query in queries:
        fake_api.script(query, [f"skill:{SKILL}"])
    store = pytester.path / "store.sqlite"
    result = pytester.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        f"--trigger-skill-path={skills}",
        "--trigger-backend=anthropic",
        "--trigger-context=claude-code",
        f"--trigger-claude-bin={claude_bin}",
        "--trigger-runs=1",
        f"--trigger-store={store}",
        timeout=240,
    )
    result.assert_outcomes(passed=3)
    with sqlite3.connect(store) as db:
        (captures,) = db.execute("SELECT COUNT(*) FROM captures").fetchone()
    assert captures == 1
