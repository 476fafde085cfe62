"""The GitHub Action (``action.yml``): its steps' own scripts, run as the runner runs them
(bash, with the environment the step declares), against a local stand-in of GitHub's REST
API and the stand-in Messages API. The comment step creates the pull request's comment, then
updates the same one; the run step passes the inputs to pytest and writes its exit status."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_skilltrigger.reports.pr_comment import MARKER
from pytest_skilltrigger.support.github_comment import PullRequestComments
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import make_skill

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
TOKEN = "ghs_stand_in_token_0123456789"
REPO, PR = "acme/skills", 7


class GitHubStandIn(ThreadingHTTPServer):
    """The issue-comments part of GitHub's REST API: list (paged), create, update; every
    request must carry the token. What it holds and what it was asked are kept."""

    daemon_threads = True

    def __init__(self, page_size: int = 100) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.comments: list[dict[str, Any]] = []
        self.calls: list[str] = []
        self.page_size = page_size

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def add(self, body: str, user: str = "someone") -> None:
        self.comments.append({"id": 1000 + len(self.comments), "body": body, "user": user})


class _Handler(BaseHTTPRequestHandler):
    server: GitHubStandIn

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, status: int, data: Any) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._answer(401, {"message": "Bad credentials"})
            return False
        return True

    def _body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return str(json.loads(self.rfile.read(length))["body"])

    def do_GET(self) -> None:
        self.server.calls.append(f"GET {self.path}")
        found = re.fullmatch(
            rf"/repos/{REPO}/issues/{PR}/comments\?per_page=\d+&page=(\d+)", self.path
        )
        if not self._authorized():
            return
        if not found:
            self._answer(404, {"message": "Not Found"})
            return
        size, page = self.server.page_size, int(found.group(1))
        self._answer(200, self.server.comments[(page - 1) * size : page * size])

    def do_POST(self) -> None:
        self.server.calls.append(f"POST {self.path}")
        if not self._authorized():
            return
        if self.path != f"/repos/{REPO}/issues/{PR}/comments":
            self._answer(404, {"message": "Not Found"})
            return
        self.server.add(self._body(), user="github-actions[bot]")
        self._answer(201, self.server.comments[-1])

    def do_PATCH(self) -> None:
        self.server.calls.append(f"PATCH {self.path}")
        if not self._authorized():
            return
        found = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", self.path)
        comment = next(
            (c for c in self.server.comments if found and c["id"] == int(found.group(1))), None
        )
        if comment is None:
            self._answer(404, {"message": "Not Found"})
            return
        comment["body"] = self._body()
        self._answer(200, comment)


@pytest.fixture
def github() -> Iterator[GitHubStandIn]:
    server = GitHubStandIn(page_size=2)  # a few comments already make several pages
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def step(name: str) -> dict[str, Any]:
    """The Action's step of that name."""
    return next(s for s in ACTION["runs"]["steps"] if s.get("name") == name)


