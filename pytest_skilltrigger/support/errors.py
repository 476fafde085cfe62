"""Errors the engine raises for bad input.

Every problem with something the user wrote (an eval file, a SKILL.md, an option) is an
``InputError`` whose message is one line naming the file (and entry) and the problem. The
pytest layer turns it into a usage error without a traceback, before anything is written.
"""

from __future__ import annotations

import os


class InputError(Exception):
    """Bad user input: the message is a single line, ``<file>: <problem>``."""

    def __init__(self, where: str | os.PathLike[str] | None, problem: str) -> None:
        self.where = os.fspath(where) if where is not None else None
        self.problem = " ".join(problem.split())
        super().__init__(f"{self.where}: {self.problem}" if self.where else self.problem)


class AskError(Exception):
    """The improve model could not be asked (API or CLI failure); the message is redacted.
    ``requests`` is how many requests were sent all the same (they are counted), with the
    seconds it waited for the rate limit and the 429s it met."""

    def __init__(
        self, message: str, requests: int = 0, waited: float = 0.0, rate_limited: int = 0
    ) -> None:
        super().__init__(message)
        self.requests = requests
        self.waited = waited
        self.rate_limited = rate_limited
