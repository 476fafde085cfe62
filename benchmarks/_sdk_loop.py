"""A plain SDK streaming loop: what any client of the Messages API pays a call.

``python _sdk_loop.py SKILL_FOLDER MODEL CALLS THREADS``: the same request bodies the plugin
sends for the skill's queries (its builtin template), sent with ``client.messages.create(...,
stream=True)`` and every event read, from THREADS threads, CALLS calls in all. Run as a child
process by ``bench_client_cpu.py``, which reads its CPU time and counts its calls on the
server. Nothing of the plugin runs but the building of the request bodies, done before the
first call.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anthropic

from pytest_skilltrigger.backends.api.request import builtin_template
from pytest_skilltrigger.skills.catalog import load_targets


def main() -> None:
    folder, model, calls, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    (target,) = load_targets([folder])
    template = builtin_template(target.context(), model)
    # the bodies as the SDK takes them, made before the measured loop
    bodies = [
        {k: v for k, v in template.for_query(e.query).params.items() if k != "stream"}
        for e in target.eval_set.entries
    ]
    client = anthropic.Anthropic(max_retries=6, timeout=30.0)
    left = iter(range(calls))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                n = next(left, None)
            if n is None:
                return
            for _event in client.messages.create(**bodies[n % len(bodies)], stream=True):
                pass

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()


if __name__ == "__main__":
    main()
