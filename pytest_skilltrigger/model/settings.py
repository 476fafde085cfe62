"""The settings of a trigger-testing session, independent of pytest.

The pytest layer fills them from options and ini keys; a library user builds them directly.
Defaults and range checks come from the one declaration of the options
(:mod:`~pytest_skilltrigger.model.options`); only the checks that tie two values together
are written here. Every bad value is an :class:`InputError` naming the option.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

from pytest_skilltrigger.model.option_spec import (
    INSTALLED_CROWD,
    Holder,
    crowd_sizes,
    permission_modes,
)
from pytest_skilltrigger.model.options import default, of_holder
from pytest_skilltrigger.model.prices import load_prices
from pytest_skilltrigger.model.rate_limits import RateLimitSetting
from pytest_skilltrigger.model.turn import TurnRule
from pytest_skilltrigger.model.verdict import FixedRule, Rule, SequentialRule
from pytest_skilltrigger.support.errors import InputError

# Claude Code's own default model: trigger behaviour is measured on the model users meet.
DEFAULT_MODEL = "claude-opus-5-5"
MODEL_ENV = "SKILLTRIGGER_MODEL"
CONTROLS_ENV = "SKILLTRIGGER_CONTROLS"  # off: no controls where --trigger-controls is not given
STORE_FILE = "results.sqlite"


def default_store_path() -> str:
    """The result store's default: one file in the user's cache folder.

    Not inside the project: pytest's cache folder follows rootdir, which an unlucky command
    line can move (even to ``/``); results are keyed by the whole request, so sharing them
    across projects is safe. ``XDG_CACHE_HOME`` is honoured (``LOCALAPPDATA`` on Windows).
    """
    base = os.environ.get("XDG_CACHE_HOME") or (
        os.environ.get("LOCALAPPDATA") if os.name == "nt" else None
    )
    root = base or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "pytest-skilltrigger", STORE_FILE)


def _declared(flag: str) -> Any:
    """The default the option's declaration gives (typed by the field it fills)."""
    return default(flag)


def _check_declared(settings: object, holder: Holder) -> None:
    """Each field's own check, as its option declares it."""
    for option in of_holder(holder):
        assert option.field is not None  # of_holder yields only options with a field
        option.validate(getattr(settings, option.field))


