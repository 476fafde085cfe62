"""Keeping to the organisation's rate limits: requests, input and output tokens a minute.

The API enforces its limits as token buckets per model class (Opus, Sonnet, Haiku), and every
response states them: ``anthropic-ratelimit-*-limit``, ``-remaining`` and ``-reset`` (when the
bucket is full again). The limiter keeps the same buckets from those headers (and from
``--trigger-rate-limit``, before the first answer or below what the key allows) and holds a
request back until it fits, instead of sending it to be refused. Input tokens count as the
API counts them: uncached input and cache writes; cache reads only for the models that count
them. On a 429 every request of the class waits out ``retry-after`` and the process halves
the requests it keeps in flight, then adds them back one at a time (additive increase,
multiplicative decrease). The buckets live in a :class:`LimitStore`: in memory, or in a file
that the xdist workers of one session share under a lock, so that they keep one limit.

The API may enforce a minute's limit over a shorter interval ("60 RPM may be enforced as one
request a second"), which the headers do not state, and ramping up too fast can meet
"acceleration" 429s. So a class starts slowly: one request in flight, one more for each
answer (doubling each round trip), until its first refusal; a first wave of many requests at
once, before any header is known, would meet a limit kept over a second almost whole. A 429
the headers did not predict (requests and tokens still remaining) says the limits are kept
over a shorter interval: from then on each of the class's buckets holds at most a second's
refill, so requests go out evenly at the same rate instead of in bursts. A request is charged
in full: a bucket may owe what a large one took beyond its capacity, and the next waits
until it is paid back.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pytest_skilltrigger.backends.api.sdk_client import retry_after
from pytest_skilltrigger.model.rate_limits import RESOURCES, Limits, RateLimitSetting

WINDOW = 60.0  # seconds a bucket takes to fill from empty, as the API states its limits
TOKEN_ROUNDING = 1000  # the API rounds a token count's remaining down to the thousand
SURE_RESET = 0.02  # seconds: a nearer reset says too little of the refill rate
NOTICE_EVERY = 30.0  # at most one "waiting on the rate limit" notice in this many seconds
MOST_WINDOW = 64.0  # the largest in-flight window a class grows to
SLOW_START = 1.0  # requests in flight a class starts with (one more for each answer)
SHORT_INTERVAL = 1.0  # seconds: the shortest interval the API's docs say a limit is kept over
# kept over a short interval, every request is near the edge: sent at this share of the rate,
# the server's bucket (charged a little later, on arrival) has always refilled in time
SHORT_PACE = 0.95
# the models whose cache reads count toward the input-token limit (older ones; the API's docs
# mark them): for every other model only uncached input and cache writes count
CACHE_READS_COUNTED = ("claude-3-",)


def model_class(model: str) -> str:
    """The class whose limits a model shares (``opus``, ``sonnet``, ``haiku``), or the model."""
    name = model.lower()
    return next((c for c in ("opus", "sonnet", "haiku") if c in name), name)


def counted_input(model: str, usage: Mapping[str, int]) -> int:
    """The input tokens a request counts toward the input-token limit, as the API counts them."""
    counted = int(usage.get("input_tokens", 0)) + int(usage.get("cache_creation_input_tokens", 0))
    if model.lower().startswith(CACHE_READS_COUNTED):
        counted += int(usage.get("cache_read_input_tokens", 0))
    return counted


@dataclass
class Bucket:
    """One limit's token bucket: ``level`` left of ``limit``, refilling ``rate`` a second."""

    limit: float
    level: float
    rate: float
    at: float  # the wall time ``level`` was read at
    burst: float | None = None  # at most this much at once (a limit kept over a short interval)

    @property
    def capacity(self) -> float:
        """The most the bucket holds: its limit, or its burst when that is learnt."""
        return self.limit if self.burst is None else min(self.limit, self.burst)

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate * max(0.0, now - self.at))
        self.at = now

    def wait_for(self, need: float) -> float:
        """Seconds until ``need`` fits (a need above the capacity fits a full bucket, and
        leaves it owing the rest)."""
        need = min(need, self.capacity)
        short = need - self.level
        return 0.0 if short <= 1e-6 else short / max(self.rate, 1e-9)

    def keep_short(self, window: float) -> None:
        """Hold at most what :data:`SHORT_INTERVAL` refills (one at least) and refill at
        :data:`SHORT_PACE` of the limit's rate (``window``: seconds the limit is stated for)."""
        self.burst = max(1.0, self.limit / window * SHORT_INTERVAL)
        self.rate = self.limit / window * SHORT_PACE
        self.level = min(self.level, self.capacity)


