"""The optimizer's options, apart from the optimizer so that reading them stays cheap."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_skilltrigger.support.errors import InputError


@dataclass(frozen=True)
class OptimizeOptions:
    """The optimizer's knobs; defaults are the reference tool's."""

    holdout: float = 0.4
    max_iterations: int = 5
    seed: int = 42
    improve_model: str | None = None
    report_path: str | None = None
    results_dir: str | None = None

    def validated(self) -> OptimizeOptions:
        if not 0.0 <= self.holdout < 1.0:
            raise InputError("--holdout", f"must be within 0..1 (below 1), got {self.holdout}")
        if self.max_iterations < 1:
            raise InputError("--max-iterations", f"must be at least 1, got {self.max_iterations}")
        return self
