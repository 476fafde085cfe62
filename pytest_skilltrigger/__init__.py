"""pytest-skilltrigger: test and improve when Claude Agent Skills trigger.

The public API, for library users who call the engine directly::

    from pytest_skilltrigger import Settings, evaluate_skill

    for target, results in evaluate_skill("skills/pdf", Settings(min_runs=5)):
        print(target.name, sum(1 for r in results if r.passed), "/", len(results))

Names are imported on first use (PEP 562): importing the package, as pytest does for the
plugin's entry point (:mod:`pytest_skilltrigger.plugin`), loads none of the engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_EXPORTS = {
    "evaluate_skill": "pytest_skilltrigger.engine.session",
    "TriggerSession": "pytest_skilltrigger.engine.session",
    "Settings": "pytest_skilltrigger.model.settings",
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

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_skilltrigger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