@dataclass
class ClassState:
    """What one model class's limits look like now, shared by the session's processes."""

    buckets: dict[str, Bucket] = field(default_factory=dict)
    blocked_until: float = 0.0  # a 429's retry-after: nothing is sent before it
    window: float = WINDOW  # seconds a bucket takes to fill, as the headers state it
    short: bool = False  # a 429 showed the limits are kept over a shorter interval
    # whether a reset time has said the window: later ones can only lengthen it (the time an
    # answer takes to arrive makes a reset look nearer than it is, never farther)
    learnt: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "buckets": {k: asdict(b) for k, b in self.buckets.items()},
            "blocked_until": self.blocked_until,
            "window": self.window,
            "short": self.short,
            "learnt": self.learnt,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClassState:
        buckets = {k: Bucket(**v) for k, v in dict(data.get("buckets") or {}).items()}
        return cls(
            buckets,
            float(data.get("blocked_until", 0.0)),
            float(data.get("window", WINDOW)),
            bool(data.get("short", False)),
            bool(data.get("learnt", False)),
        )


T = TypeVar("T")


class LimitStore(Protocol):
    """Where the buckets are kept: :meth:`update` reads them, lets ``change`` change them and
    writes them back, as one step no other process or thread can split."""

    def update(self, change: Callable[[dict[str, ClassState]], T]) -> T: ...


class MemoryLimits:
    """The buckets of one process."""

    def __init__(self) -> None:
        self._classes: dict[str, ClassState] = {}
        self._lock = threading.Lock()

    def update(self, change: Callable[[dict[str, ClassState]], T]) -> T:
        with self._lock:
            return change(self._classes)


class FileLimits:
    """The buckets of a session several processes run, in one JSON file under a lock (the
    xdist controller makes the file and tells its workers where it is)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()  # the file lock is per process: threads queue here

    def update(self, change: Callable[[dict[str, ClassState]], T]) -> T:
        with self._lock, _locked(self.path) as handle:
            handle.seek(0)
            text = handle.read()
            data = json.loads(text) if text.strip() else {}
            classes = {k: ClassState.from_json(v) for k, v in data.items()}
            result = change(classes)
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({k: v.to_json() for k, v in classes.items()}))
            handle.flush()
            return result


@contextlib.contextmanager
def _locked(path: str) -> Iterator[Any]:
    """The file, open for reading and writing, locked against the other processes."""
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            # optional: POSIX only, and only for limits shared between processes
            import fcntl
        except ImportError:  # pragma: no cover - Windows: the processes pace apart
            yield handle
            return
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield handle
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True)
class Need:
    """What one request takes of its class's limits."""

    model: str
    input_tokens: int
    output_tokens: int


@dataclass
class Permit:
    """A request let through: what it was charged, and how long it waited for it."""

    need: Need
    waited: float = 0.0
    charged: bool = False


@dataclass(frozen=True)
class RateLimitNotice:
    """Something a person running the session should know about the limits."""

    model_class: str
    limits: Mapping[str, float]
    waiting: str | None = None  # the limit runs are waiting on, when they are
    short: bool = False  # the limits turned out to be kept over a shorter interval

    def line(self) -> str:
        names = {"requests": "requests", "input-tokens": "input tokens", "output-tokens": "output"}
        shown = ", ".join(f"{v:,.0f} {names[k]}" for k, v in self.limits.items())
        if self.short:
            return (
                f"rate limit ({self.model_class}): refused with room left in the minute, so it "
                f"is kept over a shorter interval: sending evenly ({shown} a minute)"
            )
        if self.waiting:
            return f"rate limit ({self.model_class}): runs are waiting on {self.waiting} ({shown})"
        return f"rate limit ({self.model_class}): {shown} a minute"


