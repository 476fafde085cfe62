"""Tests for rewriting only the description of a SKILL.md (pytest_skilltrigger.skills.rewrite)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import yaml

from pytest_skilltrigger.skills.cli_frontmatter import read_as_cli
from pytest_skilltrigger.skills.frontmatter import locate_frontmatter
from pytest_skilltrigger.skills.rewrite import replace_description
from pytest_skilltrigger.skills.skill import description_problems, read_skill
from pytest_skilltrigger.skills.write_back import FileChangedError, write_description
from pytest_skilltrigger.support.errors import InputError

WHERE = "skill/SKILL.md"

# Each style: (text before the description line(s), the description line(s), text after).
# Everything outside the middle part must survive a rewrite byte for byte.
HEAD = "---\n# a comment before the name\nname: my-skill   # why this name\n\n"
TAIL = (
    "license: MIT\n"
    "metadata:\n"
    "  author: someone\n"
    "  nested: {a: [1, 2]}\n"
    "tags:\n"
    "  - pdf\n"
    "  - 'docs'\n"
    "# closing comment\n"
    "---\n"
    "# Body\n"
    "\n"
    "description: this is in the body, not the frontmatter\n"
)
STYLES = {
    "plain": (HEAD, "description: Use this for PDFs.\n", TAIL),
    "plain-comment": (HEAD, "description: Use this for PDFs.  # note\n", TAIL),
    "plain-multiline": (HEAD, "description: Use this\n  for PDFs\n\n  and more.\n", TAIL),
    "single": (HEAD, "description: 'It''s: for\n  PDFs'\n", TAIL),
    "double": (HEAD, 'description: "Say \\"hi\\"\\n\n  description: no"\n', TAIL),
    "literal": (HEAD, "description: |\n  line one\n  # not a comment\n", "\n\n" + TAIL),
    "literal-strip": (HEAD, "description: |-\n    a\n\n    b\n", TAIL),
    "folded": (HEAD, "description: >\n  folded\n  text\n", TAIL),
    "folded-strip": (HEAD, "description: >- # header comment\n  folded\n", TAIL),
    "literal-comment": (HEAD, "description: |\t# keep me\n  line one\n", TAIL),
    "next-line": (HEAD, "description:\n  on the next line\n", TAIL),
    "first-key": ("---\n", "description: first\n", "name: my-skill\n---\nBody\n"),
    "last-key": ("---\nname: my-skill\n", "description: last\n", "---\n"),
    "no-body-newline": ("---\nname: x\n", "description: d\n", "---\nbody without newline"),
    "non-ascii": (
        "---\nname: my-skill\nmetadata:\n  note: 日本語 ✓\n",
        "description: 한국어 설명 — émoji 🎉\n",
        "---\nCorps — ü\n",
    ),
    "lenient": (HEAD, "description: Use this when: the user asks\n  about PDFs\n", TAIL),
    "lenient-quoted": (HEAD, 'description: "a" b: c\n', TAIL),
    "lenient-block": ("---\nname: a: b\n", "description: |\n  x\n  y\n", "---\n"),
}

NEW_DESCRIPTIONS = [
    "Use this skill when the user asks about invoices.",
    "Line one\nline two",
    "a: b # not a comment",
    "name: other\nwhen_to_use: no",
    "café ☕ 日本語",
]


def frontmatter_of(text: str) -> dict:
    span = locate_frontmatter(text, WHERE)
    return yaml.safe_load(text[span.start : span.end])


def assert_rewritten(style: str, new: str, description: str) -> None:
    """Rewriting ``style``'s description to ``new`` puts exactly ``description`` in its place."""
    before, middle, after = STYLES[style]
    result = replace_description(before + middle + after, new, WHERE)
    assert result == before + description + after


@pytest.mark.parametrize("style", sorted(STYLES))
@pytest.mark.parametrize("new", NEW_DESCRIPTIONS)
def test_only_the_description_changes(style: str, new: str) -> None:
    before, middle, after = STYLES[style]
    original = before + middle + after
    old = read_as_cli(original)
    result = replace_description(original, new, WHERE)
    assert result.startswith(before)
    assert result.endswith(after)
    assert len(result) >= len(before) + len(after)
    new_middle = result[len(before) : len(result) - len(after)]
    assert new_middle.startswith("description:")
    again = read_as_cli(result)  # as the pinned CLI reads it
    assert again.description == new
    assert again.body == old.body
    if old.how == "yaml":
        assert {k: v for k, v in again.mapping.items() if k != "description"} == {
            k: v for k, v in old.mapping.items() if k != "description"
        }
    # The description entry is valid YAML on its own (even for lenient files).
    assert yaml.safe_load(new_middle) == {"description": new}


