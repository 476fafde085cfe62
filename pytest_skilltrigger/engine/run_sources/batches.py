"""Runs as message batches: the runs samplings ask for, gathered into waves of batches.

Half the price of live runs, and no local limit on runs in flight. :meth:`BatchRuns.drain`
sends what was asked as one wave (a batch, or several where the API's limits say so), waits
for it, hands every answer to its sampling, and goes on while the samplings ask for more:
the next wave holds only the runs of queries still undecided, as live sampling would make
them. A request that errored or expired is sent again in the next wave, at most
:data:`RETRIES` times; an answer cut at the batch request's ``max_tokens`` is sent again with
the live request's own. ``timeout`` is one deadline for every wave, from the first batch.
What a wave read is recorded at once: an interrupt in a later wave must not lose paid runs.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pytest_skilltrigger.backends.base import (
    BatchAnswer,
    BatchClient,
    BatchError,
    BatchingBackend,
    BatchRequest,
)
from pytest_skilltrigger.engine.cost_guard import CostGuard, budget_reached
from pytest_skilltrigger.engine.run_sources import RunJob, Stop
from pytest_skilltrigger.model.context import TriggerContext
from pytest_skilltrigger.model.outcome import RunOutcome, Usage
from pytest_skilltrigger.model.prices import Calls

RETRIES = 2  # further waves a query's failed batch request is sent in
MAX_POLL = 60.0  # the longest pause between two polls of a batch
PROGRESS_EVERY = 5.0  # at most one progress line per batch in this many seconds
RESULT_READS = 3  # tries at reading an ended batch's results (free) before its runs error
CANCEL_GRACE = 30.0  # after a cancel at the timeout, how long to wait for what was processed
STOP_WAIT = CANCEL_GRACE + 30.0  # how long Ctrl-C waits for the stopped lanes to cancel

# told (context key, query, outcomes) of runs worth storing
Recorder = Callable[[str, str, Sequence[RunOutcome]], None]


@dataclass(frozen=True)
class BatchProgress:
    """One poll of one batch, for a person waiting on it."""

    batch_id: str
    wave: int
    succeeded: int
    processing: int
    errored: int  # errored, expired and canceled requests
    elapsed: float
    ended: bool
    model: str | None = None  # a matrix's model (its batches run beside the others')

    def line(self) -> str:
        minutes, seconds = divmod(int(self.elapsed), 60)
        state = "ended" if self.ended else "in progress"
        on = f" on {self.model}" if self.model else ""
        return (
            f"batch {self.batch_id}{on} (wave {self.wave}, {state}): {self.succeeded} succeeded, "
            f"{self.processing} processing, {self.errored} errored, {minutes}m{seconds:02d}s"
        )


@dataclass(frozen=True)
class BatchTiming:
    """How a lane's batches are waited for (``--trigger-batch-poll``, ``-timeout``)."""

    poll: float
    timeout: float


@dataclass(eq=False)
class _JobState:
    """What the batches keep of one sampling across waves."""

    job: RunJob
    retries: int = RETRIES
    dropped: bool = False  # an answer of this wave was dropped, to be asked again
    uncapped: bool = False  # an answer reached the cap: send the live max_tokens from now on
    # what answers dropped for a retry used: paid, so carried onto the next run kept
    carried: Usage = field(default_factory=Usage)
    carried_requests: int = 0
    read: list[RunOutcome] = field(default_factory=list)  # this wave's runs, to record

    def keep(self, outcome: RunOutcome) -> RunOutcome:
        """A run with what the dropped answers before it used."""
        kept = replace(
            outcome,
            usage=outcome.usage + self.carried,
            requests=outcome.requests + self.carried_requests,
        )
        self.carried, self.carried_requests = Usage(), 0
        return kept


@dataclass
class _Wave:
    """One wave's requests and whose runs they are."""

    number: int
    requests: list[BatchRequest] = field(default_factory=list)
    owners: dict[str, tuple[_JobState, float]] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class BatchListeners:
    """Who a lane's batches tell what they read (to store it at once: an interrupt in a
    later wave must not lose paid runs) and how they progress (to show it)."""

    record: Recorder | None = None
    progress: Callable[[BatchProgress], None] | None = None


