"""Everything the plugin shows in pytest's terminal: the header, the engine's notices, the
progress lines while items run, and the summary.

Registered on the process that has the terminal (a plain run, or the xdist controller), as
xdist registers its ``TerminalDistReporter``: the control logic computes and decides, and
writes no terminal text; this plugin reads what it found and formats it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_skilltrigger.plugin import pytest_internals

if TYPE_CHECKING:
    from pytest_skilltrigger.conclusion.session_end import Conclusion, SessionEnd
    from pytest_skilltrigger.engine.estimate import Estimate
    from pytest_skilltrigger.engine.session import Notice, TriggerSession
    from pytest_skilltrigger.optimizer.drafting import Draft
    from pytest_skilltrigger.plugin.narrowing import Narrowing
    from pytest_skilltrigger.plugin.setup import SessionEngine, Setup, SkillsInPlay
    from pytest_skilltrigger.reports.terminal import TerminalLine

GATE_FAILED = "gate failed"  # the word pytest's last line counts a failed gate under
WAITING_EVERY = 30.0  # seconds between two lines on how long runs waited for the rate limit


class TerminalLines:
    """The plugin's lines in pytest's terminal, from any thread.

    A line from another thread while an item runs waits for the item's end: the item's
    output is captured until then, and the line would be lost.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._lock = threading.Lock()  # a matrix's batches report from a thread each
        self._held: list[str] = []
        self._item_running = False
        #: the header's estimate of the session's calls (the rate limit's notice times them)
        self._planned: Estimate | None = None

    def expect(self, planned: Estimate | None) -> None:
        """The session's estimate, once the header has it."""
        self._planned = planned

    def notice(self, notice: Notice) -> None:
        """A notice from the engine, as its line."""
        # deferred: the reports layer, only with a skill in play
        from pytest_skilltrigger.reports.terminal import notice_line

        line = notice_line(notice, self._planned)
        if self._item_running and threading.current_thread() is not threading.main_thread():
            with self._lock:
                self._held.append(line)
        else:
            self.write(line)

    def item_started(self) -> None:
        self._item_running = True

    def item_finished(self) -> None:
        """Write the lines held while the item ran."""
        self._item_running = False
        with self._lock:
            lines, self._held = self._held, []
        for line in lines:
            self.write(line)

    def write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        with self._lock:
            # after the last progress mark (``[100%]``) the cursor is still on that line,
            # which write_line does not know under -q: start a line of our own
            if pytest_internals.line_in_progress(reporter):
                reporter.write("\n")
            reporter.write_line(line)


class ReportSource(Protocol):
    """What the reporter reads: a controller's strategy."""

    @property
    def setup(self) -> Setup: ...
    @property
    def skills(self) -> SkillsInPlay: ...
    @property
    def session_engine(self) -> SessionEngine: ...
    @property
    def end(self) -> SessionEnd: ...
    @property
    def conclusion(self) -> Conclusion | None: ...
    @property
    def drafted(self) -> tuple[Draft, ...]: ...
    @property
    def narrowing(self) -> Narrowing | None: ...