@pytest.mark.parametrize(
    ("style", "new", "description"),
    [
        ("folded-strip", "one line", "description: >- # header comment\n  one line\n"),
        ("folded-strip", "two\nlines", "description: |- # header comment\n  two\n  lines\n"),
        ("literal-comment", "new text", "description: |- # keep me\n  new text\n"),
        # the CLI's rewrite of a broken frontmatter quotes "|-": only a quoted value reads
        ("lenient-block", "x\ny", 'description: "x\\ny"\n'),
    ],
)
def test_block_header_comment_is_kept(style: str, new: str, description: str) -> None:
    assert_rewritten(style, new, description)


@pytest.mark.parametrize("brk", ["\u2028", "\x85", "\r"])
def test_block_header_comment_ends_at_any_yaml_line_break(brk: str) -> None:
    before, _, after = STYLES["folded-strip"]
    original = before + f"description: | # note{brk}  first #x\n  old\n" + after
    old = frontmatter_of(original)["description"]
    assert "#x" in old  # the second '#' is text of the value, not part of the comment
    result = replace_description(original, "new words", WHERE)
    assert frontmatter_of(result)["description"] == "new words"
    assert "# note" in result and "#x" not in result


def test_block_header_comment_follows_a_quoted_fallback() -> None:
    before, _, after = STYLES["folded-strip"]
    original = before + "description: | # why\n  old\n" + after
    result = replace_description(original, "a bell\x07inside", WHERE)
    assert "# why" in result
    assert frontmatter_of(result)["description"] == "a bell\x07inside"


def test_lenient_file_becomes_strict_yaml() -> None:
    before, middle, after = STYLES["lenient"]
    result = replace_description(before + middle + after, "Use this when: asked", WHERE)
    assert frontmatter_of(result)["description"] == "Use this when: asked"
    assert result == before + 'description: "Use this when: asked"\n' + after


@pytest.mark.parametrize(
    "new",
    ["Use this for invoices.", "Ünïcödé ok", "a-b_c, d.e; f!", "x:y", "50% off", "C#", "it's"],
)
def test_plain_kept_when_safe(new: str) -> None:
    assert_rewritten("plain", new, f"description: {new}\n")


@pytest.mark.parametrize(
    "new",
    [
        "a: b",
        "x #y",
        "true",
        "null",
        "~",
        "1.5",
        "0x1F",
        "2024-01-01",
        "yes",
        "- item",
        "[a]",
        "{a}",
        "'q",
        '"q',
        "*alias",
        "&anchor",
        "!tag",
        "%dir",
        "@at",
        "`tick",
        "|pipe",
        "? q",
        "tab\there",
    ],
)
def test_plain_unsafe_becomes_quoted(new: str) -> None:
    before, middle, after = STYLES["plain"]
    result = replace_description(before + middle + after, new, WHERE)
    line = result[len(before) : len(result) - len(after)]
    assert line.startswith('description: "')
    assert frontmatter_of(result)["description"] == new


def test_block_style_kept() -> None:
    assert_rewritten("literal-strip", "first\nsecond", "description: |-\n    first\n    second\n")
    assert_rewritten("literal-strip", "single line", "description: |-\n    single line\n")
    assert_rewritten("folded", "single: line", "description: >-\n  single: line\n")


def test_block_falls_back_to_double_quoted_when_not_representable() -> None:
    before, middle, after = STYLES["literal"]
    new = "leading\n  spaces\nand\x07bell"
    result = replace_description(before + middle + after, new, WHERE)
    assert result[len(before) :].startswith('description: "')
    assert frontmatter_of(result)["description"] == new


def test_quoted_styles_kept() -> None:
    assert_rewritten("single", "it's: fine", "description: 'it''s: fine'\n")
    assert_rewritten("double", "plain enough", 'description: "plain enough"\n')


def test_crlf_kept() -> None:
    before, middle, after = (part.replace("\n", "\r\n") for part in STYLES["literal"])
    original = before + middle + after
    for new in ("one line", "two\nlines", "a: b\nc # d", "tricky\r\nvalue"):
        result = replace_description(original, new, WHERE)
        assert result.startswith(before) and result.endswith(after)
        assert result.count("\n") == result.count("\r\n")
        assert frontmatter_of(result)["description"] == new