class RateLimiter:
    """Paces the session's live requests to the limits (see the module)."""

    def __init__(
        self,
        setting: RateLimitSetting,
        store: LimitStore | None = None,
        *,
        notify: Callable[[RateLimitNotice], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.setting = setting
        self.store = store or MemoryLimits()
        #: told of limits learnt and of runs waiting on them
        self.notify = notify
        #: the wall clock the buckets refill by (a test's own clock makes waits exact)
        self.clock = clock
        self._local = threading.Condition()
        self._in_flight: dict[str, int] = {}
        self._window: dict[str, float] = {}  # requests in flight a class may have (AIMD)
        self._ramped: set[str] = set()  # classes whose slow start a refusal ended
        self._known: set[str] = set()
        self._noticed = 0.0

    @property
    def enabled(self) -> bool:
        return self.setting.enabled

    # -- before a request ------------------------------------------------------------------
    def acquire(self, need: Need, stop: threading.Event) -> Permit:
        """Wait until the request fits every limit of its class (and the class's window of
        requests in flight), then charge it; the permit says how long it was held back."""
        permit = Permit(need)
        if not self.enabled:
            return permit
        started = time.monotonic()
        cls = model_class(need.model)
        held = self._take_slot(cls, stop)
        while not stop.is_set():
            wait = self.charge(need)
            if wait <= 0:
                permit.charged = True
                break
            held = True
            self._waiting(cls)
            stop.wait(min(wait, 1.0))
        permit.waited = time.monotonic() - started if held else 0.0
        return permit

    def charge(self, need: Need) -> float:
        """Charge ``need`` to its class's buckets when it fits now (0), else the seconds
        until it would: the step :meth:`acquire` repeats."""
        cls = model_class(need.model)
        return self.store.update(lambda classes: self._charge(classes, cls, need))

    def _charge(self, classes: dict[str, ClassState], cls: str, need: Need) -> float:
        """Seconds to wait before ``need`` fits, or 0 after charging it."""
        state = classes.setdefault(cls, ClassState())
        now = self.clock()
        self._preset(state, now)
        if state.blocked_until > now:
            return state.blocked_until - now
        wants = {
            "requests": 1,
            "input-tokens": need.input_tokens,
            "output-tokens": need.output_tokens,
        }
        for bucket in state.buckets.values():
            bucket.refill(now)
        wait = max((b.wait_for(wants[k]) for k, b in state.buckets.items()), default=0.0)
        if wait > 0:
            return wait
        for name, bucket in state.buckets.items():
            bucket.level -= wants[name]  # in full: a large request leaves the bucket owing
        return 0.0

    def _preset(self, state: ClassState, now: float) -> None:
        """The ``--trigger-rate-limit`` buckets, before any header is known."""
        for name, limit in self.setting.preset.by_resource().items():
            if name not in state.buckets:
                state.buckets[name] = Bucket(limit, limit, limit / state.window, now)

    def _take_slot(self, cls: str, stop: threading.Event) -> bool:
        """Take one of the class's slots of requests in flight; whether it had to wait for a
        limit (the slow start's first answers are not one: a session without limits waits
        for them too, a moment, and has met no limit)."""
        held = False
        with self._local:
            while self._in_flight.get(cls, 0) >= int(self._window_of(cls)):
                if stop.is_set():
                    break
                held = cls in self._ramped
                self._local.wait(0.5)
            self._in_flight[cls] = self._in_flight.get(cls, 0) + 1
        return held

    def _window_of(self, cls: str) -> float:
        """The requests a class may have in flight: a slow start, then what its answers
        allow (see :meth:`release`)."""
        return self._window.get(cls, SLOW_START)

    def _waiting(self, cls: str) -> None:
        now = time.monotonic()
        if self.notify is None or now - self._noticed < NOTICE_EVERY:
            return
        self._noticed = now
        state = self.store.update(lambda classes: _copy_levels(classes, cls))
        self.notify(RateLimitNotice(cls, state, waiting="its limits"))

    # -- after a request -------------------------------------------------------------------
    def release(self, permit: Permit, usage: Mapping[str, int] | None, refused: bool) -> None:
        """The request is over: its slot is free, its token estimates are corrected with what
        it used (``usage``, as the API reports it), and the window grows (or halves after a
        429)."""
        if not self.enabled:
            return
        cls = model_class(permit.need.model)
        with self._local:
            self._in_flight[cls] = max(0, self._in_flight.get(cls, 0) - 1)
            window = self._window_of(cls)
            if refused:  # the slow start is over
                self._ramped.add(cls)
                window = max(1.0, window / 2)
            elif cls not in self._ramped:  # a slow start: one more for each answer
                window = min(MOST_WINDOW, window + 1)
            else:
                window = min(MOST_WINDOW, window + 1 / window)
            self._window[cls] = window
            self._local.notify_all()
        if usage is not None and permit.charged:
            used = counted_input(permit.need.model, usage), int(usage.get("output_tokens", 0))
            self.store.update(lambda classes: _correct(classes, cls, permit.need, used))

    def observe(self, model: str, headers: Mapping[str, str], status: int) -> None:
        """Take the limits a response states; a 429's ``retry-after`` blocks the class."""
        if not self.enabled:
            return
        cls = model_class(model)
        now = self.clock()
        stated = _stated(headers, now)
        retry = retry_after(headers) if status == 429 else None  # as the SDK reads it
        if not stated and retry is None:
            return
        answer = _Answer(stated, retry, status == 429 and _room_left(stated), now)
        learnt = self.store.update(lambda classes: _adopt(classes, cls, answer, self.setting))
        if learnt and self.notify is not None:
            self.notify(
                RateLimitNotice(cls, self.store.update(lambda c: _copy_levels(c, cls)), short=True)
            )
        if stated and cls not in self._known:
            self._known.add(cls)
            if self.notify is not None:
                limits = {k: v for k, (v, _r, _t) in stated.items()}
                self.notify(RateLimitNotice(cls, _within(limits, self.setting.preset)))


def _room_left(stated: Mapping[str, tuple[float, float, float | None]]) -> bool:
    """Whether a 429's headers still show room in every limit of the minute: a request
    remaining, and tokens well above the thousand they are rounded to (a refusal for tokens
    shows less than a request needs)."""
    requests = stated.get("requests")
    if requests is None or requests[1] < 1:
        return False
    tokens = [left for name, (_l, left, _t) in stated.items() if name != "requests"]
    return all(left >= 2 * TOKEN_ROUNDING for left in tokens)


def _stated(headers: Mapping[str, str], now: float) -> dict[str, tuple[float, float, float | None]]:
    """Each limit a response states: (limit, remaining, seconds until full)."""
    found = {}
    for name in RESOURCES:
        prefix = f"anthropic-ratelimit-{name}"
        limit, left = headers.get(f"{prefix}-limit"), headers.get(f"{prefix}-remaining")
        if limit is None or left is None:
            continue
        try:
            until = _until(headers.get(f"{prefix}-reset"), now)
            found[name] = (float(limit), float(left), until)
        except ValueError:
            continue
    return found


def _until(reset: str | None, now: float) -> float | None:
    if not reset:
        return None
    moment = datetime.fromisoformat(reset.replace("Z", "+00:00"))
    return moment.timestamp() - now


def _within(limits: Mapping[str, float], preset: Limits) -> dict[str, float]:
    """The stated limits, none above what ``--trigger-rate-limit`` allows."""
    ours = preset.by_resource()
    return {k: min(v, ours.get(k, v)) for k, v in limits.items()}


def _window(stated: Mapping[str, tuple[float, float, float | None]]) -> float | None:
    """The seconds a bucket takes to fill from empty, as a response's reset time states it:
    from the limit whose reset says most (furthest ahead, so that the time the answer took to
    arrive does not skew it; a token count, rounded down to the thousand, taken at the middle
    of its thousand). None when no limit says enough."""
    best: tuple[float, float] | None = None  # (seconds until full, window)
    for name, (limit, left, until) in stated.items():
        deficit = limit - left
        if name != "requests":  # rounded down: the true count lies within the thousand
            if deficit < 2 * TOKEN_ROUNDING:
                continue
            deficit -= TOKEN_ROUNDING / 2
        if until is None or until < SURE_RESET or deficit <= 0:
            continue
        if best is None or until > best[0]:
            best = (until, min(WINDOW, max(1.0, until * limit / deficit)))
    return best[1] if best is not None else None


@dataclass(frozen=True)
class _Answer:
    """What one response said of the limits: each stated one (limit, remaining, seconds
    until full), a 429's ``retry-after``, and whether it was a 429 they did not predict."""

    stated: Mapping[str, tuple[float, float, float | None]]
    retry: float | None = None
    unpredicted: bool = False
    at: float = 0.0  # the wall time it was read at


def _adopt(
    classes: dict[str, ClassState], cls: str, answer: _Answer, setting: RateLimitSetting
) -> bool:
    """The class's buckets as a response states them: its limits (within the preset), no more
    left than it says (others may share the key), and the window its requests' reset implies
    (the requests count is exact; the token counts are rounded). After a 429 the headers did
    not predict, every bucket keeps to the short interval; whether that was learnt now."""
    stated, retry = answer.stated, answer.retry
    state = classes.setdefault(cls, ClassState())
    now = answer.at
    window = _window(stated)
    if window is not None:
        state.window = max(state.window, window) if state.learnt else window
        state.learnt = True
    limits = _within({k: v for k, (v, _r, _t) in stated.items()}, setting.preset)
    learnt = answer.unpredicted and not state.short
    state.short = state.short or learnt
    for name, limit in limits.items():
        bucket = state.buckets.get(name)
        if bucket is None:
            bucket = state.buckets[name] = Bucket(limit, limit, limit / state.window, now)
        bucket.refill(now)
        bucket.limit, bucket.rate = limit, limit / state.window
        bucket.level = min(bucket.level, stated[name][1])
    if state.short:
        for bucket in state.buckets.values():
            bucket.keep_short(state.window)
            if retry is not None:  # refused: the short interval's bucket is empty now
                bucket.level = 0.0
    if retry is not None:
        state.blocked_until = max(state.blocked_until, now + retry)
    return learnt


def _correct(classes: dict[str, ClassState], cls: str, need: Need, used: tuple[int, int]) -> float:
    """Give back what a request was charged beyond what it used (or take the rest)."""
    state = classes.get(cls)
    if state is None:
        return 0.0
    for name, (charged, spent) in {
        "input-tokens": (need.input_tokens, used[0]),
        "output-tokens": (need.output_tokens, used[1]),
    }.items():
        bucket = state.buckets.get(name)
        if bucket is not None:
            bucket.level = min(bucket.capacity, bucket.level + charged - spent)
    return 0.0


def _copy_levels(classes: dict[str, ClassState], cls: str) -> dict[str, float]:
    state = classes.get(cls) or ClassState()
    return {k: b.limit for k, b in state.buckets.items()}


def limits_known(store: LimitStore) -> dict[str, dict[str, float]]:
    """Each model class's limits known so far (the headers', within the preset), by class."""
    return store.update(
        lambda classes: {c: _copy_levels(classes, c) for c, s in classes.items() if s.buckets}
    )


def shared_limits_file(folder: str) -> str:
    """A new, empty file for the buckets of a session several processes run."""
    path = os.path.join(folder, "rate-limits.json")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("{}")
    return path


__all__ = [
    "CACHE_READS_COUNTED",
    "FileLimits",
    "Limits",
    "MemoryLimits",
    "Need",
    "Permit",
    "RateLimitNotice",
    "RateLimitSetting",
    "RateLimiter",
    "counted_input",
    "model_class",
]