def run_step(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A step's script, as the runner runs a ``shell: bash`` step (``bash -e``, pipefail),
    with this environment's Python first on PATH."""
    script = step(name)["run"]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env={**os.environ, "PATH": path, **env},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_comment_step_creates_one_comment_then_updates_it(
    github: GitHubStandIn, tmp_path: Path
) -> None:
    github.add("Looks good to me")
    github.add("<!-- another-bot -->\nnot ours")
    github.add("one more")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR}}))
    comment = tmp_path / "comment.md"
    env = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": github.url,
        "COMMENT_PATH": str(comment),
    }
    comment.write_text(f"{MARKER}\n### Skill triggers: gate passed\n")
    first = run_step("Comment on the pull request", env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert "created comment 1003 on pull request #7" in first.stdout
    comment.write_text(f"{MARKER}\n### Skill triggers: gate failed\n")
    second = run_step("Comment on the pull request", env, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "updated comment 1003 on pull request #7" in second.stdout
    ours = [c for c in github.comments if c["body"].startswith(MARKER)]
    assert len(ours) == 1 and ours[0]["body"].endswith("gate failed\n")
    assert [c["body"] for c in github.comments[:3]] == [
        "Looks good to me",
        "<!-- another-bot -->\nnot ours",
        "one more",
    ]
    assert sum(call.startswith("PATCH") for call in github.calls) == 1
    for done in (first, second):
        assert TOKEN not in done.stdout + done.stderr


def test_a_refused_token_is_one_line_without_the_token(
    github: GitHubStandIn, tmp_path: Path
) -> None:
    comment = tmp_path / "comment.md"
    comment.write_text(f"{MARKER}\nbody\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR}}))
    done = run_step(
        "Comment on the pull request",
        {
            "GITHUB_TOKEN": "ghs_wrong",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": github.url,
            "COMMENT_PATH": str(comment),
        },
        tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "skilltrigger: the PR comment was not written: GET "
        f"/repos/{REPO}/issues/{PR}/comments: HTTP 401 "
        '{"message": "Bad credentials"}'
    ]
    assert "ghs_wrong" not in done.stdout + done.stderr


def test_comments_are_found_past_the_first_page(github: GitHubStandIn) -> None:
    for n in range(5):
        github.add(f"comment {n}")
    github.add(f"{MARKER}\nold")
    comments = PullRequestComments(api=github.url, repository=REPO, number=PR, token=TOKEN)
    assert comments.upsert(f"{MARKER}\nnew") == ("updated", 1005)
    assert github.comments[-1]["body"] == f"{MARKER}\nnew"
    assert comments.upsert("no marker line here\n")[0] == "created"


def test_the_run_step_passes_the_inputs_and_writes_the_exit_status(
    fake_api: FakeMessagesAPI, tmp_path: Path
) -> None:
    """The run step in a project: the skill tested with the inputs given, the JSON and the
    comment written, pytest's exit status an output (the step itself passes: the last step
    ends the job with that status, after the comment and the upload)."""
    fake_api.script("merge these two pdf files", ["skill:pdf-tools"] * 20)
    fake_api.script("bake a loaf of bread", ["text"] * 20)
    make_skill(tmp_path, [("merge these two pdf files", True), ("bake a loaf of bread", False)])
    output, runner_temp = tmp_path / "output.txt", tmp_path / "temp"
    runner_temp.mkdir()
    env = {
        "SKILL_PATH": "skills",
        "MIN_ACCURACY": "0.9",
        "BASELINE": "main.json",  # not there (a first run on main): said, not an error
        "FAIL_ON_REGRESSION": "true",
        "CHANGED_SINCE": "",
        "SHARD": "",
        "JSON_PATH": "skilltrigger.json",
        "COMMENT": "true",
        "PYTEST_ARGS": "--trigger-cache=off -p no:randomly",
        "COMMENT_PATH": str(runner_temp / "skilltrigger-comment.md"),
        "GITHUB_OUTPUT": str(output),
        "SKILLTRIGGER_CONTROLS": "off",
    }
    done = run_step("Run the trigger tests", env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "::notice::no baseline at main.json: nothing is compared" in done.stdout
    assert output.read_text() == "exit-code=0\n"
    report = json.loads((tmp_path / "skilltrigger.json").read_text())
    assert [s["skill_name"] for s in report["skills"]] == ["pdf-tools"]
    text = (runner_temp / "skilltrigger-comment.md").read_text()
    assert text.startswith(f"{MARKER}\n### Skill triggers: gate passed")


def test_the_action_declares_what_its_steps_read() -> None:
    """Every input a step reads is declared, and the action installs this very package
    unless told otherwise (the tag of the Action is the version of the plugin)."""
    declared = set(ACTION["inputs"])
    used = set(re.findall(r"inputs\.([a-z-]+)", (ROOT / "action.yml").read_text()))
    assert used <= declared
    install = step("Install pytest-skilltrigger")
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