HOSTILE = [
    "new\nlines\n\nand blank",
    "---",
    "x\n---\ny",
    "name: other",
    "description: again",
    "a\nname: other\n",
    "\"double\" and 'single' quotes",
    "'",
    '"',
    "''",
    'back\\slash \\n \\" \\\\',
    "# hash",
    "a # b",
    "a #b",
    "tab\tseparated\t",
    "\ttab first",
    "".join(chr(c) for c in range(1, 32)) + "x",
    "nul\x00byte",
    "del\x7f",
    "nel\x85",
    "line\u2028sep",
    "para\u2029sep",
    "bom\ufeffinside",
    "nbsp\xa0here",
    "private\ue000use",
    "noncharacter\ufffe",
    "astral \U0001d54f \U0001f600",
    "very long " * 100,
    "x" * 1024,
    "- leading dash",
    "* star",
    "& amp",
    "! bang",
    "% percent",
    "@ at",
    "` backtick",
    "{ brace",
    "[ bracket",
    "| pipe",
    "' quote",
    "? question",
    ": colon",
    ", comma",
    "trailing colon:",
    "ends with backslash\\",
    "   ",
    "a\r\nb",
    "lone\rcr",
    "\nleading newline",
    "trailing newlines\n\n\n",
    "%YAML 1.2",
    "...",
    "=",
    "<<",
]
REFUSED = [h for h in HOSTILE if description_problems(h)]
HOSTILE = [h for h in HOSTILE if not description_problems(h)]
HOSTILE_STYLES = ["plain", "plain-multiline", "literal", "folded-strip", "lenient", "double"]


@pytest.mark.parametrize("style", HOSTILE_STYLES)
@pytest.mark.parametrize("new", HOSTILE, ids=[repr(h)[:30] for h in HOSTILE])
def test_hostile_descriptions_round_trip(style: str, new: str) -> None:
    before, middle, after = STYLES[style]
    result = replace_description(before + middle + after, new, WHERE)
    assert result.startswith(before) and result.endswith(after)
    new_middle = result[len(before) : len(result) - len(after)]
    assert yaml.safe_load(new_middle) == {"description": new}
    mapping = frontmatter_of(result)
    assert mapping["description"] == new
    assert mapping["name"] == "my-skill"
    assert mapping["license"] == "MIT"


@pytest.mark.parametrize("new", HOSTILE[:20], ids=[repr(h)[:30] for h in HOSTILE[:20]])
def test_hostile_descriptions_written_to_disk(tmp_path: Path, new: str) -> None:
    folder = tmp_path / "my-skill"
    folder.mkdir()
    before, middle, after = STYLES["plain"]
    raw = b"\xef\xbb\xbf" + (before + middle + after).replace("\n", "\r\n").encode("utf-8")
    (folder / "SKILL.md").write_bytes(raw)
    write_description(str(folder / "SKILL.md"), new, raw)
    written = (folder / "SKILL.md").read_bytes()
    assert written.startswith(b"\xef\xbb\xbf---\r\n")
    assert written.count(b"\n") == written.count(b"\r\n")
    skill = read_skill(folder)
    assert skill.description == new
    assert os.listdir(folder) == ["SKILL.md"]


def test_what_the_cli_would_read_otherwise_is_refused() -> None:
    """``---`` ends Claude Code's frontmatter wherever it stands, and blanks around a
    description are dropped: such a description cannot be written as it is."""
    assert {"---", "x\n---\ny", "tab\tseparated\t", "\ttab first", "   "} <= set(REFUSED)
    before, middle, after = STYLES["plain"]
    for new in REFUSED:
        with pytest.raises(InputError, match="refusing to write the description"):
            replace_description(before + middle + after, new, WHERE)


ALPHABET = (
    "abc XYZ 019:#-'\"\\\t\n\r{}[]|*&!%@`?,.~=+" + "\x00\x07\x1b\x7f\x85\xa0\u2028\u2029\ufeffé日😀"
)


@pytest.mark.parametrize("style", HOSTILE_STYLES)
def test_random_descriptions_round_trip(style: str) -> None:
    """Seeded fuzzing: every generated string either round-trips exactly or is refused."""
    rng = random.Random(f"skilltrigger-{style}")
    before, middle, after = STYLES[style]
    original = before + middle + after
    for _ in range(200):
        new = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40)))
        if description_problems(new):
            continue
        result = replace_description(original, new, WHERE)
        assert result.startswith(before) and result.endswith(after)
        assert frontmatter_of(result)["description"] == new
        assert read_as_cli(result).description == new


def test_hypothesis_round_trip_if_installed() -> None:
    hypothesis = pytest.importorskip("hypothesis")
    strategies = pytest.importorskip("hypothesis.strategies")
    before, middle, after = STYLES["plain"]
    original = before + middle + after

    @hypothesis.settings(max_examples=300, deadline=None)
    @hypothesis.given(strategies.text(min_size=1, max_size=200))
    def check(new: str) -> None:
        hypothesis.assume(not description_problems(new))
        hypothesis.assume(not any(0xD800 <= ord(c) <= 0xDFFF for c in new))
        result = replace_description(original, new, WHERE)
        assert result.startswith(before) and result.endswith(after)
        assert frontmatter_of(result)["description"] == new

    check()


