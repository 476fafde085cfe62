"""The message batches of a session's lanes (one per model of a matrix): the work each lane's
requests need, and every lane's runner run at once, so that a matrix's models do not wait
for each other (each with its own deadline, from its own first batch).

One lane runs in the calling thread, as always. With several, each runner runs in a daemon
thread of its own. Ctrl-C (and SIGTERM, which the session turns into one) reaches only the
calling thread: it stops every runner, which records what it read and cancels its batches in
flight at its next pause, waits for them a bounded time, and is raised. A runner thread that
fails otherwise (a store that cannot be written, say) stops its own model's lane only: the
reason becomes that lane's fatal error, which its items report, and the other models go on.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence

from pytest_skilltrigger.engine.batch_waves import CANCEL_GRACE, BatchRunner, BatchWork
from pytest_skilltrigger.engine.sampler import Sampler
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.plan import SamplingPlan
from pytest_skilltrigger.skills.evalset import EvalEntry

STOP_WAIT = CANCEL_GRACE + 30.0  # how long Ctrl-C waits for the stopped runners to cancel
# the thread each runner last ran in (a runner is kept for the session, a thread is not)
_THREADS: weakref.WeakKeyDictionary[BatchRunner, threading.Thread] = weakref.WeakKeyDictionary()


def works_of(
    sampler: Sampler,
    requests: Sequence[tuple[TriggerContext, EvalEntry, SamplingPlan]],
    context_key: Callable[[TriggerContext], str | None],
) -> list[BatchWork]:
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
) -> None:
    """Run every lane's batches at once (see the module); ``thread_done`` is called by each
    lane's thread as it ends (to close what it opened: its store connection). One lane runs
    in the calling thread, exactly as a session of one model always has."""
    for runner, _works in jobs:
        _settle(runner)
    if len(jobs) == 1:
        runner, works = jobs[0]
        runner.run(works)
        return
    started: list[threading.Thread] = []
    try:
        for runner, works in jobs:
            thread = threading.Thread(
                target=_run,
                args=(runner, works, thread_done),
                daemon=True,
                name=f"batches-{runner.model}",
            )
            _THREADS[runner] = thread
            thread.start()
            started.append(thread)
        for thread in started:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        for runner, _works in jobs:
            runner.stopping.set()
        deadline = time.monotonic() + STOP_WAIT
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise


def _settle(runner: BatchRunner) -> None:
    """Make ``runner`` ready for a run: a thread of an interrupted earlier run that is still
    cancelling is waited for (a runner never has two), then the stop is over."""
    earlier = _THREADS.get(runner)
    if earlier is not None and earlier.is_alive():
        earlier.join(STOP_WAIT)
        if earlier.is_alive():
            runner.fatal = runner.fatal or "an interrupted batch run is still cancelling"
    runner.stopping.clear()


def _run(
    runner: BatchRunner, works: Sequence[BatchWork], done: Callable[[], None] | None = None
) -> None:
    """One lane's batches in a thread of its own. A stop ends the thread quietly (the calling
    thread raises the interrupt); any other failure becomes the lane's fatal error, which its
    items report, as the exception cannot reach the caller from here."""
    try:
        runner.run(works)
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        if isinstance(exc.__context__, KeyboardInterrupt):  # failed while stopping
            return
        runner.fatal = runner.fatal or f"the message batches failed: {exc}"
    finally:
        if done is not None:
            done()
