"""The checks an option's value must pass, each returning the problem in words (None: fine):
the option table (:mod:`.options`) names one for each option that needs one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pytest_skilltrigger.support.errors import InputError

#: a check of one value: the problem in words, or None when it is fine
Check = Callable[[object], str | None]


def at_least(lowest: float) -> Check:
    """A number not below ``lowest``."""
    return lambda value: None if as_number(value) >= lowest else f"must be at least {lowest:g}"


def within_unit(value: object) -> str | None:
    """A share: 0 to 1."""
    return None if 0.0 <= as_number(value) <= 1.0 else "must be within 0..1"


def positive(value: object) -> str | None:
    """A finite number above 0 (a time, a pause)."""
    number = as_number(value)
    return None if math.isfinite(number) and number > 0 else "must be positive"


def not_negative(value: object) -> str | None:
    """A finite number of 0 or more (a budget)."""
    number = as_number(value)
    return None if math.isfinite(number) and number >= 0 else "must be a number >= 0"


def backend_name(value: object) -> str | None:
    """A backend's name: one word (auto, a built-in one, or one a plugin adds)."""
    text = str(value)
    return None if text and not any(c.isspace() for c in text) else "must be a backend's name"


def rate_limit_problem(value: object) -> str | None:
    # deferred: only a given --trigger-rate-limit is checked, and a run without one (every
    # project without skills) never loads the limits' model
    from pytest_skilltrigger.model.rate_limits import RateLimitSetting

    try:
        RateLimitSetting.parse(str(value))
    except InputError as exc:
        return exc.problem
    return None


def crowd_sizes(value: object) -> tuple[int, ...]:
    """``--trigger-crowd``'s sizes: positive whole numbers, comma-separated (``10,20,40``),
    once each and in order; InputError otherwise."""
    text = str(value).replace(" ", "")
    parts = [p for p in text.split(",") if p]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise InputError(
            "--trigger-crowd", f"takes positive whole numbers, comma-separated: {value!r}"
        )
    return tuple(sorted({int(p) for p in parts}))


def crowd_problem(value: object) -> str | None:
    try:
        crowd_sizes(value)
    except InputError as exc:
        return exc.problem
    return None


def as_number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan
