"""What the role of every pytest process shares: its settings, its skills and its engine.

:mod:`pytest_skilltrigger.plugin` registers exactly one role object per process, whose
methods are the hooks: :class:`~pytest_skilltrigger.plugin.controller.LocalController` for a
plain run, :class:`~pytest_skilltrigger.plugin.dist_controller.DistController` on the xdist
controller and :class:`~pytest_skilltrigger.plugin.worker.DistWorker` on each xdist worker.

Nothing of the engine is imported until a skill is in play, an option of ours is given or the
``skill_trigger`` fixture is used: a project that has the plugin installed and collects no
skill pays for reading its options only.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin import options, pytest_internals
from pytest_skilltrigger.plugin.selection import adjust_args, select

if TYPE_CHECKING:
    from pytest_skilltrigger.backends import BackendParts, TriggerBackend
    from pytest_skilltrigger.engine.session import Notice, TriggerSession
    from pytest_skilltrigger.engine.share import ProcessShare
    from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
    from pytest_skilltrigger.model.settings import Gates, Settings
    from pytest_skilltrigger.skills.catalog import Found, Target
    from pytest_skilltrigger.skills.plugin_eval.read import NotCollected
    from pytest_skilltrigger.skills.routing_set import RoutingSet
    from pytest_skilltrigger.skills.skill import Skill


class Role:
    """Options read and checked, the skills in play loaded, the engine made on first use.

    Every bad option or file raises :class:`~pytest_skilltrigger.support.errors.InputError`
    here, at configure time, before anything is written or called.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        if options.any_given(config):  # a bad option is an error even with no skill in play
            _ = self.settings, self.gates
        self.optimize = options.optimize_options(config)
        self.draft = options.draft_mode(config)
        given, ini = options.skill_paths(config)
        selection = select(config, given, ini)
        self.targets: list[Target] = []
        #: skills found without an eval set: listed beside the others, not tested
        self.untested: list[Skill] = []
        #: ``claude plugin eval`` cases found that are not trigger checks, with why
        self.not_collected: list[NotCollected] = []
        self.routing_sets: list[RoutingSet] = []
        if selection.paths:
            from pytest_skilltrigger.skills.catalog import load_routing_sets

            found = self.find_targets(selection.paths)
            self.targets, self.untested = found.targets, found.missing
            self.not_collected = found.not_collected
            self.routing_sets = load_routing_sets(self.targets, selection.paths, self.untested)
        if self.targets:
            _ = self.settings
        self.by_skill_md = {t.skill.skill_md: t for t in self.targets}
        self.by_routing_path = {r.path: r for r in self.routing_sets}
        adjust_args(config, selection)

    def find_targets(self, paths: list[str]) -> Found:
        """The skills in play with their eval sets, and those without one (with
        ``--draft-eval-set`` the controller drafts theirs)."""
        from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets

        target_options = TargetOptions(
            eval_set=self.config.getoption("eval_set"),
            description=self.config.getoption("skill_description"),
            installed=self.installed,
            draft_missing=bool(self.draft),
        )
        return find_targets(paths, target_options)

    @cached_property
    def installed(self) -> tuple[ListedSkill, ...]:
        """The ``--trigger-extra-skills`` skills, listed before the project's in every
        context: the items', the fixture's and a draft's."""
        from pytest_skilltrigger.skills.catalog import load_installed

        return load_installed(options.extra_skill_paths(self.config))

    @cached_property
    def gates(self) -> Gates:
        """How the session gates CI, checked (read with the settings, on the same terms)."""
        return options.gates(self.config)

    @cached_property
    def settings(self) -> Settings:
        """The engine's settings, checked (a bad price file too). Built at configure when an
        option of ours is given or a skill is in play, else on first use: the defaults need
        no check, and a project without skills then loads none of the engine."""
        return options.settings_from_config(self.config)

    def routing_contexts(self, routing: RoutingSet) -> dict[str, TriggerContext]:
        """The contexts of the skills a routing set chooses among (its folder's)."""
        import os

        folder = routing.folder
        return {
            t.name: t.context() for t in self.targets if os.path.dirname(t.skill.path) == folder
        }

    #: this process's part when it is one of several running the session
    share: ProcessShare | None = None

    @cached_property
    def engine(self) -> TriggerSession:
        """The engine's front door for this process, made on first use."""
        from pytest_skilltrigger.engine.session import TriggerSession

        return TriggerSession(
            self.settings, maker=self.make_backend, share=self.share, notices=self.notice
        )

    def make_backend(
        self, name: str, settings: Settings, parts: BackendParts
    ) -> TriggerBackend | None:
        """A backend of the name, as the ``pytest_skilltrigger_make_backend`` hook makes it
        (the built-in ones are this plugin's own implementation of it)."""
        hook = self.config.hook.pytest_skilltrigger_make_backend
        made: TriggerBackend | None = hook(name=name, settings=settings, parts=parts)
        return made

    def notice(self, notice: Notice) -> None:
        """Show what a person waiting on the session should know (a controller does)."""

    @property
    def started_engine(self) -> TriggerSession | None:
        """The engine if anything has used it yet (reports say so when nothing ran)."""
        return self.__dict__.get("engine")

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """With skills in play the engine is made now, before collection and the run loop:
        every later hook finds it ready (a run that only collects does without). Without a
        backend, ``--trigger-require-backend`` ends the session here with one line, instead
        of an error for every item."""
        if self.targets and not self.config.option.collectonly:
            from pytest_skilltrigger.support.errors import InputError  # with the engine

            try:
                reason = self.engine.no_backend
            except InputError as exc:  # a backend nobody makes: bad input, before any call
                raise pytest.UsageError(str(exc)) from None
            if reason and self.gates.require_backend:
                raise pytest.UsageError(
                    f"no backend can run the trigger tests: {reason} "
                    "(--trigger-require-backend is set)"
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Finish this role's work, then stop sampling: runs still queued (after ``-x``, a
        fatal error or Ctrl-C) are abandoned, not left running through the summary."""
        try:
            self.finish(session)
        finally:
            engine = self.started_engine
            if engine is not None:
                engine.close(wait=False)

    def finish(self, session: pytest.Session) -> None:
        """What this role does at the end of the session (nothing, but on a controller)."""


def warn_at(config: pytest.Config, path: str, text: str) -> None:
    """A configuration warning located at the file it is about (a SKILL.md), not at this
    module, with pytest's warning filters applied."""
    pytest_internals.warn_at_file(config, path, text)
