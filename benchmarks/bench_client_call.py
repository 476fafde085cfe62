"""Client CPU of one trigger run, without pytest: where target 2's milliseconds go.

The fake server runs in a separate process, so this process's CPU time (``time.process_time``)
is the client's alone. Each variant makes N runs from ``threads`` threads:

    backend        AnthropicBackend.run: the plugin's real path (the SDK's public
                   ``messages.with_streaming_response.create``, its bytes read at byte level
                   only as far as the decision)
    backend-clean  the same against a server sending clean streams (awkward=False: no
                   thinking block, no preamble, no pings, tool input in one fragment), which
                   is closer to the frame count of the real API than the awkward fake
    sdk-stream     ``messages.create(stream=True)`` on the same client, every event read as
                   the SDK decodes it: the plain SDK streaming loop the target compares with
    sdk-lines      ``with_streaming_response`` read with the SDK's line iterator and
                   ``json.loads`` per data line: a lighter hand-written SDK client

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


def sdk_stream(client, context, queries: list[str], n: int, threads: int) -> float:
    """``messages.create(stream=True)`` as most SDK code calls it: every event decoded."""
    from pytest_skilltrigger.backends.api.request import build_request

    def run(i: int) -> None:
        request = build_request(context, queries[i], MODEL)
        for _event in client.messages.create(**request, stream=True):
            pass

    return measure(run, n, threads)


def sdk_lines(client, context, queries: list[str], n: int, threads: int) -> float:
    """``with_streaming_response`` read line by line, each data line parsed as JSON."""
    from pytest_skilltrigger.backends.api.request import build_request

    def run(i: int) -> None:
        request = build_request(context, queries[i], MODEL)
        with client.messages.with_streaming_response.create(**request, stream=True) as resp:
            for line in resp.iter_lines():
                if line.startswith("data:"):
                    json.loads(line[5:])

    return measure(run, n, threads)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--calls", type=int, default=None)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args(argv)
    n = args.calls or (150 if args.quick else 600)

    os.environ["ANTHROPIC_API_KEY"] = "test-key"
    os.environ.pop("ANTHROPIC_AUTH_TOKEN", None)
    from pytest_skilltrigger.backends.api.backend import AnthropicBackend
    from pytest_skilltrigger.model.context import TriggerContext

    context = TriggerContext(SKILL_NAME, "Reconcile bank ledgers against invoices.")
    queries = [f"reconcile ledger batch {i} against invoices" for i in range(n + 1)]
    results: dict[str, float] = {}
    for label, clean in (("backend", False), ("backend-clean", True)):
        proc, url = start_server(clean)
        try:
            os.environ["ANTHROPIC_BASE_URL"] = url
            backend = AnthropicBackend(model=MODEL)
            results[label] = measure(
                lambda i, b=backend: b.run(context, queries[i]), n, args.threads
            )
            if not clean:  # the same client and transport, read the SDK's usual ways
                client = backend.connection.client()
                results["sdk-stream"] = sdk_stream(client, context, queries, n, args.threads)
                results["sdk-lines"] = sdk_lines(client, context, queries, n, args.threads)
            backend.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    print(f"client CPU per call, {n} calls from {args.threads} threads (no pytest):")
    for label, seconds in results.items():
        print(f"  {label:14s} {seconds * 1000:6.2f} ms")
    ratio = results["backend"] / results["sdk-stream"]
    print(f"backend / plain SDK streaming loop: {ratio:.2f}x (target: at most 1.3x)")
    emit(
        [
            target_row(
                "2a client CPU per call, backend only (no pytest)",
                results["backend"] * 1000,
                5.0,
                "ms",
                f"clean stream {results['backend-clean'] * 1000:.2f} ms, "
                f"plain SDK streaming loop {results['sdk-stream'] * 1000:.2f} ms ({ratio:.2f}x)",
            )
        ]
    )
    return 0


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