class BatchRuns:
    """One lane's runs as message batches (see the module)."""

    def __init__(
        self,
        backend: BatchingBackend,
        timing: BatchTiming,
        *,
        guard: CostGuard | None,
        stop: Stop,
        listeners: BatchListeners | None = None,
    ) -> None:
        listeners = listeners or BatchListeners()
        self.client: BatchClient = backend.batches()
        self.estimate: Callable[[TriggerContext, str], Usage] = backend.estimate
        self.model: str | None = backend.model  # whose prices the budget reserves at
        self.timing = timing
        self.guard = guard
        self.stop = stop
        #: told every poll worth showing
        self.progress = listeners.progress
        #: told the runs of each wave worth storing, as soon as they are read
        self.record = listeners.record
        # the thread its last drain ran in, when it ran in one of its own (drain_lanes)
        self._thread: threading.Thread | None = None
        # set from another thread, it stops the drain as Ctrl-C would: at its next pause the
        # batches in flight are cancelled, what was read is recorded, and KeyboardInterrupt
        # is raised (cleared when a drain starts)
        self.stopping = threading.Event()
        self._asked: list[tuple[_JobState, int]] = []
        self._states: weakref.WeakKeyDictionary[RunJob, _JobState] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._started = 0.0  # this drain's start (the elapsed time progress shows)
        self._first: float | None = None  # when the first batch was sent (the deadline's start)

    def ready(self) -> None:
        """Ready to drain: the thread of an interrupted earlier drain that is still
        cancelling is waited for (a lane never has two), then the stop is over."""
        earlier = self._thread
        if earlier is not None and earlier.is_alive():
            earlier.join(STOP_WAIT)
            if earlier.is_alive():
                self.stop.set("an interrupted batch run is still cancelling")
        self.stopping.clear()

    def drain_in_thread(self, done: Callable[[], None] | None = None) -> threading.Thread:
        """Drain in a daemon thread of its own (started, and returned). A stop ends the
        thread quietly (the calling thread raises the interrupt); any other failure stops
        the lane, which its items report, as the exception cannot reach the caller from
        there. ``done`` is called as the thread ends."""

        def run() -> None:
            try:
                self.drain()
            except KeyboardInterrupt:
                pass
            except Exception as exc:
                if not isinstance(exc.__context__, KeyboardInterrupt):  # not while stopping
                    self.stop.set(f"the message batches failed: {exc}")
            finally:
                if done is not None:
                    done()

        self._thread = threading.Thread(target=run, daemon=True, name=f"batches-{self.model}")
        self._thread.start()
        return self._thread

    def request(self, job: RunJob, runs: int) -> None:
        with self._lock:
            state = self._states.get(job)
            if state is None:
                state = self._states[job] = _JobState(job)
            self._asked.append((state, runs))

    # -- the deadline -----------------------------------------------------------------------
    @property
    def expired(self) -> bool:
        """True once the session's batch deadline has passed: no wave is sent again."""
        return self._first is not None and self._left() <= 0

    def _left(self) -> float:
        """Seconds until the deadline (the whole timeout before any batch was sent)."""
        if self._first is None:
            return self.timing.timeout
        return self.timing.timeout - (time.monotonic() - self._first)

    def timeout_reason(self) -> str:
        return (
            f"no batch result within {self.timing.timeout:.0f}s of the session's first batch "
            "(--trigger-batch-timeout)"
        )

    # -- the waves --------------------------------------------------------------------------
    def drain(self) -> None:
        """Send waves until nothing more is asked; KeyboardInterrupt (or :attr:`stopping`)
        cancels what is in flight and propagates, once the runs already read are recorded."""
        self._started = time.monotonic()
        number = 0
        while True:
            with self._lock:
                asked, self._asked = self._asked, []
            if not asked:
                return
            if self.stop.reason:
                _fail_all(asked, self.stop.error())
                continue
            number += 1
            self._send_wave(_Wave(number), asked)

    def _send_wave(self, wave: _Wave, asked: list[tuple[_JobState, int]]) -> None:
        if self.stopping.is_set():  # before anything is reserved against the budget
            raise KeyboardInterrupt
        self._build(wave, asked)
        if not wave.requests:
            return
        if self._left() <= 0:
            self._fail(wave.owners, self.timeout_reason())
            return
        failure = self._run_batches(wave)
        self._record(wave)
        self._settle_retries(wave)
        missing = {c: o for c, o in wave.owners.items() if c not in wave.answered}
        if missing:
            if failure is None:
                timed_out = self._left() <= 0
                reason = "the batch gave no result for this request"
                failure = (self.timeout_reason() if timed_out else reason, False)
            self._fail(missing, *failure)

    def _build(self, wave: _Wave, asked: list[tuple[_JobState, int]]) -> None:
        """The wave's requests, each run's budget reserved at the batch rate; the runs of a
        sampling the budget refuses are dropped (it is skipped)."""
        for number, (state, runs) in enumerate(asked):
            reserved = self._reserve(state.job, runs)
            if reserved is None:
                reason = budget_reached(self.guard.budget_usd if self.guard else None)
                for _ in range(runs):
                    state.job.drop(reason)
                continue
            for run in range(runs):
                custom_id = f"w{wave.number}-q{number}-r{run}"
                request = BatchRequest(
                    custom_id, state.job.context, state.job.query, capped=not state.uncapped
                )
                wave.requests.append(request)
                wave.owners[custom_id] = (state, reserved / runs)

    def _run_batches(self, wave: _Wave) -> tuple[str, bool] | None:
        """Create the wave's batches and read their answers; why the wave failed (and
        whether fatally), or None."""
        ids: list[str] = []
        try:
            if self._first is None:
                self._first = time.monotonic()
            ids = self.client.create(wave.requests)
            for batch_id in ids:
                self._collect(batch_id, wave)
        except KeyboardInterrupt:
            self._record(wave)  # first, what was read is paid: a rerun reuses it
            self._cancel(ids)
            raise
        except Exception as exc:  # a BatchError, or anything the SDK let through
            self._cancel(ids)
            return f"the batch failed: {exc}", isinstance(exc, BatchError) and exc.fatal
        return None

    @staticmethod
    def _settle_retries(wave: _Wave) -> None:
        """One retry spent per wave by each sampling with answers dropped, however many (its
        sampling asks again for the runs it still needs)."""
        for state, _reserved in wave.owners.values():
            if state.dropped:
                state.retries -= 1
                state.dropped = False

    def _collect(self, batch_id: str, wave: _Wave) -> None:
        """Take the batch's answers once it has ended. At the timeout it is cancelled, and
        what it processed before the cancel is still read (it is paid). Reading the results
        is free: a read that fails midway is started again, skipping what was taken."""
        timed_out = not self._wait(batch_id, wave.number)
        if timed_out:
            self._cancel([batch_id])
            if not self._wait(batch_id, wave.number, grace=True):
                return
        contexts = {c: state.job.context for c, (state, _r) in wave.owners.items()}
        for attempt in range(RESULT_READS):
            try:
                for answer in self.client.results(batch_id, contexts):
                    if answer.custom_id in wave.answered:
                        continue
                    if timed_out and answer.outcome.requests == 0:
                        continue  # canceled: the timeout's error, said as such
                    wave.answered.add(answer.custom_id)
                    self._take(wave.owners[answer.custom_id], answer)
                return
            except BatchError as exc:
                if exc.fatal or attempt == RESULT_READS - 1:
                    raise
                time.sleep(self.timing.poll)

    def _wait(self, batch_id: str, wave: int, grace: bool = False) -> bool:
        """Poll with back-off until the batch ends (True), or until the timeout (or, after a
        cancel, the grace period) passes (False). A poll that fails is tried again at the
        next pause: one failed request must not cancel hours of work."""
        pause, shown = self.timing.poll, float("-inf")
        until = time.monotonic() + (CANCEL_GRACE if grace else max(self._left(), 0.0))
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            if self.stopping.wait(min(pause, left)):
                raise KeyboardInterrupt
            pause = max(self.timing.poll, min(pause * 2, MAX_POLL))
            try:
                status = self.client.status(batch_id)
            except BatchError as exc:
                if exc.fatal:
                    raise
                continue
            now = time.monotonic()
            if self.progress is not None and (status.ended or now - shown >= PROGRESS_EVERY):
                shown = now
                errored = status.errored + status.expired + status.canceled
                elapsed = now - self._started
                self.progress(
                    BatchProgress(
                        batch_id,
                        wave,
                        status.succeeded,
                        status.processing,
                        errored,
                        elapsed,
                        status.ended,
                    )
                )
            if status.ended:
                return True

    def _record(self, wave: _Wave) -> None:
        """Hand the runs this wave read to the recorder, each once; never a fresh plan's."""
        states = {id(state): state for state, _r in wave.owners.values()}
        for state in states.values():
            read, state.read = state.read, []
            if self.record is not None and read and not state.job.plan.independent:
                self.record(state.job.context_key, state.job.query, read)

    def _reserve(self, job: RunJob, runs: int) -> float | None:
        """The budget reservation for a wave's runs of a sampling, at the batch rate (None:
        refused, or the sampling is skipped already)."""
        if self.guard is None:
            return 0.0
        if job.skipped:
            return None
        return self.guard.reserve_runs(
            lambda: self.estimate(job.context, job.query), runs, batch=True, model=self.model
        )

    def _take(self, owner: tuple[_JobState, float], answer: BatchAnswer) -> None:
        """Count one answer (every request the API processed is paid, at the batch rate) and
        give it to its sampling. An answer worth another try is dropped while retries are
        left (what it used is carried onto the run kept); one cut at the cap is sent again
        with the live request's ``max_tokens``."""
        state, reserved = owner
        outcome = answer.outcome
        if self.guard is not None:
            calls = Calls(outcome.usage, outcome.requests, state.job.plan.phase, outcome.model)
            self.guard.settle(reserved, replace(calls, batch=True))
        if outcome.fatal:
            self.stop.set(outcome.error or "fatal batch error")
        if answer.capped:
            state.uncapped = True
        if answer.retry and state.retries > 0:
            state.dropped = True
            state.carried = state.carried + outcome.usage
            state.carried_requests += outcome.requests
            state.job.drop()
            return
        kept = state.keep(outcome)
        state.read.append(kept)
        state.job.take(kept)

    def _fail(
        self, owners: dict[str, tuple[_JobState, float]], reason: str, fatal: bool = False
    ) -> None:
        """Requests without an answer: the first of each sampling an error (never a miss),
        the others not made."""
        if fatal:
            self.stop.set(reason)
        failed: set[int] = set()
        for state, reserved in owners.values():
            if self.guard is not None:
                self.guard.settle(reserved, Calls(Usage(), 0, state.job.plan.phase))
            if id(state) in failed:
                state.job.drop()
                continue
            failed.add(id(state))
            error = RunOutcome("error", error=reason, fatal=fatal, requests=0, batch=True)
            state.job.take(state.keep(error))

    def _cancel(self, ids: Sequence[str]) -> None:
        """Cancel batches still running (an interrupt, a timeout, a failure); a failure to
        cancel is not worth a second error."""
        for batch_id in ids:
            try:
                self.client.cancel(batch_id)
            except Exception:
                pass


