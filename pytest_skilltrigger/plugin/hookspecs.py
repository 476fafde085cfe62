"""The hooks pytest-skilltrigger declares, for plugins and conftests to implement.

Declared the way pytest-xdist declares ``pytest_xdist_make_scheduler``: a plugin that does
not know a name returns None, and the first answer that is not None is taken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_skilltrigger.backends import BackendParts, TriggerBackend
    from pytest_skilltrigger.model.settings import Settings


@pytest.hookspec(firstresult=True)
def pytest_skilltrigger_make_backend(
    name: str, settings: Settings, parts: BackendParts
) -> TriggerBackend | None:
    """Make the trigger backend called ``name`` (``--trigger-backend``; ``auto`` has already
    been turned into ``anthropic`` or ``claude-code``) for ``settings`` (its model is the
    one model of the lane it is made for), or return None when the name is not yours.

    ``parts`` says what it is made for (``"trigger"`` runs, or ``"ask"``: the optimizer's
    questions) and carries the session's rate limiter and where captured CLI requests are
    kept. The backend implements
    :class:`~pytest_skilltrigger.backends.base.TriggerBackend`. The built-in backends are
    made by this plugin's own implementation, which runs last: a conftest may also replace
    one of them."""
