"""The options and ini keys in pytest: registered and read from the one declaration.

Every option that makes sense in a project file is also an ini key of the same name with
dashes as underscores (``--trigger-runs`` -> ``trigger_runs``); the command line wins.
What each option is, its default and its check are declared once, in
:mod:`pytest_skilltrigger.model.options`; here they only meet argparse and the ini file.
"""

from __future__ import annotations

import os
from argparse import SUPPRESS
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import pytest

from pytest_skilltrigger.model.option_spec import Holder, Option
from pytest_skilltrigger.model.options import (
    DRAFT_ALSO,
    DRAFT_MISSING,
    GROUPS,
    OPTIONS,
    SKILL_PATHS_HELP,
    SKILL_PATHS_INI,
    group_heading,
    in_group,
    of_holder,
    option,
)
from pytest_skilltrigger.plugin.pytest_internals import setup_from_args
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings

GROUP = "skilltrigger"


def add_options(parser: pytest.Parser) -> None:
    """Register the options and their ini keys, in the groups ``pytest --help`` shows; the
    names they had before the one prefix are kept, hidden, and read with a warning."""
    groups = {
        key: parser.getgroup(f"{GROUP}-{key}", group_heading(title, lead))
        for key, title, lead in GROUPS
    }
    for opt in (opt for key, _, _ in GROUPS for opt in in_group(key)):
        kwargs = _argparse_kwargs(opt)
        groups[opt.group].addoption(opt.flag, dest=opt.dest, help=opt.help_text(), **kwargs)
        if opt.was and opt.was_dest:
            groups[opt.group].addoption(opt.was, dest=opt.was_dest, help=SUPPRESS, **kwargs)
        if opt.ini_key:
            ini_type: Literal["bool", "paths"] | None = None
            if opt.kind in ("bool", "paths"):
                ini_type = "bool" if opt.kind == "bool" else "paths"
            default: list[str] | None = [] if opt.kind == "paths" else None
            parser.addini(opt.ini_key, opt.help_text(), type=ini_type, default=default)
            if opt.was_dest:
                old = f"deprecated: {opt.ini_key}"
                parser.addini(opt.was_dest, old, type=ini_type, default=default)
    parser.addini(SKILL_PATHS_INI, SKILL_PATHS_HELP, type="paths", default=[])


def _argparse_kwargs(opt: Option) -> dict[str, Any]:
    """How argparse takes an option of this kind."""
    if opt.kind in ("append", "paths"):
        return {"action": "append", "default": None}
    if opt.kind == "bool":
        return {"action": "store_true", "default": False}
    if opt.kind == "optional":  # given alone, or with a value: --trigger-draft[=also]
        return {"nargs": "?", "const": DRAFT_MISSING, "default": None}
    return {"default": None}


def deprecated_names(config: pytest.Config) -> list[str]:
    """The old names given (options and ini keys), each with its new one, for one warning
    each at the start of the session."""
    said = []
    for opt in OPTIONS:
        if opt.was and opt.was_dest and config.getoption(opt.was_dest) not in (None, False):
            said.append(f"{opt.was} is now {opt.flag}")
        if opt.ini_key and opt.was_dest and config.getini(opt.was_dest):
            said.append(f"the ini key {opt.was_dest} is now {opt.ini_key}")
    return said


def _raw(config: pytest.Config, opt: Option) -> Any:
    """The option's value as given: command line, else ini key, else the default (an old
    name's too, see :func:`deprecated_names`)."""
    value = config.getoption(opt.dest)
    if value in (None, False) and opt.was_dest:
        value = config.getoption(opt.was_dest)
    if value in (None, False) and opt.ini_key:
        value = config.getini(opt.ini_key) or value
        if value in (None, False, []) and opt.was_dest:
            value = config.getini(opt.was_dest) or value
    return opt.default if value in (None, "") else value


def _typed(config: pytest.Config, opt: Option) -> Any:
    """The option's value read as its kind (a number, an absolute path, a flag)."""
    value = _raw(config, opt)
    if value is None:
        return None
    if opt.kind in ("int", "float"):
        cast: Callable[[Any], Any] = int if opt.kind == "int" else float
        try:
            return cast(value)
        except (TypeError, ValueError):
            raise InputError(opt.flag, f"must be a number, got {value!r}") from None
    if opt.kind == "path":
        return os.path.abspath(str(value)) if value else None
    if opt.kind == "bool":
        return bool(value)
    return value


