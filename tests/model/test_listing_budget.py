"""The listing budget: the rule reproduces the edges measured with the pinned CLI.

Each case is one of the experiments written up in ``model/listing_budget.py``: the CLI's own
listing of the same skills (names, lengths, model) had exactly these bare names.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_skilltrigger.model.context import FIRST_PLUGIN, USER, ListedSkill, TriggerContext
from pytest_skilltrigger.model.listing_budget import (
    BARE,
    CUT,
    FULL,
    UNLISTED,
    fit_of,
    how_shown,
    listing_budget,
)

NO_ENV: dict[str, str] = {}


def skill(name: str, length: int) -> ListedSkill:
    return ListedSkill(name, ("Use it for widgets " * 200)[: length - 1] + ".")


def project(*lengths: int, installed: tuple[ListedSkill, ...] = ()) -> TriggerContext:
    skills = [skill(f"skill-{i:03d}", n) for i, n in enumerate(lengths)]
    return TriggerContext(
        skills[0].name, skills[0].description, tuple(skills[1:]), installed=installed
    )


@pytest.mark.parametrize(
    "model,budget",
    [
        ("claude-haiku-4-5", 8000),
        ("claude-haiku-4-5-20251001", 8000),
        ("claude-sonnet-4-6", 8000),
        ("claude-opus-4-6", 8000),
        ("claude-opus-4-7", 30000),
        ("claude-opus-5-5", 30000),
        ("claude-sonnet-5-5", 30000),
        ("claude-haiku-5-5", 30000),
        ("claude-sonnet-4-6[1m]", 40000),
        ("a-model-the-cli-does-not-know", 30000),
        (None, 30000),
    ],
)
def test_the_budget_follows_the_models_context_window(model: str | None, budget: int) -> None:
    assert listing_budget(model, NO_ENV) == budget


def test_the_clis_environment_variable_replaces_the_budget() -> None:
    assert listing_budget("claude-haiku-4-5", {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "20000"}) == 20000
    assert listing_budget("claude-haiku-4-5", {"SLASH_COMMAND_TOOL_CHAR_BUDGET": "x"}) == 8000


@pytest.mark.parametrize(
    "lengths,bare",
    [
        ((882, 882), set()),  # 8,000 characters: every text kept
        ((883, 882), {"security-review"}),  # 8,001: the last built-in command loses its text
        ((1500, 265), {"security-review"}),
        ((300,) * 6, {"project-init", "security-review"}),
        ((300,) * 8, {"skill-006", "skill-007", "project-init", "security-review"}),
        ((300,) * 10, {f"skill-{i:03d}" for i in range(5, 10)}),
    ],  # 10 -> 5 keep their text
)
def test_haiku_4_5_shows_the_bare_names_the_cli_showed(lengths: tuple, bare: set) -> None:
    assert fit_of(project(*lengths), "claude-haiku-4-5", NO_ENV).bare == bare


def test_installed_skills_come_first_and_share_the_budget() -> None:
    """4 installed and 4 project skills of ~300 characters on claude-haiku-4-5: the last two
    project skills are bare, the installed ones keep their text."""
    installed = tuple(replace(skill(f"inst-{i}", 300), group=USER) for i in range(4))
    fit = fit_of(project(300, 300, 300, 300, installed=installed), "claude-haiku-4-5", NO_ENV)
    assert {n for n in fit.bare if n.startswith(("skill", "inst"))} == {"skill-002", "skill-003"}


def test_a_large_window_holds_what_a_small_one_cuts() -> None:
    """60 skills of ~382 characters fit the 30,000 of claude-opus-5-5 whole; 30 of 780 do not."""
    assert not fit_of(project(*(382,) * 60), "claude-opus-5-5", NO_ENV).bare
    assert fit_of(project(*(780,) * 30), "claude-opus-5-5", NO_ENV).bare


def test_the_tested_skill_is_shown_full_cut_bare_or_not_at_all() -> None:
    assert how_shown(project(300, 300), "claude-haiku-4-5", NO_ENV)[0] == FULL
    long = TriggerContext("pdf", "Merge PDFs. " * 200)
    assert how_shown(long, "claude-opus-5-5", NO_ENV)[0] == CUT
    last = TriggerContext(
        "skill-009",
        skill("x", 300).description,
        tuple(skill(f"skill-{i:03d}", 300) for i in range(9)),
    )
    shown, fit = how_shown(last, "claude-haiku-4-5", NO_ENV)
    assert shown == BARE and fit.over_by == fit.size - 8000 > 0
    assert fit.line(last.tested) == "- skill-009"
    hidden = TriggerContext("pdf", "Merge PDFs.", model_invocable=False)
    assert how_shown(hidden, "claude-haiku-4-5", NO_ENV)[0] == UNLISTED


def test_commands_share_the_budget_in_listing_order() -> None:
    """Two project skills, three project commands, three plugin commands and three plugin
    skills of about 250 characters on claude-haiku-4-5: the CLI kept the text of the first
    seven and showed the rest bare (plugin skills lose their text before plugin commands,
    which lose theirs before the project's commands, then the project's skills)."""

    def text(kind: str, name: str, length: int) -> str:
        return (
            f"{kind} {name} does its job well. " + "Lorem ipsum dolor sit amet consectetur. " * 7
        )[:length]

    project_skills = [ListedSkill(n, text("Project skill", n, 250)) for n in ("ps1", "ps2")]
    commands = [
        ListedSkill(n, text("Project command", n, 250), command=True) for n in ("pc1", "pc2", "pc3")
    ]
    plugin_commands = [
        ListedSkill(f"acme:{n}", text("Plugin command", n, 249), group=FIRST_PLUGIN, command=True)
        for n in ("gc1", "gc2", "gc3")
    ]
    plugin_skills = [
        ListedSkill(f"acme:{n}", text("Plugin skill", n, 250), group=FIRST_PLUGIN)
        for n in ("gs1", "gs2", "gs3")
    ]
    tested = project_skills[0]
    context = TriggerContext(
        tested.name,
        tested.description,
        (project_skills[1],),
        installed=tuple(commands + plugin_commands + plugin_skills),
    )
    bare = fit_of(context, "claude-haiku-4-5", NO_ENV).bare
    assert bare == {"acme:gc3", "acme:gs1", "acme:gs2", "acme:gs3", "security-review"}
