"""What a session's options say, and the skills in play: read and checked once, at configure.

Every bad option or file raises :class:`~pytest_skilltrigger.support.errors.InputError` here,
before anything is written or called. Nothing of the engine is imported until a skill is in
play or an option of ours is given: a project that has the plugin installed and collects no
skill pays for reading its options only.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

import pytest

from pytest_skilltrigger.plugin import options
from pytest_skilltrigger.plugin.selection import Selection, adjust_args, select

if TYPE_CHECKING:
    from pytest_skilltrigger.backends import BackendParts, TriggerBackend
    from pytest_skilltrigger.engine.session import Notice, TriggerSession
    from pytest_skilltrigger.engine.share import ProcessShare
    from pytest_skilltrigger.model.context import ListedSkill, ProjectSetup, TriggerContext
    from pytest_skilltrigger.model.settings import Gates, OptimizerSettings, Settings
    from pytest_skilltrigger.skills.catalog import Found, Target
    from pytest_skilltrigger.skills.installed import Install
    from pytest_skilltrigger.skills.plugin_eval.read import NotCollected
    from pytest_skilltrigger.skills.routing_set import RoutingSet
    from pytest_skilltrigger.skills.skill import Skill


class Setup:
    """The session's options, read once: the settings, the gates, the optimizer's options,
    drafting, and which paths hold the skills in play."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        if options.any_given(config):  # a bad option is an error even with no skill in play
            _ = self.settings, self.gates
        self.optimize: OptimizerSettings | None = options.optimize_options(config)
        self.draft: str | None = options.draft_mode(config)
        given, ini = options.skill_paths(config)
        self.selection: Selection = select(config, given, ini)

    @cached_property
    def settings(self) -> Settings:
        """The engine's settings, checked. Built at configure when an option of ours is given
        or a skill is in play, else on first use: the defaults need no check."""
        return options.settings_from_config(self.config)

    @cached_property
    def gates(self) -> Gates:
        """How the session gates CI, checked (read with the settings, on the same terms)."""
        return options.gates(self.config)

    @cached_property
    def installed(self) -> tuple[ListedSkill, ...]:
        """The ``--trigger-extra-skills`` skills, listed before the project's in every
        context: the items', the fixture's and a draft's."""
        from pytest_skilltrigger.skills.neighbours import load_installed  # deferred: yaml

        return load_installed(options.extra_skill_paths(self.config))

    @cached_property
    def project(self) -> ProjectSetup | None:
        """The project's own setup, from rootdir (``--trigger-setup=project``)."""
        if self.settings.setup != "project":
            return None
        # deferred: the skills layer, only with a skill in play
        from pytest_skilltrigger.skills.project_setup import read_project_setup

        return read_project_setup(str(self.config.rootpath))

    @cached_property
    def install(self) -> Install | None:
        """The user's own Claude Code install (``--trigger-crowd=installed``), read from the
        home folder for a session in this project."""
        if not self.settings.crowd_installed:
            return None
        from pytest_skilltrigger.skills.installed import read_install  # deferred: skills layer

        return read_install(os.path.expanduser("~"), self.session_folder)

    @property
    def session_folder(self) -> str:
        """The folder a session stands in: the project root, or --trigger-cwd's subfolder."""
        root = str(self.config.rootpath)
        return os.path.join(root, self.settings.cwd) if self.settings.cwd else root

    def find(self, paths: list[str], *, without_sets: bool = False) -> Found:
        """The skills under ``paths`` with their eval sets, and those without one (with
        ``--trigger-draft`` a controller drafts theirs; ``without_sets``: a command that
        needs none, such as the harvest, takes them as they are)."""
        # deferred: the skills layer loads yaml, only when skills are read
        from pytest_skilltrigger.skills.catalog import TargetOptions, find_targets

        target_options = TargetOptions(
            eval_set=options.value(self.config, "--trigger-eval-set"),
            description=options.value(self.config, "--trigger-description"),
            installed=self.installed,
            draft_missing=bool(self.draft) or without_sets,
            project=self.project,
            permission_mode=self.settings.first_mode,
            cwd=self.settings.cwd,
            rootdir=str(self.config.rootpath),
            within=self.settings.turn_rule(self.session_folder),
            install=self.install,
        )
        found = find_targets(paths, target_options)
        if self.settings.within_note:
            found = replace(found, notes=(*found.notes, self.settings.within_note))
        if self.install is None:
            return found
        from pytest_skilltrigger.skills.installed import install_notes  # deferred: skills layer

        tested = [(t.name, t.start_context) for t in found.targets]
        notes = install_notes(self.install, tested, self.settings.lane_models[0])
        return replace(found, notes=(*found.notes, *notes))

    def in_play(self, found: Found | None) -> SkillsInPlay:
        """The skills in play (``found`` for the selection's paths, None when it has none),
        with the routing sets of their folders; pytest's arguments then reach them."""
        skills = SkillsInPlay()
        if found is not None:
            # deferred: the skills layer loads yaml, only when skills are read
            from pytest_skilltrigger.skills.catalog import load_routing_sets

            routing = load_routing_sets(found, self.selection.paths)
            skills = SkillsInPlay(
                tuple(found.targets),
                tuple(found.missing),
                tuple(found.not_collected),
                tuple(routing),
                found.notes,
            )
            _ = self.settings  # a skill is in play: the settings are checked now
        adjust_args(self.config, self.selection, skills.files)
        return skills


