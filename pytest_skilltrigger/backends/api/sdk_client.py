"""The one SDK client a session shares, and what its event hooks do for a run in progress.

Credentials and the base URL follow the SDK's own rules (``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, profiles). The SDK is imported and its client
made on the first call: a run served from the store never pays for the import.

Everything goes through the SDK's public interface: its client on its own HTTP client and
pool (authentication, headers, keep-alive, proxies, TLS, retries with back-off, status
errors), requests through ``messages.with_streaming_response``. The HTTP client's event hooks
see every attempt, the SDK's retries included: the request hook counts it for the run in
progress on that thread and gives it only the run's remaining time; the response hook notes
that the endpoint answered and keeps the SDK from waiting out a ``retry-after`` longer than
the run has left.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.backends.api.request import ApiRequest

if TYPE_CHECKING:  # the SDK itself is imported on the first call (a second of CPU)
    import httpx2
    from anthropic import Anthropic

#: told the model, headers and status of every response of a run or a question (the rate
#: limiter reads them; a message batch's calls have their own limits and are not told)
ResponseWatcher = Callable[[str, Mapping[str, str], int], None]


def credentials_configured() -> bool:
    """True when the SDK would find credentials (env key or token, or a configured profile)."""
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return True  # the common case, decided without importing the SDK
    # deferred: the SDK is heavy to import, and loads with the first call
    import anthropic

    try:
        client = anthropic.Anthropic(max_retries=0)
    except Exception:  # any failure here means "not configured"
        return False
    try:
        return bool(client.api_key or client.auth_token or client.credentials)
    finally:
        client.close()


def _import_sdk() -> ModuleType:
    """``import anthropic`` with the garbage collector paused, then its objects moved out of
    the collector's generations (``gc.freeze``).

    Why: the import builds a heap of some hundred thousand objects (its types), and with the
    collector on it runs hundreds of collections of its own garbage meanwhile. Those objects
    live as long as the process; left in the generations, every later full collection (in the
    run loop, pytest's at unconfigure, the interpreter's at exit) walks them again. Measured by
    ``benchmarks/bench_client_cpu.py``."""

    enabled = gc.isenabled()
    gc.disable()
    try:
        # deferred: the SDK is heavy to import, and loads with the first call
        import anthropic
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return anthropic


@dataclass
class RunState:
    """One run (or question) in progress on a thread: its model, its deadline, the requests
    it has sent, the 429s it met and the time it waited for the rate limit (which does not
    count against its deadline)."""

    deadline: float
    model: str = ""
    sent: int = 0
    refused: int = 0
    waited: float = 0.0
    gave_up_waiting: float | None = None  # a retry-after the run had no time for

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def wait_out(self, seconds: float) -> None:
        """Time spent waiting for the rate limit: counted apart, not against the deadline."""
        self.waited += seconds
        self.deadline += seconds


class SdkClient:
    """The SDK's client, made on first use, shared by every thread of the session."""

    def __init__(
        self,
        timeout: float,
        max_retries: int,
        *,
        paced: bool = False,
        watcher: ResponseWatcher | None = None,
    ) -> None:
        self.timeout = timeout
        self.max_retries = max_retries
        self.closed = threading.Event()
        #: set once the endpoint has answered anything (an error status included)
        self.answered = threading.Event()
        #: told of every response's model, headers and status
        self.watcher = watcher
        #: whether the rate limiter waits out a 429 (then the SDK does not retry it itself)
        self.paced = paced
        self._client: Anthropic | None = None
        self._sdk: ModuleType | None = None
        self._by_retries: dict[int, Anthropic] = {}
        self._known: dict[bool, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()  # the run in progress on this thread

    def client(self, max_retries: int | None = None) -> Anthropic:
        """The shared client (with ``max_retries`` retries: a copy sharing its pool, made
        once per count), created on first use."""
        with self._lock:
            if self._client is None:
                anthropic = _import_sdk()
                self._sdk = anthropic
                http_client = anthropic.DefaultHttpxClient(
                    event_hooks={"request": [self._on_request], "response": [self._on_response]}
                )
                self._client = anthropic.Anthropic(
                    max_retries=self.max_retries, timeout=self.timeout, http_client=http_client
                )
            if max_retries is None or max_retries == self.max_retries:
                return self._client
            if max_retries not in self._by_retries:
                self._by_retries[max_retries] = self._client.with_options(max_retries=max_retries)
            return self._by_retries[max_retries]

    def sdk(self) -> ModuleType:
        """The ``anthropic`` module (imported with the client, on first need)."""
        self.client()
        assert self._sdk is not None  # the client's first use imported it
        return self._sdk

    @property
    def base_url(self) -> str:
        return str(self._client.base_url) if self._client is not None else ""

    def stream(self, request: ApiRequest, max_retries: int, timeout: float) -> Any:
        """The streamed response of one request, as a context manager (leaving it closes the
        response): ``messages.with_streaming_response.create`` (its beta twin for a captured
        CLI request), with what the SDK does not name as its own parameters in the body."""
        client = self.client(max_retries)
        messages = client.beta.messages if request.beta else client.messages
        known = self._parameters(request.beta, messages.create)
        params = {k: v for k, v in request.params.items() if k in known}
        extra = {k: v for k, v in request.params.items() if k not in known}
        return messages.with_streaming_response.create(
            **params,
            extra_body=extra or None,
            extra_headers=dict(request.headers) or None,
            extra_query={"beta": "true"} if request.beta else None,
            timeout=timeout,
        )

    def _parameters(self, beta: bool, create: Callable[..., Any]) -> frozenset[str]:
        """The parameters ``create`` names (read once from its public signature)."""
        if beta not in self._known:
            names = inspect.signature(create).parameters
            self._known[beta] = frozenset(n for n in names if not n.startswith("extra_"))
        return self._known[beta]

    @contextlib.contextmanager
    def running(self, state: RunState) -> Iterator[RunState]:
        """Count this thread's requests, and bound their time, for ``state`` (a run, or a
        proposal, whose attempts are counted too)."""
        self._local.run = state
        try:
            yield state
        finally:
            self._local.run = None

    def sdk_retries(self, state: RunState) -> int:
        """How many retries the SDK may make in the time left: its back-off waits (0.5 s,
        doubling, at most 8 s) may take at most half of it. Before the endpoint has ever
        answered, one: a refused connection is not worth minutes of waiting (any answer,
        a 429 or a 500 included, shows the endpoint is there)."""
        budget = state.remaining() / 2
        retries, waited = 0, 0.0
        while retries < self.max_retries:
            waited += min(0.5 * 2**retries, 8.0)
            if waited > budget:
                break
            retries += 1
        return retries if self.answered.is_set() else min(retries, 1)

    def _on_request(self, request: httpx2.Request) -> None:
        state: RunState | None = getattr(self._local, "run", None)
        if state is None:
            return
        state.sent += 1
        left = max(state.remaining(), 0.001)
        timeout = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {
            k: left if v is None else min(float(v), left)
            for k, v in {**dict.fromkeys(("connect", "read", "write", "pool")), **timeout}.items()
        }

    def _on_response(self, response: httpx2.Response) -> None:
        self.answered.set()
        state: RunState | None = getattr(self._local, "run", None)
        if state is not None and self.watcher is not None:
            self.watcher(state.model, response.headers, response.status_code)
        if response.status_code == 429:
            if state is not None:
                state.refused += 1
            if self.paced:  # the limiter waits it out, the whole class with it
                response.headers["x-should-retry"] = "false"
                return
        if state is None or response.status_code < 400:
            return
        wait = retry_after(response.headers)
        if wait is not None and wait >= state.remaining():
            response.headers["x-should-retry"] = "false"  # the API's own header, obeyed
            state.gave_up_waiting = wait

    def close(self) -> None:
        """Stop retrying and close the pool, which also aborts calls still in flight."""
        self.closed.set()
        with self._lock:
            if self._client is not None:
                self._client.close()


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a response asks to wait before a retry (``retry-after-ms`` or a number of
    seconds in ``retry-after``), as the SDK reads them; None when it does not say."""
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except ValueError:
        return None
    return None
