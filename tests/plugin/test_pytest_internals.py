"""The private parts of pytest and pytest-xdist that ``plugin/pytest_internals.py`` reads,
checked against the installed versions: a release that moves one fails here first."""

from __future__ import annotations

import inspect

import pytest

from pytest_skilltrigger.plugin import pytest_internals


def test_the_terminal_writer_knows_its_current_line(pytestconfig: pytest.Config) -> None:
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    assert reporter is not None
    assert isinstance(reporter._tw.width_of_current_line, int)
    assert pytest_internals.line_in_progress(object()) is False


def test_pytest_still_has_its_warning_filter_function() -> None:
    from _pytest.config import apply_warning_filters

    assert list(inspect.signature(apply_warning_filters).parameters) == [
        "config_filters",
        "cmdline_filters",
    ]


def test_the_parsed_arguments_still_carry_the_python_warnings(
    pytestconfig: pytest.Config,
) -> None:
    assert hasattr(pytestconfig.known_args_namespace, "pythonwarnings")


def test_pytest_still_works_out_rootdir_with_the_same_arguments(
    pytestconfig: pytest.Config,
) -> None:
    from _pytest.config.findpaths import determine_setup

    wanted = {"inifile", "override_ini", "args", "rootdir_cmd_arg", "invocation_dir"}
    assert wanted <= set(inspect.signature(determine_setup).parameters)
    settled = pytest_internals.setup_from_args(pytestconfig)
    assert settled is not None
    assert settled[0] == pytestconfig.rootpath


def test_item_failure_types_are_where_the_signature_names_them() -> None:
    from _pytest._code.code import TerminalRepr, TracebackStyle

    assert TerminalRepr is not None and TracebackStyle is not None


def test_an_xdist_worker_still_keeps_its_queue_in_torun() -> None:
    import xdist
    from xdist.remote import WorkerInteractor

    assert int(xdist.__version__.split(".")[0]) in pytest_internals.XDIST_MAJORS
    source = inspect.getsource(WorkerInteractor)
    assert "self.torun" in source
    from xdist.remote import TestQueue

    assert callable(TestQueue.lock)


def test_a_worker_finds_its_queue(pytester: pytest.Pytester) -> None:
    """Under ``-n 1`` the lookup finds the queue and it can be locked and read."""
    pytester.makeconftest(
        """
        from pytest_skilltrigger.plugin import pytest_internals

        def pytest_collection_finish(session):
            if hasattr(session.config, "workerinput"):
                queue = pytest_internals.xdist_worker_queue(session.config)
                assert queue is not None
                with queue.lock() as pending:
                    list(pending)
                assert all(isinstance(i, int) for i in pytest_internals.xdist_pending(queue))
                session.config.stash_found = True
        """
    )
    pytester.makepyfile(
        test_x="""
        def test_found(request):
            assert getattr(request.config, "stash_found", False)
        """
    )
    result = pytester.runpytest_subprocess("-n", "1", "-q")
    result.assert_outcomes(passed=1)
