"""The one SDK client a session shares, and what its event hooks do for a run in progress.

Credentials and the base URL follow the SDK's own rules (``ANTHROPIC_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, profiles). The SDK is imported and its client
created on the first call: importing it costs about a second of CPU, which a run served from
the store never needs to pay (``benchmarks/bench_load.py`` prints it).

The client is the SDK's own, on its own HTTP client and pool (authentication, headers,
keep-alive, proxies, TLS, retries with back-off, status errors). Its event hooks see every
attempt the SDK makes, its own retries included: the request hook counts the attempt for the
run in progress on that thread and gives it only the run's remaining time; the response hook
keeps the SDK from waiting out a ``retry-after`` longer than that.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


def credentials_configured() -> bool:
    """True when the SDK would find credentials (env key or token, or a configured profile)."""
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
        return True  # the common case, decided without importing the SDK
    import anthropic

    try:
        client = anthropic.Anthropic(max_retries=0)
    except Exception:  # any failure here means "not configured"
        return False
    try:
        return bool(client.api_key or client.auth_token or client.credentials)
    finally:
        client.close()


@dataclass
class RunState:
    """One run in progress on a thread: its deadline and the requests it has sent."""

    deadline: float
    sent: int = 0
    request: tuple[bytes, str, dict[str, str]] = (b"", "", {})  # body, path, headers
    gave_up_waiting: float | None = None  # a retry-after the run had no time for

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class SdkClient:
    """The SDK's client, made on first use, shared by every thread of the session."""

    def __init__(self, model: str, timeout: float, max_retries: int) -> None:
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.closed = threading.Event()
        self._client: Any = None
        self._sdk: Any = None
        self._lock = threading.Lock()
        self._local = threading.local()  # the run in progress on this thread

    def client(self) -> Any:
        """The shared client, created on first use."""
        with self._lock:
            if self._client is None:
                import anthropic

                self._sdk = anthropic
                http_client = anthropic.DefaultHttpxClient(
                    event_hooks={"request": [self._on_request], "response": [self._on_response]}
                )
                self._client = anthropic.Anthropic(
                    max_retries=self.max_retries, timeout=self.timeout, http_client=http_client
                )
                _warn_if_deprecated(self.model)
            return self._client

    def sdk(self) -> Any:
        """The ``anthropic`` module (imported with the client, on first need)."""
        self.client()
        return self._sdk

    @property
    def base_url(self) -> str:
        return str(self._client.base_url) if self._client is not None else ""

    @contextlib.contextmanager
    def running(self, state: RunState) -> Iterator[RunState]:
        """Count this thread's requests, and bound their time, for ``state`` (a run, or a
        proposal, whose attempts are counted too)."""
        self._local.run = state
        try:
            yield state
        finally:
            self._local.run = None

    def sdk_retries(self, state: RunState, reachable: bool) -> int:
        """How many retries the SDK may make in the time left: its back-off waits (0.5 s,
        doubling, at most 8 s) may take at most half of it. Before the endpoint has ever
        answered, one: a refused connection is not worth minutes of waiting."""
        budget = state.remaining() / 2
        retries, waited = 0, 0.0
        while retries < self.max_retries:
            waited += min(0.5 * 2**retries, 8.0)
            if waited > budget:
                break
            retries += 1
        return retries if reachable else min(retries, 1)

    def _on_request(self, request: Any) -> None:
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

    def _on_response(self, response: Any) -> None:
        state: RunState | None = getattr(self._local, "run", None)
        if state is None or response.status_code < 400:
            return
        wait = retry_after(response.headers)
        if wait is not None and wait >= state.remaining():
            response.headers["x-should-retry"] = "false"  # the SDK obeys this header
            state.gave_up_waiting = wait

    def close(self) -> None:
        """Stop retrying and close the pool, which also aborts calls still in flight."""
        self.closed.set()
        with self._lock:
            if self._client is not None:
                self._client.close()


def _warn_if_deprecated(model: str) -> None:
    """The SDK's own warning for a retired model, once: ``messages.create`` gives it on every
    call, and requests here go through ``client.post``, which does not."""
    try:
        from anthropic.resources.messages.messages import DEPRECATED_MODELS
    except ImportError:  # pragma: no cover - an SDK without the table
        return
    if model in DEPRECATED_MODELS:
        warnings.warn(
            f"The model '{model}' is deprecated and will reach end-of-life on "
            f"{DEPRECATED_MODELS[model]}: trigger results for it will not last "
            "(set --trigger-model to a current model).",
            DeprecationWarning,
            stacklevel=2,
        )


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
