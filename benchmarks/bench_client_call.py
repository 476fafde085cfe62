"""Client CPU of one trigger run, without pytest: where target 2's milliseconds go.

The fake server runs in a separate process, so this process's CPU time (``time.process_time``)
is the client's alone. Each variant makes N runs from ``threads`` threads:

    backend        AnthropicBackend.run: the plugin's real path (SDK, streamed, SSE decide)
    backend-clean  the same against a server sending clean streams (awkward=False: no
                   thinking block, no preamble, no pings, tool input in one fragment), which
                   is closer to the frame count of the real API than the awkward fake
    sdk-json       the SDK without streaming (``with_raw_response``, body parsed as JSON):
                   what a non-streamed request would cost
    httpx-stream   the same streamed request through the SDK's own httpx client but without
                   the SDK's request machinery, to split SDK overhead from HTTP + SSE costs

``--quick``: fewer runs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from _common import MODEL, PYTHON, ROOT, SKILL_NAME, bench_parser, emit, target_row


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(clean: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [PYTHON, "-m", "tests.fake_messages_api", "--port", str(port)]
    if clean:
        cmd.append("--clean")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    return proc, url


def measure(fn: Callable[[int], object], n: int, threads: int) -> float:
    """CPU seconds per call of ``fn`` over ``n`` calls from ``threads`` threads."""
    fn(0)  # warm: connection, lazy imports
    counter = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            fn(i)

    start = time.process_time()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return (time.process_time() - start) / n


def raw_variants(client, url: str, context, queries: list[str], n: int, threads: int):
    """The SDK without streaming, and the stream without the SDK's request machinery."""
    from pytest_skilltrigger.backends.request import build_request
    from pytest_skilltrigger.backends.sse import decide

    def sdk_json(i: int) -> None:
        raw = client.messages.with_raw_response.create(**build_request(context, queries[i], MODEL))
        json.loads(raw.http_response.content)

    http = client._client  # the SDK's own httpx client
    headers = {
        "x-api-key": "test-key",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
    }

    def httpx_stream(i: int) -> None:
        body = json.dumps({**build_request(context, queries[i], MODEL), "stream": True})
        with http.stream("POST", url + "/v1/messages", content=body, headers=headers) as resp:
            lines = resp.iter_lines()
            decide(lines)
            for _ in lines:
                pass

    return {
        "sdk-json": measure(sdk_json, n, threads),
        "httpx-stream": measure(httpx_stream, n, threads),
    }


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args(argv)
    n = args.calls or (150 if args.quick else 600)

    os.environ["ANTHROPIC_API_KEY"] = "test-key"
    os.environ.pop("ANTHROPIC_AUTH_TOKEN", None)
    from pytest_skilltrigger.backends.anthropic_api import AnthropicBackend
    from pytest_skilltrigger.context import TriggerContext

    context = TriggerContext(SKILL_NAME, "Reconcile bank ledgers against invoices.")
    queries = [f"reconcile ledger batch {i} against invoices" for i in range(n + 1)]
    results: dict[str, float] = {}
    for clean in (False, True):
        proc, url = start_server(clean)
        try:
            os.environ["ANTHROPIC_BASE_URL"] = url
            backend = AnthropicBackend(model=MODEL)
            label = "backend-clean" if clean else "backend"
            results[label] = measure(
                lambda i, b=backend: b.run(context, queries[i]), n, args.threads
            )
            if not clean:
                results.update(
                    raw_variants(backend._client, url, context, queries, n, args.threads)
                )
            backend.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    print(f"client CPU per call, {n} calls from {args.threads} threads (no pytest):")
    for label, seconds in results.items():
        print(f"  {label:14s} {seconds * 1000:6.2f} ms")
    emit(
        [
            target_row(
                "2a client CPU per call, backend only (no pytest)",
                results["backend"] * 1000,
                5.0,
                "ms",
                f"clean stream {results['backend-clean'] * 1000:.2f} ms, "
                f"non-streamed SDK {results['sdk-json'] * 1000:.2f} ms",
            )
        ]
    )
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
