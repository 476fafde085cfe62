"""Settings take their defaults and checks from the one option declaration."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest

from pytest_skilltrigger.model.options import OPTIONS, option
from pytest_skilltrigger.model.settings import (
    Gates,
    OptimizerSettings,
    Settings,
    declared_fields,
)
from pytest_skilltrigger.support.errors import InputError


@pytest.mark.parametrize(
    "cls,holder",
    [(Settings, "settings"), (OptimizerSettings, "optimizer"), (Gates, "gates")],
)
def test_every_field_default_is_the_declared_one(cls: type, holder: str) -> None:
    defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    declared = declared_fields(cls, holder)  # type: ignore[arg-type]
    assert declared
    for name, value in declared.items():
        assert defaults[name] == value, name


def test_every_option_with_a_field_names_a_real_field() -> None:
    classes = {"settings": Settings, "optimizer": OptimizerSettings, "gates": Gates}
    for opt in OPTIONS:
        if opt.field is None or opt.holder not in classes:
            continue
        assert opt.field in {f.name for f in fields(classes[opt.holder])}, opt.flag


@pytest.mark.parametrize(
    "settings,flag",
    [
        (Settings(min_runs=0), "--trigger-runs"),
        (Settings(threshold=1.5), "--trigger-threshold"),
        (Settings(backend="no such"), "--trigger-backend"),  # a name is one word
        (Settings(timeout=0), "--trigger-timeout"),
        (Settings(budget_usd=-1), "--trigger-budget-usd"),
        (Settings(max_runs=101), "--trigger-max-runs"),
        (Settings(min_runs=5, max_runs=4), "--trigger-max-runs"),
    ],
)
def test_a_bad_value_names_its_option(settings: Settings, flag: str) -> None:
    with pytest.raises(InputError) as raised:
        settings.validated()
    assert str(raised.value).startswith(flag)
    assert option(flag).flag == flag


def test_the_help_adds_the_default_and_the_choices() -> None:
    assert option("--trigger-runs").help_text().endswith("(default 3)")
    assert option("--trigger-cache").help_text().startswith("use | refresh | off: ")