def value(config: pytest.Config, flag: str) -> Any:
    """One option's value, read as its kind."""
    return _typed(config, option(flag))


NARROWING = ("--trigger-changed-since", "--trigger-shard", "--trigger-merge")


def narrows(config: pytest.Config) -> bool:
    """Whether an option narrows the items (a change, a shard, a merge)."""
    return any(value(config, flag) for flag in NARROWING)


def any_given(config: pytest.Config) -> bool:
    """Whether any option or ini key of ours differs from its default.

    When none does, the settings are the defaults, which are valid: a project that collects
    no skill can then leave the engine's settings unbuilt (and unimported) without missing a
    bad option.
    """
    return any(_raw(config, opt) not in (opt.default, None, False) for opt in OPTIONS)


def _fields(config: pytest.Config, holder: Holder) -> dict[str, Any]:
    """The values of the options that fill one settings object, by field."""
    return {o.field: _typed(config, o) for o in of_holder(holder) if o.field is not None}


def settings_from_config(config: pytest.Config) -> Settings:
    """Build and validate the engine settings; InputError names the bad option."""
    # deferred: the settings' checks load the price table, only when an option is read
    from pytest_skilltrigger.model.settings import Settings, default_store_path

    fields = _fields(config, "settings")
    fields.update(models(config), confidence=confidence(config))
    fields["store_path"] = fields["store_path"] or default_store_path()
    return Settings(**fields).validated()


def models(config: pytest.Config) -> dict[str, Any]:
    """``model`` and ``models`` (the matrix) from ``--trigger-model=a,b`` (or its ini key,
    whose models may be separated by spaces too): one model is no matrix."""
    raw = _raw(config, option("--trigger-model"))
    if raw is None:
        return {"model": None, "models": ()}
    names = tuple(dict.fromkeys(n for n in str(raw).replace(",", " ").split() if n))
    if not names:
        raise InputError("--trigger-model", f"names no model: {raw!r}")
    return {"model": names[0], "models": names if len(names) > 1 else ()}


def confidence(config: pytest.Config) -> float | None:
    """``--trigger-confidence``: a level, or None for ``off`` (the reference rule), which
    ``--trigger-no-early-stop`` implies when no level is given."""
    opt = option("--trigger-confidence")
    given = config.getoption(opt.dest) or config.getini(opt.dest)
    text = str(_raw(config, opt)).strip().lower()
    if text == "off" or (not given and value(config, "--trigger-no-early-stop")):
        return None
    try:
        return float(text)
    except ValueError:
        raise InputError(opt.flag, f"must be a number or off, got {text!r}") from None


def skill_paths(config: pytest.Config) -> tuple[list[str], list[str]]:
    """(paths from --trigger-skill-path, paths from the ``skill_paths`` ini key), absolute."""
    given = [os.path.abspath(p) for p in value(config, "--trigger-skill-path") or []]
    ini = [os.path.abspath(str(p)) for p in config.getini(SKILL_PATHS_INI) or []]
    return given, ini


def extra_skill_paths(config: pytest.Config) -> list[str]:
    """The folders of ``--trigger-extra-skills`` (else the ini key's, relative to the ini
    file), absolute; ``~`` is the user's home (the shell leaves it after ``=``)."""
    opt = option("--trigger-extra-skills")
    given = config.getoption(opt.dest) or config.getini(opt.dest)
    return [os.path.abspath(os.path.expanduser(str(p))) for p in given or []]


def outputs_fields(config: pytest.Config) -> dict[str, Any]:
    """The result files the options name (``--trigger-json``, ``--trigger-report``,
    ``--trigger-results-dir``), by field."""
    return _fields(config, "outputs")


def gates(config: pytest.Config) -> Gates:
    """Read and check the gating options; InputError names the bad one."""
    # deferred: the settings' checks load the price table, only when an option is read
    from pytest_skilltrigger.model.settings import Gates

    return Gates(**_fields(config, "gates")).validated()


