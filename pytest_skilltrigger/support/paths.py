"""Path containment, shared by the pytest layer's selection and the skill catalog."""

from __future__ import annotations

import os


def within(path: str, folder: str) -> bool:
    """True when ``path`` is ``folder`` or lies below it (both absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
