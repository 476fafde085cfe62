"""Benchmark only: the claude-code backend as it ran before processes were kept, a new CLI
process per run, killed at the decision (no interrupt, no rewind).

``bench_local_latency.py`` loads it into its pytest child (``-p _one_process_per_run``, with
this folder on ``PYTHONPATH``) for the row that stands for the default the issue started
from: the CPU count in flight, one process a run. Not part of the package: no user needs it.
"""

from __future__ import annotations

from pytest_skilltrigger.backends.claude_code.process import WarmCli


def _never_settle(self: WarmCli, message_id: str, turn_over: bool) -> bool:
    return False  # not settled: ask() stops the process at once, as each run did before


WarmCli._settle = _never_settle  # type: ignore[method-assign]
