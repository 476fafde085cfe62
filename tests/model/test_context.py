"""The listing rules of Claude Code, as the builtin context applies them (the claude-code
backend's test checks the same lines against the pinned CLI's own listing)."""

from __future__ import annotations

from pytest_skilltrigger.model.context import (
    DEFAULT_COMPETITORS,
    LISTED_LIMIT,
    ListedSkill,
    TriggerContext,
    cut_point,
    listed_text,
)


def test_when_to_use_is_appended_and_newlines_fold_to_single_spaces() -> None:
    assert listed_text("Merge PDFs.\nAnd split them.", "When PDFs are involved.") == (
        "Merge PDFs. And split them. - When PDFs are involved."
    )
    assert listed_text("Trailing newline of a block scalar\n") == (
        "Trailing newline of a block scalar "
    )


def test_brackets_are_escaped_and_ampersands_left_alone() -> None:
    assert listed_text("Use <b> tags & more > less") == "Use &lt;b&gt; tags & more &gt; less"


def test_a_long_text_is_cut_after_escaping_and_ends_with_an_ellipsis() -> None:
    text = listed_text("x" * 1500, "<" * 100)
    assert len(text) == LISTED_LIMIT and text.endswith("\u2026")
    assert text.count("&lt;") == (LISTED_LIMIT - 1 - 1503) // 4
    assert listed_text("y" * LISTED_LIMIT) == "y" * LISTED_LIMIT  # exactly the limit: kept
    cut = cut_point("x" * 1500, "<" * 100)
    assert cut is not None and cut[0] == LISTED_LIMIT - 1 and cut[1].endswith("&lt;")
    assert cut_point("short") is None


def test_project_skills_come_first_sorted_then_built_ins() -> None:
    context = TriggerContext(
        "pdf", "Merge PDFs.", (ListedSkill("zeta", "Z."), ListedSkill("alpha", "A."))
    )
    names = [s.name for s in context.listing()]
    assert names[:3] == ["alpha", "pdf", "zeta"]
    assert names[3:] == [s.name for s in DEFAULT_COMPETITORS]


def test_a_project_skill_shadows_a_built_in_of_its_name() -> None:
    context = TriggerContext("review", "Our own review skill.")
    listed = [s for s in context.listing() if s.name == "review"]
    assert [s.description for s in listed] == ["Our own review skill."]


def test_a_skill_the_model_may_not_invoke_is_not_listed() -> None:
    context = TriggerContext("pdf", "Merge PDFs.", model_invocable=False)
    assert "pdf" not in [s.name for s in context.listing()]
    assert context.tested.line == "- pdf: Merge PDFs."


def test_the_key_follows_the_listed_lines() -> None:
    base = TriggerContext("pdf", "Merge PDFs.")
    assert base.key() == TriggerContext("pdf", "Merge PDFs.").key()
    assert base.key() != TriggerContext("pdf", "Merge PDFs.", when_to_use="Always.").key()
    assert base.key() != TriggerContext("pdf", "Merge PDFs.", model_invocable=False).key()
    # the file's text is not part of the listing: same key
    assert base.key() == TriggerContext("pdf", "Merge PDFs.", skill_md="---\n...").key()
