"""The files of the improvement rounds: the live HTML report and the results folder.

Both are rewritten (atomically) after every iteration, so a browser that reloads follows the
run and an interrupted run keeps what it finished. The results folder is time-stamped per run
and holds ``report.html``, ``results.json`` and each iteration's exchange with the improve
model (redacted).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pytest_skilltrigger.conclusion.outputs import stamped_folder
from pytest_skilltrigger.model.formatting import display_path
from pytest_skilltrigger.reports.html_pages import routing_view
from pytest_skilltrigger.reports.json_report import dumps
from pytest_skilltrigger.reports.rounds_view import rounds_outputs
from pytest_skilltrigger.support.atomic import atomic_write_text
from pytest_skilltrigger.support.redact import redact

if TYPE_CHECKING:
    from pytest_skilltrigger.optimizer.proposer import Proposal
    from pytest_skilltrigger.optimizer.record import RoundsRecord
    from pytest_skilltrigger.reports.routing_table import RoutingTable


class RoundFiles:
    """Where the rounds are written: an HTML report path, a results folder, or both."""

    def __init__(
        self,
        report_path: str | None,
        results_dir: str | None,
        routing: Sequence[RoutingTable] = (),
        base: str | None = None,
    ) -> None:
        self.report_path = report_path
        # the session's routing tables, shown under the rounds (folders as pytest's user
        # reads them: relative to where it started)
        self.base = base
        self.routing = [routing_view(t, display_path(t.folder, base)) for t in routing]
        self.results_dir = stamped_folder(results_dir) if results_dir else None

    def publish(self, records: Sequence[RoundsRecord]) -> None:
        """Rewrite the HTML report and the results folder's report and JSON."""
        outputs = rounds_outputs(records, base=self.base, routing=self.routing)
        if self.report_path:
            atomic_write_text(self.report_path, outputs.page)
        if self.results_dir:
            atomic_write_text(os.path.join(self.results_dir, "report.html"), outputs.page)
            atomic_write_text(os.path.join(self.results_dir, "results.json"), outputs.json_text)

    def save_proposal(self, skill_name: str, number: int, proposal: Proposal) -> None:
        """One iteration's prompt, answer and counts, under ``<skill>/iteration-N``."""
        if not self.results_dir:
            return
        folder = os.path.join(self.results_dir, skill_name, f"iteration-{number}")
        files = {
            "prompt.txt": proposal.prompt,
            "response.txt": proposal.response,
            "repair_prompt.txt": proposal.repair_prompt,
            "repair_response.txt": proposal.repair_response,
            "description.txt": "\n\n".join(proposal.descriptions) or None,
        }
        for name, text in files.items():
            if text is not None:
                atomic_write_text(os.path.join(folder, name), redact(text))
        counts = {
            "prompt_chars": len(proposal.prompt),
            "response_chars": len(proposal.response),
            "descriptions": len(proposal.descriptions),
            "description_chars": [len(d) for d in proposal.descriptions],
            "problems": proposal.problems,
            "error": proposal.error,
        }
        atomic_write_text(os.path.join(folder, "counts.json"), dumps(counts))
