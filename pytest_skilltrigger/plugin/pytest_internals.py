"""The private parts of pytest and pytest-xdist the plugin uses, each where no public hook
does the job, all in this one module.

Each function says why the public API is not enough. ``tests/plugin/test_pytest_internals.py``
checks every attribute named here against the installed versions, so a release that moves
one fails that test first, not a user's run. Every function degrades to doing nothing when
its attribute is gone.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    # the types of ``Item.repr_failure``'s signature, which pytest does not export
    from _pytest._code.code import TerminalRepr, TracebackStyle

__all__ = [
    "TerminalRepr",
    "TracebackStyle",
    "line_in_progress",
    "setup_from_args",
    "warn_at_file",
    "xdist_pending",
    "xdist_supported",
    "xdist_worker_queue",
]

# the xdist major versions whose WorkerInteractor.torun this reads
XDIST_MAJORS = (3,)


def line_in_progress(reporter: Any) -> bool:
    """Whether the terminal's cursor is still on a progress line (``[100%]`` under ``-q``).

    Why private: ``TerminalReporter.write_line`` starts a new line only after a file's
    progress (``currentfspath``), not after ``-q``'s dots; the terminal writer's
    ``width_of_current_line`` is the one place that knows.
    """
    writer = getattr(reporter, "_tw", None)
    return bool(getattr(writer, "width_of_current_line", 0))


def warn_at_file(config: pytest.Config, path: str, text: str) -> None:
    """A configuration warning located at the file it is about (a SKILL.md), with pytest's
    warning filters (``-W``, ``filterwarnings``) applied.

    Why private: ``Config.issue_config_time_warning`` locates the warning at the caller's
    module; pointing it at the user's file needs pytest's own filter function and the
    ``-W`` values of the parsed arguments.
    """
    try:
        # private: may be missing in another pytest (then the fallback)
        from _pytest.config import apply_warning_filters
    except ImportError:  # another pytest: the warning is located at this module instead
        config.issue_config_time_warning(pytest.PytestConfigWarning(f"{path}: {text}"), 2)
        return
    if config.pluginmanager.is_blocked("warnings"):
        return
    cli_filters = getattr(config.known_args_namespace, "pythonwarnings", None) or []
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always", pytest.PytestConfigWarning)
        apply_warning_filters(config.getini("filterwarnings"), cli_filters)
        warnings.warn_explicit(pytest.PytestConfigWarning(text), None, filename=path, lineno=1)
    if records:
        config.hook.pytest_warning_recorded.call_historic(
            kwargs={
                "warning_message": records[0],
                "when": "config",
                "nodeid": "",
                "location": (path, 1, "SKILL.md"),
            }
        )


def setup_from_args(config: pytest.Config) -> tuple[Path, Path | None] | None:
    """The rootdir and config file pytest would choose from the arguments it ran with, or
    None when that cannot be worked out.

    Why private: pytest settles rootdir before plugin options are known, and only its own
    ``determine_setup`` says what it would have chosen from the same arguments.
    """
    try:
        # private: may be missing in another pytest (then the fallback)
        from _pytest.config.findpaths import determine_setup

        rootpath, inipath, *_ = determine_setup(
            inifile=config.option.inifilename,
            override_ini=config.option.override_ini,
            args=[str(a) for a in config.option.file_or_dir or []],
            rootdir_cmd_arg=config.option.rootdir or None,
            invocation_dir=config.invocation_params.dir,
        )
    except (ImportError, TypeError, AttributeError, pytest.UsageError):
        return None
    return rootpath, inipath


def xdist_supported() -> bool:
    """Whether the installed xdist is one whose worker queue :func:`xdist_worker_queue`
    was written for."""
    try:
        # optional: pytest-xdist may not be installed
        import xdist
    except ImportError:  # pragma: no cover - xdist is a dependency
        return False
    major = str(getattr(xdist, "__version__", "0")).split(".")[0]
    return major.isdigit() and int(major) in XDIST_MAJORS


XDIST_SUPPORTED = xdist_supported()


def xdist_worker_queue(config: pytest.Config) -> Any:
    """This xdist worker's queue of assigned items (with its ``lock()``), or None.

    Why private: xdist tells a worker nothing of the items it will run next; its
    ``WorkerInteractor.torun`` is the queue. Read only on the xdist versions in
    :data:`XDIST_MAJORS`.
    """
    if not XDIST_SUPPORTED:
        return None
    for plugin in config.pluginmanager.get_plugins():
        queue = getattr(plugin, "torun", None)
        if queue is not None and hasattr(queue, "lock"):
            return queue
    return None


def xdist_pending(queue: Any) -> list[int]:
    """The indices of the items a worker's queue (:func:`xdist_worker_queue`) still holds,
    read under its lock (its other entries are xdist's own markers)."""
    with queue.lock() as pending:
        return [i for i in pending if isinstance(i, int)]