def _fail_all(asked: Sequence[tuple[_JobState, int]], error: RunOutcome) -> None:
    """Runs asked after the lane stopped: each an error, no call."""
    for state, runs in asked:
        for _ in range(runs):
            state.job.take(error)


# -- every lane's batches at once -----------------------------------------------------------


def drain_lanes(lanes: Sequence[BatchRuns], thread_done: Callable[[], None] | None = None) -> None:
    """Drain every lane's batches at once, so that a matrix's models do not wait for each
    other. One lane drains in the calling thread. With several, each drains in a daemon
    thread; Ctrl-C (and SIGTERM, which the session turns into one) reaches only the calling
    thread: it stops every lane, which records what it read and cancels its batches in flight,
    waits for them a bounded time, and is raised. A lane whose thread fails otherwise (a store
    that cannot be written) stops its own lane only. ``thread_done`` is called by each lane's
    thread as it ends (to close what it opened: its store connection)."""
    for lane in lanes:
        lane.ready()
    if len(lanes) == 1:
        lanes[0].drain()
        return
    started: list[threading.Thread] = []
    try:
        for lane in lanes:
            started.append(lane.drain_in_thread(thread_done))
        for thread in started:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        for lane in lanes:
            lane.stopping.set()
        deadline = time.monotonic() + STOP_WAIT
        for thread in started:
            thread.join(max(0.0, deadline - time.monotonic()))
        raise
