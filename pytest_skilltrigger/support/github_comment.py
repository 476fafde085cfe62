"""Create or update a pull request's one comment, the Action's last step:
``python -m pytest_skilltrigger.support.github_comment comment.md``.

The comment is found by its first line (the marker ``--trigger-pr-comment`` writes): the
first comment of the pull request that starts with it is updated, else one is created, so a
PR that is pushed ten times has one comment. GitHub's REST API is reached with the standard
library, at ``GITHUB_API_URL`` (GitHub Enterprise's too), for ``GITHUB_REPOSITORY`` and the
pull request of ``GITHUB_EVENT_PATH`` (or ``--pr``), with the token of ``GITHUB_TOKEN``,
which is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

DEFAULT_API = "https://api.github.com"


class CommentError(Exception):
    """Why the comment could not be written, in a line with no token in it."""


class PullRequestComments:
    """One pull request's comments through the REST API."""

    def __init__(self, *, api: str, repository: str, number: int, token: str) -> None:
        self._api = api.rstrip("/")
        self._repository = repository
        self._number = number
        self._token = token

    def upsert(self, body: str) -> tuple[str, int]:
        """Update the comment that starts with the body's first line, else create one:
        ``("updated" | "created", its id)``."""
        marker = body.split("\n", 1)[0].strip()
        found = self._find(marker) if marker else None
        if found is not None:
            self._call("PATCH", f"/repos/{self._repository}/issues/comments/{found}", body)
            return "updated", found
        made = self._call("POST", f"/repos/{self._repository}/issues/{self._number}/comments", body)
        return "created", int(made["id"])

    def _find(self, marker: str) -> int | None:
        """The id of the first comment whose body starts with ``marker`` (pages read until
        an empty one: a server may cap a page below what was asked)."""
        page = 1
        while True:
            path = f"/repos/{self._repository}/issues/{self._number}/comments"
            comments = self._call("GET", f"{path}?per_page=100&page={page}")
            if not isinstance(comments, list):
                raise CommentError(f"GET {path}: not a list of comments")
            if not comments:
                return None
            for comment in comments:
                if str(comment.get("body", "")).lstrip().startswith(marker):
                    return int(comment["id"])
            page += 1

    def _call(self, method: str, path: str, body: str | None = None) -> Any:
        data = json.dumps({"body": body}).encode() if body is not None else None
        request = urllib.request.Request(
            self._api + path,
            data=data,
            method=method,
            headers={
                "Accept": "application/vnd.github+json",
                "Authorization": f"Bearer {self._token}",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "pytest-skilltrigger",
                "Content-Type": "application/json",
            },
        )
        where = f"{method} {path.split('?', 1)[0]}"
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            said = error.read(300).decode("utf-8", "replace")
            raise CommentError(f"{where}: HTTP {error.code} {_first_line(said)}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise CommentError(f"{where}: {error}") from None


def pull_request_number(event_path: str | None) -> int | None:
    """The pull request's number in the event that started the workflow (None: not a PR)."""
    if not event_path or not os.path.exists(event_path):
        return None
    with open(event_path, encoding="utf-8") as handle:
        event = json.load(handle)
    number = (event.get("pull_request") or {}).get("number")
    if number is None and (event.get("issue") or {}).get("pull_request"):
        number = event["issue"].get("number")
    return int(number) if number is not None else None


def _first_line(text: str) -> str:
    return " ".join(text.split())[:200]


def main(argv: list[str] | None = None, environ: Mapping[str, str] = os.environ) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_skilltrigger.support.github_comment")
    parser.add_argument("file", help="the comment's Markdown (--trigger-pr-comment's file)")
    parser.add_argument("--pr", type=int, help="the pull request (default: the event's)")
    args = parser.parse_args(argv)
    number = args.pr or pull_request_number(environ.get("GITHUB_EVENT_PATH"))
    if number is None:
        print("skilltrigger: not a pull request: no comment written")
        return 0
    token = environ.get("GITHUB_TOKEN", "")
    repository = environ.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        print("skilltrigger: GITHUB_TOKEN and GITHUB_REPOSITORY are needed", file=sys.stderr)
        return 2
    try:
        with open(args.file, encoding="utf-8") as handle:
            body = handle.read()
    except OSError as error:
        print(f"{args.file}: cannot read the comment: {error.strerror}", file=sys.stderr)
        return 2
    comments = PullRequestComments(
        api=environ.get("GITHUB_API_URL") or DEFAULT_API,
        repository=repository,
        number=number,
        token=token,
    )
    try:
        done, comment_id = comments.upsert(body)
    except CommentError as error:
        print(f"skilltrigger: the PR comment was not written: {error}", file=sys.stderr)
        return 1
    print(f"skilltrigger: {done} comment {comment_id} on pull request #{number}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
