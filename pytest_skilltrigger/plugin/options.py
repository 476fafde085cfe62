"""Command-line options and ini keys, and turning them into engine settings.

Every option that makes sense in a project file is also an ini key of the same name with
dashes as underscores (``--runs-per-query`` -> ``runs_per_query``); the command line wins.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.plugin.option_table import OPTIONS
from pytest_skilltrigger.support.errors import InputError

if TYPE_CHECKING:
    from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings

GROUP = "skilltrigger"


def add_options(parser: pytest.Parser) -> None:
    """Register the options and their ini keys."""
    group = parser.getgroup(GROUP, "skill trigger tests")
    for flag, ini, kind, _default, help_text in OPTIONS:
        kwargs: dict[str, Any] = {"dest": _dest(flag), "help": help_text, "default": None}
        if kind in ("append", "paths"):
            kwargs["action"] = "append"
        elif kind == "bool":
            kwargs["action"] = "store_true"
            kwargs["default"] = False
        elif kind == "optional":  # given alone, or with a value: --draft-eval-set[=also]
            kwargs.update(nargs="?", const=DRAFT_MISSING)
        group.addoption(flag, **kwargs)
        if ini:
            ini_type = {"bool": "bool", "paths": "paths"}.get(kind)
            parser.addini(ini, help_text, type=ini_type, default=[] if kind == "paths" else None)
    parser.addini(
        "skill_paths", "skill folders collected with the normal test run", type="paths", default=[]
    )


def _dest(flag: str) -> str:
    """The attribute an option is read from: ``--trigger-model`` is ``trigger_model`` (also
    its ini key's name where it has one)."""
    return flag.lstrip("-").replace("-", "_")


def _raw(config: pytest.Config, flag: str) -> Any:
    """The option's value: command line, else ini key, else the default."""
    for name, ini, _kind, default, _help in OPTIONS:
        if name == flag:
            value = config.getoption(_dest(flag))
            if value in (None, False) and ini:
                value = config.getini(ini) or value
            return default if value in (None, "") else value
    raise KeyError(flag)


def _number(config: pytest.Config, flag: str, cast: type) -> Any:
    value = _raw(config, flag)
    if value is None:
        return None
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise InputError(flag, f"must be a number, got {value!r}") from None


def any_given(config: pytest.Config) -> bool:
    """Whether any option or ini key of ours differs from its default.

    When none does, the settings are the defaults, which are valid: a project that collects
    no skill can then leave the engine's settings unbuilt (and unimported) without missing a
    bad option. (A choice's values are checked there too, one table for the library and the
    command line, so argparse gets no ``choices``.)
    """
    return any(
        _raw(config, name) not in (default, None, False) for name, _ini, _k, default, _h in OPTIONS
    )


def settings_from_config(config: pytest.Config) -> Settings:
    """Build and validate the engine settings; InputError names the bad option."""
    from pytest_skilltrigger.model.settings import Settings, default_store_path

    return Settings(
        runs_per_query=_number(config, "--runs-per-query", int),
        threshold=_number(config, "--trigger-threshold", float),
        confidence=confidence(config),
        margin=_number(config, "--trigger-margin", float),
        max_runs_per_query=_number(config, "--max-runs-per-query", int),
        timeout=_number(config, "--trigger-timeout", float),
        backend=str(_raw(config, "--trigger-backend")),
        **models(config),
        concurrency=_number(config, "--trigger-concurrency", int),
        curtail=not flag(config, "--no-early-stop"),
        cache_mode=str(_raw(config, "--trigger-cache")),
        store_path=_path(config, "--trigger-store") or default_store_path(),
        budget_usd=_number(config, "--trigger-budget-usd", float),
        prices_path=_path(config, "--trigger-prices"),
        claude_bin=_raw(config, "--claude-bin"),
        trigger_context=str(_raw(config, "--trigger-context")),
        batch=flag(config, "--trigger-batch"),
        batch_timeout=_number(config, "--trigger-batch-timeout", float),
        batch_poll=_number(config, "--trigger-batch-poll", float),
    ).validated()


def models(config: pytest.Config) -> dict[str, Any]:
    """``model`` and ``models`` (the matrix) from ``--trigger-model=a,b`` or
    ``--trigger-models`` (or their ini keys): one model is no matrix. The command line wins
    over the ini file, as for every option; both names at the same level are an error, since
    which one was meant cannot be told."""
    flags = ("--trigger-model", "--trigger-models")
    given = {f: config.getoption(_dest(f)) for f in flags}
    if not any(given.values()):
        given = {f: config.getini(_dest(f)) for f in flags}
    if all(given.values()):
        where = "on the command line" if config.getoption("trigger_model") else "in the ini file"
        raise InputError(
            "--trigger-models",
            f"given with --trigger-model {where}: name the "
            "models once (either takes several, comma-separated)",
        )
    raw = given["--trigger-model"] or given["--trigger-models"] or None
    if raw is None:
        return {"model": None, "models": ()}
    names = tuple(dict.fromkeys(n for n in str(raw).replace(",", " ").split() if n))
    if not names:
        raise InputError("--trigger-model", f"names no model: {raw!r}")
    return {"model": names[0], "models": names if len(names) > 1 else ()}


def confidence(config: pytest.Config) -> float | None:
    """``--trigger-confidence``: a level, or None for ``off`` (the reference rule), which
    ``--no-early-stop`` implies when no level is given."""
    given = config.getoption("trigger_confidence") or config.getini("trigger_confidence")
    value = str(_raw(config, "--trigger-confidence")).strip().lower()
    if value == "off" or (not given and flag(config, "--no-early-stop")):
        return None
    try:
        return float(value)
    except ValueError:
        problem = f"must be a number or off, got {value!r}"
        raise InputError("--trigger-confidence", problem) from None


def _path(config: pytest.Config, flag: str) -> str | None:
    value = _raw(config, flag)
    return os.path.abspath(str(value)) if value else None


def skill_paths(config: pytest.Config) -> tuple[list[str], list[str]]:
    """(paths from --skill-path, paths from the ``skill_paths`` ini key), absolute."""
    given = [os.path.abspath(p) for p in config.getoption("skill_path") or []]
    ini = [os.path.abspath(str(p)) for p in config.getini("skill_paths") or []]
    return given, ini


def extra_skill_paths(config: pytest.Config) -> list[str]:
    """The folders of ``--trigger-extra-skills`` (else the ini key's, relative to the ini
    file), absolute."""
    given = config.getoption("trigger_extra_skills") or config.getini("trigger_extra_skills")
    return [os.path.abspath(str(p)) for p in given or []]


def json_path(config: pytest.Config) -> str | None:
    return _path(config, "--trigger-json")


def report_path(config: pytest.Config) -> str | None:
    """The ``--trigger-report`` page: the improvement rounds' with ``--optimize-description``,
    else the items' results and the routing tables."""
    return _path(config, "--trigger-report")


def results_dir(config: pytest.Config) -> str | None:
    """``--trigger-results-dir``: a time-stamped folder per run (the rounds', or the items'
    results without ``--optimize-description``)."""
    return _path(config, "--trigger-results-dir")


def flag(config: pytest.Config, option: str) -> bool:
    """A boolean option that may also be set as an ini key."""
    return bool(_raw(config, option))


def gates(config: pytest.Config) -> Gates:
    """Read and check the gating options; InputError names the bad one."""
    min_accuracy = _number(config, "--trigger-min-accuracy", float)
    if min_accuracy is not None and not 0.0 <= min_accuracy <= 1.0:
        raise InputError("--trigger-min-accuracy", f"must be within 0..1, got {min_accuracy}")
    min_routing = _number(config, "--trigger-min-routing-accuracy", float)
    if min_routing is not None and not 0.0 <= min_routing <= 1.0:
        raise InputError(
            "--trigger-min-routing-accuracy", f"must be within 0..1, got {min_routing}"
        )
    baseline_path = _path(config, "--trigger-baseline")
    fail_on_regression = flag(config, "--trigger-fail-on-regression")
    if fail_on_regression and not baseline_path:
        raise InputError("--trigger-fail-on-regression", "needs --trigger-baseline")
    from pytest_skilltrigger.model.settings import Gates

    return Gates(
        min_accuracy=min_accuracy,
        min_routing_accuracy=min_routing,
        require_backend=flag(config, "--trigger-require-backend"),
        baseline_path=baseline_path,
        fail_on_regression=fail_on_regression,
    )


DRAFT_MISSING, DRAFT_ALSO = "missing", "also"


def improve_model(config: pytest.Config) -> str | None:
    """The model that proposes descriptions and drafts eval sets (None: the trigger model)."""
    return _raw(config, "--improve-model")


def draft_mode(config: pytest.Config) -> str | None:
    """``missing`` (draft for skills without an eval set), ``also`` (and more for those with
    one), or None; the ini key also takes true/false."""
    value = _raw(config, "--draft-eval-set")
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("", "false", "no", "0", "off"):
        return None
    if text in ("true", "yes", "1", "on", DRAFT_MISSING):
        return DRAFT_MISSING
    if text == DRAFT_ALSO:
        return DRAFT_ALSO
    why = f"takes no value or 'also', got {value!r} (a path after it is taken as its value)"
    raise InputError("--draft-eval-set", why)


def optimize_options(config: pytest.Config) -> OptimizerSettings | None:
    """The optimizer's options when ``--optimize-description`` is given, validated."""
    if not flag(config, "--optimize-description"):
        return None
    from pytest_skilltrigger.model.settings import OptimizerSettings

    return OptimizerSettings(
        holdout=_number(config, "--holdout", float),
        max_iterations=_number(config, "--max-iterations", int),
        seed=_number(config, "--split-seed", int),
        improve_model=improve_model(config),
        candidates_per_round=_number(config, "--candidates-per-round", int),
        race_runs=_number(config, "--race-runs", int),
        accept_on=str(_raw(config, "--accept-on")),
    ).validated()


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
    try:
        from _pytest.config.findpaths import determine_setup

        rootpath, inipath, *_ = determine_setup(
            inifile=config.option.inifilename,
            override_ini=config.option.override_ini,
            args=[str(a) for a in config.option.file_or_dir or []],
            rootdir_cmd_arg=config.option.rootdir or None,
            invocation_dir=config.invocation_params.dir,
        )
    except (ImportError, TypeError, AttributeError):  # another pytest: nothing to compare
        return
    except pytest.UsageError:
        return
    if (rootpath, inipath) == (config.rootpath, config.inipath):
        return
    option, value = spaced[0]
    raise InputError(
        f"{option} {value}",
        f"pytest took this value for a test path before plugin options were known, so it "
        f"chose rootdir {config.rootpath} and {_ini_text(config.inipath)} instead of "
        f"{rootpath} and {_ini_text(inipath)}; write {option}={value}",
    )


def _ini_text(path: object) -> str:
    return f"config file {path}" if path else "no config file"


def _spaced_values(args: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """Our value-taking options written as two arguments (``--flag value``), in order."""
    takes_value = {flag for flag, _ini, kind, _d, _h in OPTIONS if kind != "bool"}
    args = [str(a) for a in args]
    return [
        (arg, args[i + 1])
        for i, arg in enumerate(args[:-1])
        if arg in takes_value and not args[i + 1].startswith("-")
    ]
