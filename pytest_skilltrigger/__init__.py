"""pytest-skilltrigger: test and improve when Claude Agent Skills trigger.

The public API, for library users who call the engine directly::

    from pytest_skilltrigger import Settings, evaluate_skill

    for target, results in evaluate_skill("skills/pdf", Settings(min_runs=5)):
        print(target.name, sum(1 for r in results if r.passed), "/", len(results))

Names are imported on first use (PEP 562): importing the package, as pytest does for the
plugin's entry point, loads none of the engine. Type checkers read the imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_skilltrigger.engine.session import TriggerSession, evaluate_skill
    from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
    from pytest_skilltrigger.model.outcome import QueryResult, RunOutcome, TriggerCheck, Usage
    from pytest_skilltrigger.model.plan import SamplingPlan
    from pytest_skilltrigger.model.settings import OptimizerSettings, Settings
    from pytest_skilltrigger.skills.catalog import Target, load_targets
    from pytest_skilltrigger.support.errors import InputError

__version__ = "0.2.0"

# public name -> the module that defines it
_EXPORTS = {
    "evaluate_skill": "pytest_skilltrigger.engine.session",
    "TriggerSession": "pytest_skilltrigger.engine.session",
    "Settings": "pytest_skilltrigger.model.settings",
    "OptimizerSettings": "pytest_skilltrigger.model.settings",
    "SamplingPlan": "pytest_skilltrigger.model.plan",
    "TriggerContext": "pytest_skilltrigger.model.context",
    "ListedSkill": "pytest_skilltrigger.model.context",
    "QueryResult": "pytest_skilltrigger.model.outcome",
    "RunOutcome": "pytest_skilltrigger.model.outcome",
    "TriggerCheck": "pytest_skilltrigger.model.outcome",
    "Usage": "pytest_skilltrigger.model.outcome",
    "Target": "pytest_skilltrigger.skills.catalog",
    "load_targets": "pytest_skilltrigger.skills.catalog",
    "InputError": "pytest_skilltrigger.support.errors",
}

__all__ = [
    "InputError",
    "ListedSkill",
    "OptimizerSettings",
    "QueryResult",
    "RunOutcome",
    "SamplingPlan",
    "Settings",
    "Target",
    "TriggerCheck",
    "TriggerContext",
    "TriggerSession",
    "Usage",
    "__version__",
    "evaluate_skill",
    "load_targets",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_skilltrigger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