@dataclass(frozen=True)
class SkillsInPlay:
    """The session's skills: those with an eval set (the targets), those found without one
    (listed beside the others, not tested), the ``claude plugin eval`` cases that are not
    trigger checks (with why), and the folders' routing sets."""

    targets: tuple[Target, ...] = ()
    untested: tuple[Skill, ...] = ()
    not_collected: tuple[NotCollected, ...] = ()
    routing_sets: tuple[RoutingSet, ...] = ()
    notes: tuple[str, ...] = ()  # what the header says once about them
    by_skill_md: dict[str, Target] = field(init=False, compare=False, repr=False)
    by_routing_path: dict[str, RoutingSet] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_skill_md", {t.skill.skill_md: t for t in self.targets})
        object.__setattr__(self, "by_routing_path", {r.path: r for r in self.routing_sets})

    @property
    def files(self) -> list[str]:
        """The files pytest collects items from: each SKILL.md, each routing set."""
        return [*self.by_skill_md, *self.by_routing_path]

    def routing_contexts(self, routing: RoutingSet) -> dict[str, TriggerContext]:
        """The contexts of the skills a routing set chooses among (its folder's)."""
        return {
            t.name: t.context()
            for t in self.targets
            if os.path.dirname(t.skill.path) == routing.folder
        }


class SessionEngine:
    """This process's engine, made on first use with the backends the
    ``pytest_skilltrigger_make_backend`` hook makes (the built-in ones are the plugin's own
    implementation of it); a process that never samples never makes it. ``share`` makes this
    process's part of the session's runs and budget, when it is one of several."""

    def __init__(
        self,
        setup: Setup,
        *,
        share: Callable[[], ProcessShare] | None = None,
        notices: Callable[[Notice], None] | None = None,
    ) -> None:
        self.setup = setup
        self.share = share
        self.notices = notices

    @cached_property
    def engine(self) -> TriggerSession:
        """The engine's front door for this process."""
        # deferred: the engine loads the store, the backends and their dependencies, which a
        # project that collects no skill never needs
        from pytest_skilltrigger.engine.session import TriggerSession

        return TriggerSession(
            self.setup.settings,
            maker=self._make_backend,
            share=self.share() if self.share is not None else None,
            notices=self.notices,
        )

    @property
    def started(self) -> TriggerSession | None:
        """The engine if anything has used it yet (reports say so when nothing ran)."""
        engine: TriggerSession | None = self.__dict__.get("engine")
        return engine

    def _make_backend(
        self, name: str, settings: Settings, parts: BackendParts
    ) -> TriggerBackend | None:
        made: TriggerBackend | None = self.setup.config.hook.pytest_skilltrigger_make_backend(
            name=name, settings=settings, parts=parts
        )
        return made

    def close(self) -> None:
        """Stop sampling: runs still queued (after ``-x``, a fatal error or Ctrl-C) are
        abandoned, not left running through the summary."""
        engine = self.started
        if engine is not None:
            engine.close(wait=False)