class SkillTriggerReporter:
    """The header, the progress lines and the summary of the trigger tests."""

    def __init__(self, source: ReportSource, lines: TerminalLines) -> None:
        self.source = source
        self.lines = lines
        self._waited = 0.0  # what the items' runs waited for the rate limit, so far
        self._waiting_said = float("-inf")
        self._planned_items: int | None = None  # the items the header's estimate sized

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        skills = self.source.skills
        if not skills.targets:
            return []
        # deferred: the reports layer, only with a skill in play
        from pytest_skilltrigger.reports.terminal import (
            case_grader_lines,
            not_collected_lines,
            reading_lines,
            untested_lines,
        )

        # deferred: the skills layer, only with a skill in play
        from pytest_skilltrigger.skills.skill import reading_note

        not_collected = [(n.folder, n.reason) for n in skills.not_collected]
        listed = [t.skill for t in skills.targets] + list(skills.untested)
        notes = [(s.skill_md, note) for s in listed if (note := reading_note(s))]
        cases = [
            (str(e.extra["case_dir"]), e.extra)
            for t in skills.targets
            for e in t.eval_set.entries
            if e.extra.get("case_dir")
        ]
        base = str(config.invocation_params.dir)
        narrowing = self.source.narrowing
        narrowed = narrowing.header_lines() if narrowing is not None else []
        merging = narrowing is not None and narrowing.parts is not None
        return (
            (narrowed if merging else self._header_lines() + narrowed)
            + [f"skilltrigger: {note}" for note in skills.notes]
            + reading_lines(notes)
            + untested_lines([s.id for s in skills.untested])
            + case_grader_lines(cases, base)
            + not_collected_lines(not_collected, base)
        )

    def _header_lines(self) -> list[str]:
        # deferred: the reports layer, only with a skill in play
        from pytest_skilltrigger.reports.terminal import control_lines, header_lines, setup_lines

        engine = self.source.session_engine.started  # made at session start (not when collecting)
        settings, count = self.source.setup.settings, len(self.source.skills.targets)
        if engine is None or engine.no_backend:
            return header_lines(count, settings, None)
        estimate = self._estimate(engine)
        self.lines.expect(estimate)
        lines = header_lines(count, settings, engine.context_label, estimate, self.source.drafted)
        spent = engine.spending().get("controls")
        on = True if settings.controls_on else settings.controls_off_by
        lines += control_lines(on, engine.control_results, spent)
        project = self.source.setup.project
        if project is not None:
            builtin = (engine.context_label or "").startswith("builtin")
            lines += setup_lines(project, builtin)
        load = engine.load()
        if load is not None:
            # deferred: the reports layer, only with a skill in play
            from pytest_skilltrigger.reports.terminal import load_header_line

            lines.append(load_header_line(load))
        return lines

    def _estimate(self, engine: TriggerSession) -> Estimate | None:
        """What the session's items (and its improvement rounds, at most) may cost."""
        # deferred: the items load the model layer, only with a skill in play
        from pytest_skilltrigger.plugin.items import ItemAxes, SessionRequests

        setup, skills = self.source.setup, self.source.skills
        narrowing = self.source.narrowing
        keep = narrowing.keeps_file if narrowing is not None else None
        axes = ItemAxes.of(setup.settings)
        requests = SessionRequests(skills, axes).of_session(engine.plan, keep)
        self._planned_items = len(requests)
        estimate = engine.estimate(requests)
        if estimate is not None and setup.optimize is not None:
            # deferred: the optimizer, only for --trigger-optimize
            from pytest_skilltrigger.optimizer.spend_bound import rounds_bound

            stored = bool(estimate.samplings) and estimate.stored == estimate.samplings
            bound = rounds_bound(
                skills.targets, skills.routing_sets, setup.settings, setup.optimize, stored
            )
            estimate = estimate.with_rounds(*bound)
        return estimate

    def pytest_report_collectionfinish(
        self, config: pytest.Config, start_path: Any, items: list[pytest.Item]
    ) -> list[str]:
        """What the collection says beside pytest's count: the other tests collected with
        the trigger items, the hint when nothing was, and the estimate again once the items
        are known (see :meth:`_selected_estimate`)."""
        if not items:
            return self._nothing_collected(config)
        if not self.source.skills.targets:
            return []
        # deferred: the items load the model layer, only with a skill in play
        from pytest_skilltrigger.plugin.items import SamplingItem

        selected = sum(isinstance(item, SamplingItem) for item in items)
        lines = []
        others = len(items) - selected
        if selected and others:
            tests = "test" if others == 1 else "tests"
            lines.append(
                f"skilltrigger: {others} other {tests} collected beside {selected} trigger "
                "items (-m skill_trigger runs the trigger items alone)"
            )
        return lines + self._selected_estimate(config, items, selected)

    def _nothing_collected(self, config: pytest.Config) -> list[str]:
        """A run that collected nothing at all in a folder with skills below it: one line on
        what to run (a plain ``pytest`` at a project's root collects no skill)."""
        if self.source.setup.selection.paths:
            return []
        # deferred: the selection's walk, only when nothing was collected
        from pytest_skilltrigger.support.paths import skill_folders

        here = str(config.invocation_params.dir)
        try:
            count = sum(1 for _ in skill_folders(here))
        except OSError:
            return []
        if not count:
            return []
        skills = "skill" if count == 1 else "skills"
        return [
            f"skilltrigger: no test collected; {count} {skills} below this folder: run "
            "pytest --trigger-skill-path=. (or name a skill's folder)"
        ]

    def _selected_estimate(
        self, config: pytest.Config, items: list[pytest.Item], selected: int
    ) -> list[str]:
        """The estimate again once the items are known, when it differs from the header's:
        for the items ``-k``, ``--ignore`` or a node id selected, or under ``-q``, which
        shows no header (the line is then the only word on the cost before any call)."""
        engine = self.source.session_engine.started
        if not self.source.skills.targets or engine is None or engine.no_backend:
            return []
        # deferred: the items load the model layer, only with a skill in play
        from pytest_skilltrigger.plugin.items import requests_of_items

        planned = self._planned_items
        quiet = config.get_verbosity() < 0
        if not quiet and (planned is None or selected >= planned):
            return []
        estimate = engine.estimate(requests_of_items(items, engine.plan))
        if estimate is None:
            return []
        chosen = f"the {selected} selected items' " if planned and selected < planned else ""
        return [f"skilltrigger: {chosen}{estimate.line()}"]

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.lines.item_started()

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.lines.item_finished()
        if self.source.skills.targets:
            found = self.source.end.gathered.result_of(nodeid)
            if found is not None:
                self._say_waiting(sum(o.waited for o in found[1].outcomes))

    def _say_waiting(self, waited: float) -> None:
        """Every half a minute or so, how long the runs have waited for the rate limit."""
        self._waited += waited
        now = time.monotonic()
        if self._waited >= 1.0 and now - self._waiting_said >= WAITING_EVERY:
            self._waiting_said = now
            self.lines.write(
                f"skilltrigger: runs are waiting on the rate limit: {self._waited:.0f}s so far"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        source = self.source
        conclusion = source.conclusion
        if source.setup.config.option.collectonly:
            return
        if not source.skills.targets and conclusion is None:
            return
        lines = self._quiet_lines(terminalreporter) + source.end.status_lines(
            source.session_engine.started
        )
        if conclusion is not None:
            lines += conclusion.terminal_lines()
            if conclusion.gate_failures:
                # pytest's last line counts what its stats hold: "10 passed, 1 gate failed",
                # not a green "10 passed" on a session that exits 1
                terminalreporter.stats.setdefault(GATE_FAILED, []).append(conclusion)
        lines += self._load_summary()
        for line in lines:
            if line.separator:
                terminalreporter.write_sep("=", line.text)
            else:
                terminalreporter.write_line(line.text, **({line.style: True} if line.style else {}))

    def _quiet_lines(self, terminalreporter: Any) -> list[TerminalLine]:
        """Under ``-q`` the header is not shown: what was listed but not tested, and the
        cases not collected with why, are said here instead."""
        if terminalreporter.verbosity >= 0:
            return []
        # deferred: the reports layer, only with a skill in play
        from pytest_skilltrigger.reports.terminal import (
            TerminalLine,
            not_collected_lines,
            untested_lines,
        )

        skills = self.source.skills
        base = str(self.source.setup.config.invocation_params.dir)
        cases = [(n.folder, n.reason) for n in skills.not_collected]
        texts = untested_lines([s.id for s in skills.untested]) + not_collected_lines(cases, base)
        return [TerminalLine(text, "yellow") for text in texts]

    def _load_summary(self) -> list[TerminalLine]:
        """How many CLI runs were in flight, here or in the xdist workers (none: no line)."""
        # deferred: the reports layer, only with a skill in play
        from pytest_skilltrigger.reports.terminal import TerminalLine, load_summary_line

        load = self.source.end.load(self.source.session_engine.started)
        if load is None or not load.most_in_flight:
            return []
        return [TerminalLine(load_summary_line(load))]
