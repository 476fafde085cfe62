"""Asking the model a plain question (the optimizer's proposals, a drafted eval set).

Through the Messages API when credentials are configured (a plain request is cheaper and
faster than a CLI process), else through the trigger backend; every question is funded
against the budget before it is sent, for the longest answer it may get. A question the
claude-code backend answers is a CLI process like a run: it takes a slot of the same runs in
flight (drafts ask several at once), so the machine's limit holds for both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from pytest_skilltrigger.backends import BackendUnavailable, TriggerBackend
from pytest_skilltrigger.backends.base import ASK_MAX_TOKENS, Answer
from pytest_skilltrigger.engine.concurrency import Concurrency
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.model.outcome import Usage
from pytest_skilltrigger.model.prices import Calls
from pytest_skilltrigger.support.errors import AskError


class Asker:
    """Asks on the backend ``make`` makes for asking (the session's factory chooses it by
    :func:`~pytest_skilltrigger.backends.backend_choice`), made on first use (drafts ask from
    several threads at once)."""

    def __init__(
        self,
        guard: CostGuard,
        trigger_backend: TriggerBackend,
        *,
        make: Callable[[], TriggerBackend],
        cli_slots: Concurrency | None = None,
    ) -> None:
        self.guard = guard
        self.trigger_backend = trigger_backend
        self.make = make
        # the lanes' one limit when their runs are processes: a question the trigger
        # backend's CLI answers is a process like a run, and takes one of its slots
        self.cli_slots = cli_slots
        self._backend: TriggerBackend | None = None
        self._lock = threading.Lock()

    def backend(self) -> TriggerBackend:
        with self._lock:
            if self._backend is None:
                self._backend = self.make()
            return self._backend

    def ask(self, prompt: str, model: str | None, phase: str) -> tuple[str, Usage]:
        """The answer and its usage, counted under ``phase``; AskError when it fails or the
        budget cannot fund it."""
        backend = self.backend()
        model = model or backend.model
        # the prompt as input and the longest answer: the budget holds the worst case
        worst = Usage(
            input_tokens=len(prompt.encode("utf-8")) // 3 + 1, output_tokens=ASK_MAX_TOKENS
        )
        reserved = self.guard.estimate_usd(worst, model)
        if not self.guard.reserve(reserved):
            raise AskError(budget_reached(self.guard.budget_usd))
        try:
            with self._slot(backend):
                answer = backend.ask(prompt, model=model)
        except AskError as exc:  # what was sent is counted all the same
            self.guard.settle(reserved, _paid(exc, Usage(), phase, model))
            raise
        self.guard.settle(reserved, _paid(answer, answer.usage, phase, model))
        return answer.text, answer.usage

    def _slot(self, backend: TriggerBackend) -> AbstractContextManager[object]:
        """A slot of the runs in flight when the trigger lanes' CLI answers (else none)."""
        if backend is self.trigger_backend and self.cli_slots is not None:
            return self.cli_slots.slot()
        return nullcontext()

    def close(self) -> None:
        if self._backend is not None and self._backend is not self.trigger_backend:
            self._backend.close()


def _paid(asked: Answer | AskError, usage: Usage, phase: str, model: str) -> Calls:
    """What a question cost, answered or not: its requests, its waits and its 429s."""
    return Calls(
        usage, asked.requests, phase, model, waited=asked.waited, rate_limited=asked.rate_limited
    )


def unavailable(reason: str | None) -> BackendUnavailable:
    """The error a session without a backend raises when asked to run."""
    return BackendUnavailable(reason or "no backend")
