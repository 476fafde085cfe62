"""The one small interface every trigger backend implements.

A backend asks the model once whether it would use the skill for a query and reports a
:class:`~pytest_skilltrigger.engine.outcome.RunOutcome`: triggered, not triggered (with what it
chose instead) or error. Sampling, concurrency, the store and verdicts live elsewhere, so a backend
stays a thin adapter that is easy to add and to test.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage


@runtime_checkable
class TriggerBackend(Protocol):
    """``run`` must be thread-safe: the sampler calls it from many threads at once."""

    name: str
    model: str

    def context_key(self, context: TriggerContext) -> str:
        """Hash of the full request context (listing, competitors, prompt, model)."""
        ...

    def estimate(self, context: TriggerContext, query: str) -> Usage:
        """The usage one run is expected to have, known before it is sent (the budget
        reserves its cost): err on the high side."""
        ...

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        """Ask once; never raise for API or process failures: return an error outcome."""
        ...

    def ask(self, prompt: str, model: str | None = None) -> tuple[str, Usage, int]:
        """Ask a plain question (the optimizer's proposals): the answer's text, its usage and
        the requests sent. Raises :class:`~pytest_skilltrigger.support.errors.AskError` on
        failure, carrying the requests sent all the same."""
        ...

    def close(self) -> None:
        """Release connections, processes and temporary folders."""
        ...


class BackendUnavailable(Exception):
    """No backend can run here (no credentials, no CLI); items skip with this reason."""
