"""The settings of a trigger-testing session, validated once, independent of pytest.

The pytest layer fills this from options and ini keys; a library user builds it directly.
Every bad value is an :class:`InputError` naming the option, raised before anything runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from pytest_skilltrigger.support.errors import InputError

BACKENDS = ("auto", "anthropic", "claude-code")
# which context API runs send: the installed CLI's captured request, our builtin one, or the
# captured one when a claude binary is found
CONTEXTS = ("auto", "claude-code", "builtin")
# use: reuse stored runs and store new ones; refresh: only store; off: neither
CACHE_MODES = ("use", "refresh", "off")
# Claude Code's own default model: trigger behaviour is measured on the model users meet.
DEFAULT_MODEL = "claude-opus-5-5"
MODEL_ENV = "SKILLTRIGGER_MODEL"
STORE_FILE = "results.sqlite"


def default_store_path() -> str:
    """The result store's default: one file in the user's cache folder.

    Not inside the project: pytest's cache folder follows rootdir, which an unlucky command
    line can move (even to ``/``); and results are keyed by the whole request (backend,
    model, context, query), so sharing them across projects and checkouts is safe and saves
    calls. ``XDG_CACHE_HOME`` is honoured (``~/.cache`` otherwise; ``LOCALAPPDATA`` on
    Windows).
    """
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.environ.get("LOCALAPPDATA") if os.name == "nt" else None
    )
    root = base or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "pytest-skilltrigger", STORE_FILE)


@dataclass(frozen=True)
class Settings:
    """Defaults match the reference workflow: 3 runs, threshold 0.5, 30 s a run."""

    runs_per_query: int = 3
    threshold: float = 0.5
    timeout: float = 30.0
    backend: str = "auto"
    model: str | None = None
    concurrency: int | None = None
    curtail: bool = True
    cache_mode: str = "use"
    store_path: str | None = None
    budget_usd: float | None = None
    prices_path: str | None = None
    claude_bin: str | None = None
    trigger_context: str = "auto"
    # Message Batches instead of live streams (API backend): half the price, no local limits
    batch: bool = False
    batch_timeout: float = 4 * 3600.0  # the longest wait for a batch before its runs error
    batch_poll: float = 5.0  # seconds before the first poll; the pause doubles up to a minute

    def validated(self) -> Settings:
        """Return self, or raise InputError naming the option that is out of range."""
        if self.runs_per_query < 1:
            raise InputError("--runs-per-query", f"must be at least 1, got {self.runs_per_query}")
        if not 0.0 <= self.threshold <= 1.0:
            raise InputError("--trigger-threshold", f"must be within 0..1, got {self.threshold}")
        if not math.isfinite(self.timeout) or self.timeout <= 0:
            raise InputError("--trigger-timeout", f"must be positive, got {self.timeout}")
        if self.backend not in BACKENDS:
            raise InputError("--trigger-backend", f"must be one of {', '.join(BACKENDS)}")
        if self.concurrency is not None and self.concurrency < 1:
            raise InputError("--trigger-concurrency", f"must be at least 1, got {self.concurrency}")
        if self.trigger_context not in CONTEXTS:
            raise InputError("--trigger-context", f"must be one of {', '.join(CONTEXTS)}")
        if self.cache_mode not in CACHE_MODES:
            raise InputError("--trigger-cache", f"must be one of {', '.join(CACHE_MODES)}")
        for flag, value in (
            ("--trigger-batch-timeout", self.batch_timeout),
            ("--trigger-batch-poll", self.batch_poll),
        ):
            if not math.isfinite(value) or value <= 0:
                raise InputError(flag, f"must be positive, got {value}")
        if self.batch and self.backend == "claude-code":
            raise InputError(
                "--trigger-batch", "needs the API backend (message batches are an API feature)"
            )
        if self.budget_usd is not None and not (
            math.isfinite(self.budget_usd) and self.budget_usd >= 0
        ):
            raise InputError(
                "--trigger-budget-usd", f"must be a number >= 0, got {self.budget_usd}"
            )
        return self

    @property
    def active_store(self) -> str | None:
        """The result store's path when runs are stored or reused (None: off)."""
        return self.store_path if self.cache_mode != "off" else None

    def resolved_model(self, default: str) -> str:
        """The model id: the option, else ``SKILLTRIGGER_MODEL``, else the backend's default."""
        return self.model or os.environ.get(MODEL_ENV) or default


@dataclass(frozen=True)
class OptimizerSettings:
    """The improvement rounds' settings; defaults are the reference tool's."""

    holdout: float = 0.4
    max_iterations: int = 5
    seed: int = 42
    improve_model: str | None = None

    def validated(self) -> OptimizerSettings:
        if not 0.0 <= self.holdout < 1.0:
            raise InputError("--holdout", f"must be within 0..1 (below 1), got {self.holdout}")
        if self.max_iterations < 1:
            raise InputError("--max-iterations", f"must be at least 1, got {self.max_iterations}")
        return self


@dataclass(frozen=True)
class Gates:
    """How the session gates CI: accuracy floor, backend requirement, baseline."""

    min_accuracy: float | None = None
    min_routing_accuracy: float | None = None
    require_backend: bool = False
    baseline_path: str | None = None  # read by the controller only (workers never compare)
    fail_on_regression: bool = False