def improve_model(config: pytest.Config) -> str | None:
    """The model that proposes descriptions and drafts eval sets (None: the trigger model)."""
    found: str | None = value(config, "--trigger-improve-model")
    return found


def export_plugin_eval(config: pytest.Config) -> str | None:
    """The folder ``--trigger-export-plugin-eval`` names (absolute), or None. Not with
    ``--trigger-draft``: the export makes no call, and drafting is paid."""
    given = value(config, "--trigger-export-plugin-eval")
    if given and draft_mode(config):
        raise InputError(
            "--trigger-export-plugin-eval",
            "makes no call, so it does not draft: run --trigger-draft first, then export",
        )
    return os.path.abspath(str(given)) if given else None


def harvest_file(config: pytest.Config) -> str:
    """The file ``--trigger-harvest`` names (absolute), checked to be writable; not with
    ``--trigger-draft`` or ``--trigger-optimize`` (the harvest makes no call)."""
    given = str(value(config, "--trigger-harvest"))
    if draft_mode(config) or value(config, "--trigger-optimize"):
        raise InputError("--trigger-harvest", "makes no call: run it alone, then draft or optimize")
    from pytest_skilltrigger.support.atomic import write_problem  # deferred: this command's

    path = os.path.abspath(given)
    problem = write_problem(path)
    if problem:
        raise InputError(given, f"--trigger-harvest: {problem}")
    return path


def draft_mode(config: pytest.Config) -> str | None:
    """``missing`` (draft for skills without an eval set), ``also`` (and more for those with
    one), or None; the ini key also takes true/false."""
    given = value(config, "--trigger-draft")
    if given is None:
        return None
    text = str(given).strip().lower()
    if text in ("", "false", "no", "0", "off"):
        return None
    if text in ("true", "yes", "1", "on", DRAFT_MISSING):
        return DRAFT_MISSING
    if text == DRAFT_ALSO:
        return DRAFT_ALSO
    why = f"takes no value or 'also', got {given!r} (a path after it is taken as its value)"
    raise InputError("--trigger-draft", why)


def optimize_options(config: pytest.Config) -> OptimizerSettings | None:
    """The optimizer's options when ``--trigger-optimize`` is given, validated."""
    if not value(config, "--trigger-optimize"):
        return None
    # deferred: the settings' checks load the price table, only when an option is read
    from pytest_skilltrigger.model.settings import OptimizerSettings

    return OptimizerSettings(**_fields(config, "optimizer")).validated()


def check_values_not_taken_for_paths(config: pytest.Config) -> None:
    """Refuse a run whose rootdir or config file pytest chose from one of our option values.

    pytest settles rootdir and the config file before plugin options are known, so in
    ``--trigger-json /tmp/out/r.json`` it reads ``/tmp/out/r.json`` as a test path once that
    path exists. The run would then lose the project's config file (its ``skill_paths`` and
    gates) and put pytest's cache under another rootdir. Recomputing the setup from the
    arguments pytest really ran with tells whether that happened; the ``--opt=value`` form
    never has the problem.
    """
    spaced = _spaced_values(config.invocation_params.args)
    if not spaced:
        return
    settled = setup_from_args(config)
    if settled is None or settled == (config.rootpath, config.inipath):
        return
    rootpath, inipath = settled
    flag, given = spaced[0]
    raise InputError(
        f"{flag} {given}",
        f"pytest took this value for a test path before plugin options were known, so it "
        f"chose rootdir {config.rootpath} and {_ini_text(config.inipath)} instead of "
        f"{rootpath} and {_ini_text(inipath)}; write {flag}={given}",
    )


def _ini_text(path: object) -> str:
    return f"config file {path}" if path else "no config file"


def _spaced_values(args: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """Our value-taking options written as two arguments (``--flag value``), in order."""
    takes_value = {opt.flag for opt in OPTIONS if opt.takes_value}
    words = [str(a) for a in args]
    return [
        (arg, words[i + 1])
        for i, arg in enumerate(words[:-1])
        if arg in takes_value and not words[i + 1].startswith("-")
    ]
