"""A session that stopped at its start (a control failed, the budget could not cover the
controls, no backend with ``--trigger-require-backend``), as each output shows it: the
JSON with the reason under ``"stopped"``, a JUnit XML of one error case saying it, and the
step summary's lines. A workflow that reads or uploads them finds why, not a missing file.
"""

from __future__ import annotations

import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_skilltrigger.model.prices import Spend, total_of
from pytest_skilltrigger.reports.json_report import REPORT_VERSION

#: the JUnit case that carries the reason
CASE_CLASS = "pytest-skilltrigger"
CASE_NAME = "session start"


@dataclass(frozen=True)
class StoppedRun:
    """Why the session stopped, and what it had spent by then (the controls', by phase)."""

    reason: str
    spending: Mapping[str, Spend] = field(default_factory=dict)
    permission_mode: str = "default"

    def to_json(self) -> dict[str, Any]:
        """The ``--trigger-json`` document: no skill, the reason, the spend."""
        total = total_of(self.spending.values())
        return {
            "version": REPORT_VERSION,
            "stopped": self.reason,
            "permission_mode": self.permission_mode,
            "skills": [],
            "routing": [],
            "totals": {
                **total.to_dict(),
                "by_phase": {p: s.to_dict() for p, s in self.spending.items()},
            },
        }

    def junit_xml(self, suite_name: str = "pytest") -> str:
        """A JUnit report of one errored case whose message is the reason."""
        suites = ET.Element("testsuites", name="pytest tests")
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=suite_name,
            errors="1",
            failures="0",
            skipped="0",
            tests="1",
            time="0",
            timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"),
            hostname=socket.gethostname(),
        )
        case = ET.SubElement(suite, "testcase", classname=CASE_CLASS, name=CASE_NAME, time="0")
        error = ET.SubElement(case, "error", message=self.reason)
        error.text = f"the session stopped before any trigger test ran: {self.reason}"
        body = ET.tostring(suites, encoding="unicode")
        return f'<?xml version="1.0" encoding="utf-8"?>{body}\n'

    def markdown(self) -> str:
        """The step summary's section."""
        reason = self.reason.replace("<", "&lt;").replace(">", "&gt;")
        return (
            "## Skill trigger results\n\n"
            f"**The session stopped before any trigger test ran:** {reason}\n"
        )
