"""Running the improvement rounds for every skill of a session, with their reports.

After each iteration the HTML report and the results folder (with its JSON) are rewritten
(atomically), so a browser that reloads follows the run and an interrupted run keeps what it
finished. SKILL.md is rewritten only when the best description beats the start on test and
keeps its lead when both are measured again on fresh runs; only the description's value
changes, and never when the file changed on disk meanwhile.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_skilltrigger.backends.api.backend import credentials_configured
from pytest_skilltrigger.engine.outcome import QueryResult, Usage, format_score
from pytest_skilltrigger.engine.session import TriggerSession
from pytest_skilltrigger.engine.settings import DEFAULT_MODEL
from pytest_skilltrigger.optimizer.loop import Iteration, Optimization, optimize
from pytest_skilltrigger.optimizer.proposer import AnthropicAsk, DescriptionProposer, Proposal
from pytest_skilltrigger.reports.html_report import render_html
from pytest_skilltrigger.reports.json_report import write_report
from pytest_skilltrigger.skills.catalog import Target
from pytest_skilltrigger.skills.rewrite import FileChangedError, write_description
from pytest_skilltrigger.support.atomic import atomic_write_text
from pytest_skilltrigger.support.errors import InputError
from pytest_skilltrigger.support.interrupts import sigterm_as_interrupt
from pytest_skilltrigger.support.redact import redact


@dataclass(frozen=True)
class OptimizeOptions:
    """The optimizer's knobs; defaults are the reference tool's."""

    holdout: float = 0.4
    max_iterations: int = 5
    seed: int = 42
    improve_model: str | None = None
    report_path: str | None = None
    results_dir: str | None = None
    write: bool = True

    def validated(self) -> OptimizeOptions:
        if not 0.0 <= self.holdout < 1.0:
            raise InputError("--holdout", f"must be within 0..1 (below 1), got {self.holdout}")
        if self.max_iterations < 1:
            raise InputError("--max-iterations", f"must be at least 1, got {self.max_iterations}")
        return self


class OptimizationDriver:
    """Optimises each target in turn and keeps every report up to date."""

    def __init__(
        self,
        session: TriggerSession,
        options: OptimizeOptions,
        log: Callable[[str], None],
    ) -> None:
        self.session = session
        self.options = options
        self.log = log
        self.runs: dict[str, Optimization] = {}
        self.started = time.monotonic()
        self.results_dir: str | None = None
        if options.results_dir:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            os.makedirs(options.results_dir, exist_ok=True)
            for n in range(1000):
                candidate = os.path.join(options.results_dir, stamp + (f"-{n}" if n else ""))
                try:
                    os.mkdir(candidate)  # two runs in the same second get their own folders
                except FileExistsError:
                    continue
                self.results_dir = candidate
                break

    def run(
        self, targets: list[Target], initial: Mapping[str, Mapping[int, QueryResult]]
    ) -> dict[str, dict[str, Any]]:
        """Optimise every target; returns the extra JSON keys per skill path."""
        ask, close = self._asker()
        with sigterm_as_interrupt():
            try:
                self._run_targets(targets, initial, DescriptionProposer(ask))
            except KeyboardInterrupt:
                # between rounds (writing reports or SKILL.md, which is atomic): keep what
                # finished and say it was interrupted
                if self.runs:
                    current = list(self.runs.values())[-1]
                    current.interrupted = True
                    current.exit_reason = f"interrupted ({current.exit_reason or 'rounds'})"
                self.log("interrupted: SKILL.md is either unchanged or completely rewritten")
            finally:
                close()
        return self.extra()

    def _asker(self) -> tuple[Callable[[str], tuple[str, Usage]], Callable[[], None]]:
        """The Messages API when credentials are configured, else the Claude Code CLI."""
        backend = self.session.backend
        if credentials_configured() or backend is None or not hasattr(backend, "ask"):
            model = self.options.improve_model or (
                self.session.model
                if self.session.backend_name == "anthropic"
                else self.session.settings.resolved_model(DEFAULT_MODEL)
            )
            api = AnthropicAsk(model)
            return api, api.close
        model = self.options.improve_model
        return (lambda prompt: backend.ask(prompt, model=model)), (lambda: None)

    @property
    def interrupted(self) -> bool:
        return any(run.interrupted for run in self.runs.values())

    def _run_targets(
        self,
        targets: list[Target],
        initial: Mapping[str, Mapping[int, QueryResult]],
        proposer: DescriptionProposer,
    ) -> None:
        for target in targets:
            run = optimize(
                target,
                self.session,
                proposer,
                holdout=self.options.holdout,
                max_iterations=self.options.max_iterations,
                seed=self.options.seed,
                initial=initial.get(target.skill.skill_md, {}),
                on_iteration=self._on_iteration,
            )
            self.runs[target.skill.path] = run
            self._publish()
            if run.interrupted:
                self.log(f"{target.name}: interrupted; SKILL.md left unchanged")
                break
            self._conclude(run)

    def extra(self) -> dict[str, dict[str, Any]]:
        return {path: run.to_dict() for path, run in self.runs.items()}

    def _on_iteration(self, run: Optimization, it: Iteration) -> None:
        self.runs[run.target.skill.path] = run
        total = self.options.max_iterations
        elapsed = time.monotonic() - self.started
        tokens = it.usage.input_tokens + it.usage.output_tokens
        if it.evaluated:
            self.log(
                f"{run.target.name} iteration {it.iteration}/{total}: "
                f"train {format_score(it.train)}, test {format_score(it.test)}, "
                f"{elapsed:.1f}s, {tokens:,} tokens"
            )
        else:
            note = it.to_dict().get("note", "proposal dropped")
            self.log(f"{run.target.name} iteration {it.iteration}/{total}: {note}")
        self._save_proposal(run, it.iteration, it.proposal)
        self._publish()

    def _publish(self) -> None:
        """Rewrite the HTML report and the results folder (nothing to do without them)."""
        if not (self.options.report_path or self.results_dir):
            return
        skills = [
            {"skill_name": run.target.name, "skill_path": run.target.skill.path, **run.to_dict()}
            for run in self.runs.values()
        ]
        running = not all(run.exit_reason for run in self.runs.values())
        page = render_html(skills, running=running)
        if self.options.report_path:
            atomic_write_text(self.options.report_path, page)
        if self.results_dir:
            atomic_write_text(os.path.join(self.results_dir, "report.html"), page)
            write_report(os.path.join(self.results_dir, "results.json"), {"skills": skills})

    def _save_proposal(self, run: Optimization, number: int, proposal: Proposal | None) -> None:
        if not self.results_dir or proposal is None:
            return
        folder = os.path.join(self.results_dir, run.target.name, f"iteration-{number}")
        files = {
            "prompt.txt": proposal.prompt,
            "response.txt": proposal.response,
            "repair_prompt.txt": proposal.repair_prompt,
            "repair_response.txt": proposal.repair_response,
            "description.txt": proposal.description,
        }
        for name, text in files.items():
            if text is not None:
                atomic_write_text(os.path.join(folder, name), redact(text))
        counts = {
            "prompt_chars": len(proposal.prompt),
            "response_chars": len(proposal.response),
            "description_chars": len(proposal.description or ""),
            "problems": proposal.problems,
            "error": proposal.error,
        }
        atomic_write_text(os.path.join(folder, "counts.json"), json.dumps(counts, indent=2))

    def _conclude(self, run: Optimization) -> None:
        """Print before/after and rewrite SKILL.md when the best beats the start."""
        target = run.target
        data = run.to_dict()
        self.log(f"{target.name}: {data['exit_reason']}")
        self.log(f"  before: {target.description}")
        start = run.evaluated()[0] if run.evaluated() else None
        if start is not None:
            self.log(
                f"    train {format_score(start.train)}, test {format_score(start.test)}"
            )
        self.log(f"  best (iteration {data['best_iteration']}): {data['best_description']}")
        self.log(f"    train {data['best_train_score']}, test {data['best_test_score']}")
        confirmation = run.confirmation
        if confirmation is not None:
            on, verdict = confirmation.on, confirmation.verdict()
            self.log(f"    measured again on fresh runs ({on}): {verdict}")
        if not run.improved:
            best = run.best() if run.evaluated() else None
            if start is not None and best is not None and (
                run.incomplete(start) or run.incomplete(best)
            ):
                reason = "some queries errored or were skipped, so the comparison is not sound"
            elif confirmation is not None and not confirmation.complete:
                reason = "some fresh runs errored or were skipped, so the lead is not confirmed"
            elif confirmation is not None:
                reason = (
                    "the best's lead came from chance: it did not hold on fresh runs "
                    "(paste it by hand if you still want it)"
                )
            else:
                reason = "nothing beat the starting description"
            self.log(f"  {target.skill.skill_md} unchanged: {reason}")
            return
        if not self.options.write:
            self.log("  not written (writing disabled)")
            return
        try:
            write_description(target.skill.skill_md, data["best_description"], target.skill.raw)
        except FileChangedError:
            self.log(
                f"  {target.skill.skill_md} changed on disk during the run: not overwritten; "
                "paste the best description by hand"
            )
            return
        except InputError as exc:
            self.log(f"  not written: {exc}")
            return
        self.log(f"  wrote the new description to {target.skill.skill_md}")