@dataclass(frozen=True)
class Settings:
    """How a session samples and where it runs. The defaults are the reference workflow's
    (threshold 0.5, at least 3 runs, 30 s a run), with verdicts settled at 95% by the
    sequential rule; ``confidence=None`` is the reference rule itself (``min_runs`` runs,
    rate against the threshold)."""

    min_runs: int = _declared("--trigger-runs")
    threshold: float = _declared("--trigger-threshold")
    # the sequential rule (see model.verdict): None for the reference scripts' fixed runs
    confidence: float | None = _declared("--trigger-confidence")
    margin: float = _declared("--trigger-margin")
    max_runs: int = _declared("--trigger-max-runs")
    no_early_stop: bool = _declared("--trigger-no-early-stop")
    # --trigger-within: first-call or turn (see model.turn), and turn's bound of looking around
    within: str = _declared("--trigger-within")
    within_bound: int = _declared("--trigger-within-bound")
    timeout: float = _declared("--trigger-timeout")
    backend: str = _declared("--trigger-backend")
    model: str | None = None
    # a model matrix: every entry is sampled on each (``model`` is the first); () for one model
    models: tuple[str, ...] = ()
    concurrency: int | None = None
    # --trigger-rate-limit: RPM[,ITPM[,OTPM]] or off (None: pace by the headers alone)
    rate_limit: str | None = None
    cache_mode: str = _declared("--trigger-cache")
    store_path: str | None = None
    budget_usd: float | None = None
    prices_path: str | None = None
    claude_bin: str | None = None
    trigger_context: str = _declared("--trigger-context")
    # Message Batches instead of live streams (API backend): half the price, no local limits
    batch: bool = _declared("--trigger-batch")
    batch_timeout: float = _declared("--trigger-batch-timeout")
    batch_poll: float = _declared("--trigger-batch-poll")
    # --trigger-crowd: the crowd sizes, comma-separated (None: no crowd items)
    crowd: str | None = None
    crowd_usage: float = _declared("--trigger-crowd-usage")
    # --trigger-controls: on, off, or None (on, unless $SKILLTRIGGER_CONTROLS says off)
    controls: str | None = None
    # --trigger-setup: project (the project's CLAUDE.md, hooks, servers), none or None
    setup: str | None = None
    permission_mode: str | None = None
    # --trigger-cwd: the subfolder sessions start in for its skills (None: the project root)
    cwd: str | None = None

    @property
    def controls_on(self) -> bool:
        """Whether the controls run before the items (see ``engine/controls.py``)."""
        value = self.controls or os.environ.get(CONTROLS_ENV, "on")
        return value.strip().lower() != "off"

    @property
    def controls_off_by(self) -> str:
        """What turned the controls off: the option, or the environment variable."""
        return "--trigger-controls" if self.controls else f"${CONTROLS_ENV}=off"

    @property
    def crowd_sizes(self) -> tuple[int, ...]:
        """The crowd sizes every query is also asked among (empty: none)."""
        return crowd_sizes(self.crowd) if self.crowd else ()

    @property
    def crowd_installed(self) -> bool:
        """Whether every query is asked in the user's own install
        (``--trigger-crowd=installed``)."""
        return str(self.crowd or "").strip().lower() == INSTALLED_CROWD

    @property
    def permission_modes(self) -> tuple[str, ...]:
        """The permission modes every query is asked in, the first the session's own (empty:
        the CLI's default)."""
        return permission_modes(self.permission_mode) if self.permission_mode else ()

    def turn_rule(self, root: str) -> TurnRule | None:
        """What a run is judged on: None for the first call, a rule of the turn (with the
        folder its looking around reads) for ``turn``."""
        return TurnRule(self.within_bound, root) if self.judges_turns else None

    @property
    def judges_turns(self) -> bool:
        """Whether runs are judged within the turn: ``turn``, but not in message batches,
        which answer each request once (a run there cannot look around and go on)."""
        return self.within == "turn" and not self.batch

    @property
    def within_note(self) -> str | None:
        """What the header says when the rule asked for is not the one applied."""
        if self.within == "turn" and self.batch:
            return (
                "--trigger-batch: a batch answers each request once, so every run is judged on "
                "its first call (--trigger-within=first-call); a Read first is a miss"
            )
        return None

    @property
    def first_mode(self) -> str | None:
        """The session's own mode (None: the default): every context's."""
        modes = self.permission_modes
        return modes[0] if modes and modes[0] != "default" else None

    @property
    def more_modes(self) -> tuple[str, ...]:
        """The modes after the first (a matrix): each its own items."""
        return self.permission_modes[1:]

    @property
    def rule(self) -> Rule:
        """The verdict rule these settings ask for."""
        if self.confidence is None:
            return FixedRule(self.min_runs, self.threshold, not self.no_early_stop)
        return SequentialRule(
            self.threshold, self.confidence, self.margin, self.min_runs, self.max_runs
        )

    def validated(self) -> Settings:
        """Return self, or raise InputError naming the option that is out of range."""
        _check_declared(self, "settings")
        self._check_sequential()
        if self.max_runs < self.min_runs:
            raise InputError(
                "--trigger-max-runs",
                f"must be at least --trigger-runs ({self.min_runs}), got {self.max_runs}",
            )
        if self.batch and self.backend == "claude-code":
            raise InputError(
                "--trigger-batch", "needs the API backend (message batches are an API feature)"
            )
        if self.prices_path:
            load_prices(self.prices_path)  # a bad price file is bad input, said now
        return self

    def _check_sequential(self) -> None:
        """What the sequential test needs of the threshold and the margin together."""
        if self.confidence is None:
            return
        if not self.margin < self.threshold < 1 - self.margin:
            raise InputError(
                "--trigger-threshold",
                f"{self.threshold:g} ± the margin {self.margin:g} leaves 0..1: the sequential "
                "test cannot settle a rate there (a smaller --trigger-margin, or "
                "--trigger-confidence off)",
            )
        if self.no_early_stop:
            raise InputError(
                "--trigger-no-early-stop",
                "makes every run of the reference rule: it goes with --trigger-confidence off",
            )

    @property
    def rate_limits(self) -> RateLimitSetting:
        """How live API requests are paced (``--trigger-rate-limit``)."""
        return RateLimitSetting.parse(self.rate_limit)

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


@dataclass(frozen=True)
class OptimizerSettings:
    """The improvement rounds' settings; defaults are the reference tool's."""

    holdout: float = _declared("--trigger-holdout")
    max_iterations: int = _declared("--trigger-max-iterations")
    seed: int = _declared("--trigger-split-seed")
    improve_model: str | None = None
    # different proposals a round, screened on train by successive halving
    candidates_per_round: int = _declared("--trigger-candidates")
    # the runs a race between two descriptions may add before it is called undecided
    race_runs: int = _declared("--trigger-race-runs")
    # which queries the fresh race that decides the write runs on: "all" (every query, the
    # held-out ones as a guard that must not lose) or "test" (the held-out ones alone)
    accept_on: str = _declared("--trigger-accept-on")

    def validated(self) -> OptimizerSettings:
        _check_declared(self, "optimizer")
        return self


@dataclass(frozen=True)
class Gates:
    """How the session gates CI: accuracy floors, backend requirement, baseline."""

    min_accuracy: float | None = None
    min_routing_accuracy: float | None = None
    require_backend: bool = False
    baseline_path: str | None = None  # read by the controller only (workers never compare)
    fail_on_regression: bool = False
    lint: str = _declared("--trigger-lint")

    def validated(self) -> Gates:
        _check_declared(self, "gates")
        if self.fail_on_regression and not self.baseline_path:
            raise InputError("--trigger-fail-on-regression", "needs --trigger-baseline")
        return self


def declared_fields(cls: type, holder: Holder) -> dict[str, object]:
    """Each field of a settings class that an option fills, with the option's default (what
    the tests hold the class's own defaults against)."""
    names = {f.name for f in fields(cls)}
    return {o.field: o.default for o in of_holder(holder) if o.field in names}
