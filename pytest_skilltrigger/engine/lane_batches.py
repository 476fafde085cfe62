"""The message batches of a session's lanes (one per model of a matrix): the work each lane's
requests need, and every lane's runner run at once, so that a matrix's models do not wait
for each other (each with its own deadline, from its own first batch).

With several lanes each runner runs in a daemon thread of its own. Ctrl-C (and SIGTERM, which
the session turns into one) reaches only the calling thread: it stops every runner, which
cancels its batches in flight and records what it read at its next pause, waits for them a
bounded time, and is raised. A runner that fails otherwise (a store that cannot be written,
say) stops its own model's lane only: the reason becomes that lane's fatal error, which its
items report, and the other models go on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from pytest_skilltrigger.engine.batch_waves import CANCEL_GRACE, BatchRunner, BatchWork
from pytest_skilltrigger.engine.sampler import Sampler
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.skills.evalset import EvalEntry

STOP_WAIT = CANCEL_GRACE + 30.0  # how long Ctrl-C waits for the stopped runners to cancel


def works_of(
    sampler: Sampler, requests: Sequence[tuple[TriggerContext, EvalEntry, SamplingPlan]],
    context_key: Callable[[TriggerContext], str | None],
) -> list[BatchWork]:  # fmt: skip
    """The batch work of one lane's requests: one per sampling not made or joined yet, with
    the runs stored for it. A context that cannot be prepared (no key) or an unlisted skill
    gets none: submitting it says so without a call."""
    works, seen = [], set()
    for context, entry, plan in requests:
        key = context_key(context)
        if key is None or not context.model_invocable:
            continue
        ident = sampler.ident(key, entry.query, plan, context.skill_name)
        if ident in seen or sampler.sampled(ident):
            continue
        seen.add(ident)
        stored = sampler.stored(key, entry.query, plan, context.skill_name)
        works.append(BatchWork(ident, context, entry.query, plan, stored))
    return works


def run_together(
    jobs: Sequence[tuple[BatchRunner, Sequence[BatchWork]]],
    thread_done: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """Run every lane's batches at once (see the module); ``thread_done`` is called by each
    lane's thread as it ends (to close what it opened: its store connection)."""
    for runner, _works in jobs:
        runner.stopping.clear()  # a stop of an earlier run is over
    if len(jobs) == 1:
        _run(*jobs[0])
        return
    threads = [
        threading.Thread(target=_run, args=(runner, works, True, thread_done), daemon=True,
                         name=f"batches-{runner.model}")
        for runner, works in jobs
    ]  # fmt: skip
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        for runner, _works in jobs:
            runner.stopping.set()
        deadline = time.monotonic() + STOP_WAIT
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise


def _run(runner: BatchRunner, works: Sequence[BatchWork], in_thread: bool = False,
         done: Callable[[], None] | None = None) -> None:  # fmt: skip
    """One lane's batches; a failure other than an interrupt becomes the lane's fatal error.
    In a thread of its own a stop ends the thread quietly: the caller raises it."""
    try:
        runner.run(works)
    except KeyboardInterrupt:
        if not in_thread:
            raise
    except Exception as exc:  # reported on every item of the lane
        runner.fatal = runner.fatal or f"the message batches failed: {exc}"
    finally:
        if in_thread and done is not None:
            done()
