"""Plugin skills and folder-name ids in the listing, and which skill a Skill call loads:
the rules the pinned CLI showed (``../shared/reference/claude-code.md``, "Skills from
plugins")."""

from __future__ import annotations

import pytest

from pytest_skilltrigger.model.context import (
    FIRST_PLUGIN,
    PROJECT,
    USER,
    ListedSkill,
    TriggerContext,
    resolve_call,
)
from pytest_skilltrigger.model.listing_budget import fit_listing
from pytest_skilltrigger.model.outcome import RunOutcome


def acme(folder: str, alias: str | None = None, rank: int = 0) -> ListedSkill:
    plugin = ["acme", "crux"][rank]
    return ListedSkill(
        f"{plugin}:{folder}", f"{folder} text.", alias=alias, group=FIRST_PLUGIN + rank
    )


# a project skill ``proj``, a project folder ``foo`` named ``bar``, a user skill, and plugin
# acme's alpha, beta and gamma (named delta); crux's alpha, loaded second
SKILLS = (
    ListedSkill("proj", "proj text."),
    ListedSkill("foo", "foo text.", alias="bar"),
    ListedSkill("aaa-user", "user text.", group=USER),
    acme("gamma", alias="acme:delta"),
    acme("beta"),
    acme("alpha"),
    acme("alpha", rank=1),
)


def context(
    skill: str = "acme:alpha", siblings: tuple[ListedSkill, ...] = SKILLS
) -> TriggerContext:
    tested = next(s for s in siblings if s.name == skill)
    others = tuple(s for s in siblings if s.name != skill)
    return TriggerContext(
        skill,
        tested.description,
        others,
        generic_competitors=(),
        alias=tested.alias,
        group=tested.group,
    )


def test_the_listing_puts_users_then_projects_then_plugins_in_order() -> None:
    lines = [s.line for s in context().listing()]
    assert lines == [
        "- aaa-user: user text.",
        "- foo (bar): foo text.",
        "- proj: proj text.",
        "- acme:alpha: alpha text.",
        "- acme:beta: beta text.",
        "- acme:gamma (acme:delta): gamma text.",
        "- crux:alpha: alpha text.",
    ]


def test_a_tested_skill_keeps_its_alias_and_place() -> None:
    listing = context("acme:gamma").listing()
    assert listing[5].line == "- acme:gamma (acme:delta): gamma text."


@pytest.mark.parametrize(
    "called,loaded",
    [
        ("acme:alpha", "acme:alpha"),
        ("/acme:alpha", "acme:alpha"),
        ("acme:alpha ", "acme:alpha"),
        ("acme:gamma", "acme:gamma"),
        ("acme:delta", "acme:gamma"),  # plugin:frontmatter-name
        ("delta", "acme:gamma"),  # the one plugin skill of that frontmatter name
        ("beta", "acme:beta"),
        ("gamma", None),  # a bare plugin folder that is not the frontmatter name
        ("alpha", None),  # two plugins have an alpha
        ("proj", "proj"),
        ("foo", "foo"),
        ("bar", "foo"),  # a project skill's frontmatter name
        ("ACME:alpha", None),  # case-sensitive
        ("acme:Alpha", None),
        ("nonexistent", None),
    ],
)
def test_a_skill_call_loads_what_the_cli_loads(called: str, loaded: str | None) -> None:
    assert resolve_call(context().listing(), called) == loaded


def test_a_project_skill_wins_a_bare_name_over_a_plugins() -> None:
    skills = (ListedSkill("alpha", "project alpha."), acme("alpha"))
    assert resolve_call(context("acme:alpha", skills).listing(), "alpha") == "alpha"


def test_a_run_reads_the_name_the_model_wrote_as_the_skill_it_loads() -> None:
    only_acme = (*SKILLS[:6],)  # no second alpha: bare "alpha" loads acme:alpha
    ctx = context("acme:alpha", only_acme)
    bare = RunOutcome.of_choice("skill:alpha", ctx)
    assert (bare.status, bare.chosen, bare.invoked_as) == ("triggered", "skill:acme:alpha", "alpha")
    listed = RunOutcome.of_choice("skill:acme:alpha", ctx)
    assert (listed.status, listed.invoked_as) == ("triggered", None)
    other = RunOutcome.of_choice("skill:delta", ctx)
    assert (other.status, other.chosen, other.invoked_as) == (
        "not_triggered",
        "skill:acme:gamma",
        "delta",
    )
    refused = RunOutcome.of_choice("skill:gamma", ctx)
    assert (refused.status, refused.chosen, refused.invoked_as) == (
        "not_triggered",
        "skill:gamma",
        "gamma",
    )
    assert RunOutcome.from_dict(bare.to_dict()) == bare


def test_a_bare_line_past_the_budget_keeps_its_alias() -> None:
    skills = [
        ListedSkill("proj", "x" * 300),
        ListedSkill("bud:s9", "y" * 300, alias="bud:nine", group=FIRST_PLUGIN),
    ]
    fit = fit_listing(skills, budget=400)
    assert fit.line(skills[1]) == "- bud:s9 (bud:nine)"
    assert fit.bare == frozenset({"bud:s9"})


def test_group_order_holds_whatever_the_names() -> None:
    skills = (ListedSkill("zzz", "z."), ListedSkill("aaa:a", "a.", group=FIRST_PLUGIN))
    ctx = TriggerContext("zzz", "z.", skills[1:], generic_competitors=(), group=PROJECT)
    assert [s.name for s in ctx.listing()] == ["zzz", "aaa:a"]
