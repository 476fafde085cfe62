"""The controller's side of the items' results: decoded once as each report arrives, gathered
under their skills, and handed to the pytest-free end of the session.

A plain run and the xdist controller each have one :class:`ResultTaker`; a worker has none
(its reports carry its results to the controller). It writes no terminal text: the reporter
reads what it gathered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_skilltrigger.conclusion.gathered import junit_properties
from pytest_skilltrigger.plugin import wire
from pytest_skilltrigger.reports.summary import Variant

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.gathered import Gathered
    from pytest_skilltrigger.conclusion.session_end import Conclusion, Log, SessionEnd
    from pytest_skilltrigger.model.outcome import QueryResult
    from pytest_skilltrigger.plugin.html import HtmlColumns
    from pytest_skilltrigger.plugin.setup import SessionEngine
    from pytest_skilltrigger.skills.catalog import Target

#: a result a worker sampled, taken in where it is paid for and stored (its context key and
#: the phase, ``items`` or ``checks``)
TakeWorkerResult = Callable[["str | None", "QueryResult", str], None]


class ResultTaker:
    """Decodes the results reports carry, gathers them, and ends the session with them."""

    def __init__(
        self,
        end: SessionEnd,
        engine: SessionEngine,
        *,
        html: HtmlColumns | None = None,
        take_worker_result: TakeWorkerResult | None = None,
    ) -> None:
        self.end = end
        self.session_engine = engine
        self.html = html
        self.take_worker_result = take_worker_result
        #: what the session's end concluded, once it has
        self.conclusion: Conclusion | None = None

    @property
    def gathered(self) -> Gathered:
        return self.end.gathered

    def take(self, report: pytest.TestReport) -> None:
        """Decode an item's result once as its report arrives; its numbers become the
        report's ``user_properties`` (and the teardown's, which junitxml reads)."""
        if report.when == "teardown" and (found := self.gathered.result_of(report.nodeid)):
            report.user_properties.extend(_properties(found[1]))
        for record in wire.decode(report):
            if self.take_worker_result is not None:
                phase = "checks" if isinstance(record, wire.CheckRecord) else "items"
                self.take_worker_result(record.context_key, record.result, phase)
            if isinstance(record, wire.ItemRecord):
                self._add_item(report, record)
            elif isinstance(record, wire.RoutingRecord):
                self.gathered.add_routing(
                    report.nodeid, record.path, record.index, record.result, record.model
                )

    def _add_item(self, report: pytest.TestReport, record: wire.ItemRecord) -> None:
        """Keep a trigger item's result under its skill; its numbers go on the report."""
        variant = Variant(record.model, record.crowd, record.mode)
        target: Target | None = self.gathered.add_item(
            report.nodeid, record.skill_md, record.index, record.result, variant
        )
        if target is None:  # a worker that read its skills elsewhere (xdist --tx ...//chdir)
            return
        report.user_properties.extend(_properties(record.result))
        if self.html is not None:
            self.html.add_extras(report, target, record.index, record.result)

    def finish(self, session: pytest.Session, log: Log) -> Conclusion:
        """The end of the session: the rounds, the reports and their files, the gates; the
        session's exit status then says what the gates found."""
        interrupted = session.exitstatus == pytest.ExitCode.INTERRUPTED
        conclusion = self.conclusion = self.end.finish(
            self.session_engine.started, interrupted=interrupted, log=log
        )
        if conclusion.interrupted:
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        elif conclusion.gate_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return conclusion


def _properties(result: QueryResult) -> list[tuple[str, Any]]:
    return junit_properties(result)
