"""What git says a branch changed: the files that differ from a revision, for
``--trigger-changed-since``.

A pull request is compared from where it left its base: the merge base of the revision and
``HEAD``, so what the base branch gained since is not taken for the PR's change. Uncommitted
changes count (a run before a commit tests them), as do new files git does not ignore.
"""

from __future__ import annotations

import os
import subprocess

from pytest_skilltrigger.support.errors import InputError

FLAG = "--trigger-changed-since"


def changed_files(folder: str, ref: str) -> frozenset[str]:
    """The real paths of the files that differ between ``ref`` (its merge base with
    ``HEAD``) and the working tree of the repository holding ``folder``: committed since,
    staged, unstaged, deleted, and untracked files git does not ignore. InputError when
    there is no repository or no such revision."""
    top = _git(folder, "rev-parse", "--show-toplevel").strip()
    found = _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if not found:
        raise InputError(
            FLAG,
            f"{ref!r} is not a revision of the repository at {top} (in CI, fetch it first: "
            f"actions/checkout with fetch-depth: 0, or git fetch origin {ref.split('/')[-1]})",
        )
    base = _git(top, "merge-base", found.strip(), "HEAD", check=False).strip() or found.strip()
    names = _git(top, "diff", "--name-only", "-z", "--no-renames", base, "--").split("\0")
    names += _git(top, "ls-files", "--others", "--exclude-standard", "-z").split("\0")
    return frozenset(os.path.realpath(os.path.join(top, name)) for name in names if name)


def _git(folder: str, *args: str, check: bool = True) -> str:
    """git's output in ``folder`` ('' when ``check`` is off and it failed)."""
    try:
        done = subprocess.run(
            ["git", "-C", folder, *args], capture_output=True, text=True, timeout=60
        )
    except FileNotFoundError:
        raise InputError(FLAG, "needs git, which is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise InputError(FLAG, f"git {args[0]} took over a minute in {folder}") from None
    if done.returncode == 0:
        return done.stdout
    if not check:
        return ""
    said = " ".join(done.stderr.split()) or f"exit {done.returncode}"
    raise InputError(FLAG, f"git {args[0]} in {folder}: {said}")
