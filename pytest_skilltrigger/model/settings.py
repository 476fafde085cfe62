"""The settings of a trigger-testing session, validated once, independent of pytest.

The pytest layer fills this from options and ini keys; a library user builds it directly.
Every bad value is an :class:`InputError` naming the option, raised before anything runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from pytest_skilltrigger.model.verdict import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MARGIN,
    DEFAULT_MAX_RUNS,
    MOST_RUNS,
    FixedRule,
    Rule,
    SequentialRule,
)
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
    """Defaults match the reference workflow (threshold 0.5, at least 3 runs, 30 s a run),
    with verdicts settled at 95% by the sequential rule; ``confidence=None`` is the reference
    rule itself (``runs_per_query`` runs, rate against the threshold)."""

    runs_per_query: int = 3
    threshold: float = 0.5
    # the sequential rule (see model.verdict): None for the reference scripts' fixed runs
    confidence: float | None = DEFAULT_CONFIDENCE
    margin: float = DEFAULT_MARGIN
    max_runs_per_query: int = DEFAULT_MAX_RUNS
    timeout: float = 30.0
    backend: str = "auto"
    model: str | None = None
    # a model matrix: every entry is sampled on each (``model`` is the first); () for one model
    models: tuple[str, ...] = ()
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

    @property
    def rule(self) -> Rule:
        """The verdict rule these settings ask for."""
        if self.confidence is None:
            return FixedRule(self.runs_per_query, self.threshold, self.curtail)
        return SequentialRule(
            self.threshold,
            self.confidence,
            self.margin,
            self.runs_per_query,
            self.max_runs_per_query,
        )

    def _check_rule(self) -> None:
        if self.runs_per_query < 1:
            raise InputError("--runs-per-query", f"must be at least 1, got {self.runs_per_query}")
        if not 0.0 <= self.threshold <= 1.0:
            raise InputError("--trigger-threshold", f"must be within 0..1, got {self.threshold}")
        if self.confidence is None:
            return
        if not 0.5 < self.confidence < 1.0:
            raise InputError(
                "--trigger-confidence",
                f"must be above 0.5 and below 1 (or off), got {self.confidence}",
            )
        if not 0.0 < self.margin < 0.5:
            raise InputError(
                "--trigger-margin", f"must be above 0 and below 0.5, got {self.margin}"
            )
        if not self.margin < self.threshold < 1 - self.margin:
            raise InputError(
                "--trigger-threshold",
                f"{self.threshold:g} ± the margin {self.margin:g} leaves 0..1: the sequential "
                "test cannot settle a rate there (a smaller --trigger-margin, or "
                "--trigger-confidence off)",
            )
        if not self.curtail:
            raise InputError(
                "--no-early-stop",
                "makes every run of the reference rule: it goes with --trigger-confidence off",
            )
        if self.max_runs_per_query > MOST_RUNS:  # the test's bounds are computed exactly
            raise InputError(
                "--max-runs-per-query",
                f"must be at most {MOST_RUNS}, got {self.max_runs_per_query}",
            )
        if self.max_runs_per_query < self.runs_per_query:
            raise InputError(
                "--max-runs-per-query",
                f"must be at least --runs-per-query "
                f"({self.runs_per_query}), got {self.max_runs_per_query}",
            )

    def validated(self) -> Settings:
        """Return self, or raise InputError naming the option that is out of range."""
        self._check_rule()
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
    def lane_models(self) -> tuple[str | None, ...]:
        """The models a session samples on: the matrix, else the one model (None: the
        backend's default)."""
        return self.models or (self.model,)

    @property
    def active_store(self) -> str | None:
        """The result store's path when runs are stored or reused (None: off)."""
        return self.store_path if self.cache_mode != "off" else None

    def resolved_model(self, default: str) -> str:
        """The model id: the option, else ``SKILLTRIGGER_MODEL``, else the backend's default."""
        return self.model or os.environ.get(MODEL_ENV) or default


ACCEPT_ON = ("all", "test")  # what the fresh acceptance race runs on


@dataclass(frozen=True)
class OptimizerSettings:
    """The improvement rounds' settings; defaults are the reference tool's."""

    holdout: float = 0.4
    max_iterations: int = 5
    seed: int = 42
    improve_model: str | None = None
    # different proposals a round, screened on train by successive halving
    candidates_per_round: int = 3
    # the runs a race between two descriptions may add before it is called undecided
    race_runs: int = 60
    # which queries the fresh race that decides the write runs on: "all" (every query, the
    # held-out ones as a guard that must not lose) or "test" (the held-out ones alone)
    accept_on: str = "all"

    def validated(self) -> OptimizerSettings:
        if not 0.0 <= self.holdout < 1.0:
            raise InputError("--holdout", f"must be within 0..1 (below 1), got {self.holdout}")
        if self.max_iterations < 1:
            raise InputError("--max-iterations", f"must be at least 1, got {self.max_iterations}")
        if self.candidates_per_round < 1:
            raise InputError(
                "--candidates-per-round", f"must be at least 1, got {self.candidates_per_round}"
            )
        if self.race_runs < 0:
            raise InputError("--race-runs", f"must be 0 or more, got {self.race_runs}")
        if self.accept_on not in ACCEPT_ON:
            raise InputError(
                "--accept-on", f"must be one of {', '.join(ACCEPT_ON)}, got {self.accept_on!r}"
            )
        return self


@dataclass(frozen=True)
class Gates:
    """How the session gates CI: accuracy floor, backend requirement, baseline."""

    min_accuracy: float | None = None
    min_routing_accuracy: float | None = None
    require_backend: bool = False
    baseline_path: str | None = None  # read by the controller only (workers never compare)
    fail_on_regression: bool = False
