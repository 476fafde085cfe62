"""How an option is declared (:class:`Option`: its flag, ini key, kind, holder, default,
help and check) and the checks a value must pass, each returning the problem in words (None:
fine); the option table itself is :mod:`.options`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

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


def _parsed_rate_limit(value: object) -> object:
    # deferred: only a given --trigger-rate-limit is checked, and a run without one (every
    # project without skills) never loads the limits' model
    from pytest_skilltrigger.model.rate_limits import RateLimitSetting

    return RateLimitSetting.parse(str(value))


def _parsed_shard(value: object) -> object:
    # deferred: only a given --trigger-shard is checked
    from pytest_skilltrigger.model.shards import Shard

    return Shard.parse(value)


def parses(parse: Callable[[object], object]) -> Check:
    """A value ``parse`` takes: its InputError's problem, the check's."""

    def check(value: object) -> str | None:
        try:
            parse(value)
        except InputError as exc:
            return exc.problem
        return None

    return check


INSTALLED_CROWD = "installed"  # --trigger-crowd=installed: the user's own install


def crowd_sizes(value: object) -> tuple[int, ...]:
    """``--trigger-crowd``'s sizes: positive whole numbers, comma-separated (``10,20,40``),
    once each and in order (none for ``installed``, the user's own install); InputError
    otherwise."""
    text = str(value).replace(" ", "")
    if text.lower() == INSTALLED_CROWD:
        return ()
    parts = [p for p in text.split(",") if p]
    if not parts or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts):
        raise InputError(
            "--trigger-crowd",
            f"takes positive whole numbers, comma-separated, or installed: {value!r}",
        )
    return tuple(sorted({int(p) for p in parts}))


PERMISSION_MODES = ("default", "plan", "auto", "acceptEdits", "dontAsk")


def permission_modes(value: object) -> tuple[str, ...]:
    """``--trigger-permission-mode``'s modes: one, or several comma-separated as a matrix
    (``default,plan``), each a mode Claude Code knows, once each; InputError otherwise."""
    parts = [p for p in str(value).replace(" ", "").split(",") if p]
    unknown = [p for p in parts if p not in PERMISSION_MODES]
    if not parts or unknown:
        raise InputError(
            "--trigger-permission-mode",
            f"takes {', '.join(PERMISSION_MODES)}, or several comma-separated: {value!r}",
        )
    return tuple(dict.fromkeys(parts))


def as_number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


#: how a value is read: argparse's action and the ini key's type follow from it
Kind = Literal["int", "float", "str", "bool", "choice", "path", "paths", "append", "optional"]
#: which settings object an option fills (``run``: read by the pytest layer itself)
# which of the session's value objects an option fills (``run``: the pytest layer reads it)
Holder = Literal["settings", "optimizer", "gates", "outputs", "run"]


@dataclass(frozen=True)
class Option:
    """One option: its flag, and the ini key of the same name unless ``ini`` is false."""

    flag: str
    kind: Kind
    default: object
    help: str
    holder: Holder = "settings"
    #: the settings field it fills (None: the pytest layer reads it itself, as it does the
    #: model matrix, which two options name)
    field: str | None = None
    ini: bool = True
    choices: tuple[str, ...] = ()
    check: Check | None = None
    #: how the default reads in the help and the docs, when not the value itself
    default_text: str | None = None
    #: the group of ``pytest --help`` it is shown in (see ``options.GROUPS``)
    group: str = "sample"
    #: the name it had before the options took one prefix: still read, with a deprecation
    #: warning (its ini key too)
    was: str | None = None

    @property
    def was_dest(self) -> str | None:
        """Where argparse keeps the old name's value (also the old ini key's name)."""
        return self.was.lstrip("-").replace("-", "_") if self.was else None

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under (also the ini key's name)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def ini_key(self) -> str | None:
        return self.dest if self.ini else None

    @property
    def takes_value(self) -> bool:
        return self.kind != "bool"

    def shown_default(self) -> str | None:
        """The default as the help and the docs show it (None: nothing worth saying)."""
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default is False or self.kind in ("append", "paths"):
            return None
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)

    def help_text(self) -> str:
        """The help with its choices and default, as ``pytest --help`` shows it."""
        text = self.help
        if self.choices:
            text = f"{' | '.join(self.choices)}: {text}"
        shown = self.shown_default()
        return f"{text} (default {shown})" if shown is not None else text

    def problem(self, value: object) -> str | None:
        """What is wrong with a value of this option, if anything."""
        unset = value is None and self.default is None  # not given, and no default to keep
        if self.choices and value not in self.choices and not unset:
            return f"must be one of {', '.join(self.choices)}"
        if self.check is not None and value is not None:
            return self.check(value)
        return None

    def validate(self, value: object) -> None:
        """Raise :class:`InputError` naming the option when the value is wrong."""
        problem = self.problem(value)
        if problem is not None:
            got = "" if repr(value) in problem else f", got {value!r}"
            raise InputError(self.flag, f"{problem}{got}")


rate_limit_problem = parses(_parsed_rate_limit)
crowd_problem = parses(crowd_sizes)
mode_problem = parses(permission_modes)
shard_problem = parses(_parsed_shard)