@pytest.mark.parametrize(
    ("new", "needle"),
    [
        ("x" * 1025, "1025 characters"),
        ("use <b>bold</b>", "'<' or '>'"),
        ("a -> b", "'<' or '>'"),
        ("", "empty"),
        (" \n\t", "empty"),
    ],
)
def test_refused_descriptions(tmp_path: Path, new: str, needle: str) -> None:
    before, middle, after = STYLES["plain"]
    with pytest.raises(InputError, match=needle):
        replace_description(before + middle + after, new, WHERE)
    folder = tmp_path / "my-skill"
    folder.mkdir()
    raw = (before + middle + after).encode("utf-8")
    (folder / "SKILL.md").write_bytes(raw)
    with pytest.raises(InputError) as info:
        write_description(str(folder / "SKILL.md"), new, raw)
    assert str(info.value).startswith(str(folder / "SKILL.md") + ": ")
    assert (folder / "SKILL.md").read_bytes() == raw
    assert os.listdir(folder) == ["SKILL.md"]


@pytest.mark.parametrize(
    "text",
    [
        "---\nname: x\nbase: &d hello\ndescription: *d\n---\n",
        "---\nname: x\ndescription: [a, b]\n---\n",
        "---\nname: x\n---\n",
    ],
)
def test_unrewritable_values_are_refused(text: str) -> None:
    with pytest.raises(InputError):
        replace_description(text, "new", WHERE)


def test_anchor_used_elsewhere_is_never_broken() -> None:
    """A description that is an anchor another key refers to cannot be replaced without
    changing that key too: the rewrite is refused (the file is then left as it is)."""
    text = "---\nname: x\ndescription: &d hello\nalso: *d\n---\n"
    with pytest.raises(InputError, match="cannot write this description"):
        replace_description(text, "new", WHERE)


def test_empty_description_value_is_filled_in() -> None:
    text = "---\nname: x\ndescription:\nlicense: MIT\n---\n"
    result = replace_description(text, "now set", WHERE)
    assert result == "---\nname: x\ndescription: now set\nlicense: MIT\n---\n"


def test_write_description_success_keeps_bom_and_leaves_no_temp(tmp_path: Path) -> None:
    folder = tmp_path / "my-skill"
    folder.mkdir()
    before, middle, after = STYLES["literal"]
    raw = ("\ufeff" + before + middle + after).encode("utf-8")
    (folder / "SKILL.md").write_bytes(raw)
    skill = read_skill(folder)
    write_description(skill.skill_md, "improved\ndescription", skill.raw)
    written = (folder / "SKILL.md").read_bytes()
    expected = "\ufeff" + before + "description: |-\n  improved\n  description\n" + after
    assert written == expected.encode("utf-8")
    assert read_skill(folder).description == "improved\ndescription"
    assert os.listdir(folder) == ["SKILL.md"]


def test_file_changed_error(tmp_path: Path) -> None:
    folder = tmp_path / "my-skill"
    folder.mkdir()
    before, middle, after = STYLES["plain"]
    raw = (before + middle + after).encode("utf-8")
    (folder / "SKILL.md").write_bytes(raw)
    skill = read_skill(folder)
    edited = raw.replace(b"PDFs", b"PDF files")
    (folder / "SKILL.md").write_bytes(edited)
    with pytest.raises(FileChangedError) as info:
        write_description(skill.skill_md, "new text", skill.raw)
    assert skill.skill_md in str(info.value)
    assert "\n" not in str(info.value)
    assert (folder / "SKILL.md").read_bytes() == edited
    assert os.listdir(folder) == ["SKILL.md"]


def test_file_deleted_counts_as_changed(tmp_path: Path) -> None:
    folder = tmp_path / "my-skill"
    folder.mkdir()
    raw = b"---\nname: my-skill\ndescription: d\n---\n"
    (folder / "SKILL.md").write_bytes(raw)
    os.remove(folder / "SKILL.md")
    with pytest.raises(FileChangedError):
        write_description(str(folder / "SKILL.md"), "new", raw)
    assert os.listdir(folder) == []


def test_lenient_file_written_as_valid_yaml(tmp_path: Path) -> None:
    folder = tmp_path / "my-skill"
    folder.mkdir()
    raw = b"---\nname: my-skill\ndescription: Use when: asked\n---\nBody\n"
    (folder / "SKILL.md").write_bytes(raw)
    write_description(str(folder / "SKILL.md"), "Use when: asked nicely", raw)
    written = (folder / "SKILL.md").read_text("utf-8")
    assert written == '---\nname: my-skill\ndescription: "Use when: asked nicely"\n---\nBody\n'
    skill = read_skill(folder)
    assert skill.description == "Use when: asked nicely"
    assert not any("leniently" in w for w in skill.warnings)
