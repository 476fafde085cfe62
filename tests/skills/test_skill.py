"""Tests for reading, validating and discovering skills (pytest_skilltrigger.skills.skill)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_skilltrigger.skills.discovery import discover_skills
from pytest_skilltrigger.skills.skill import (
    Skill,
    description_problems,
    read_skill,
    validation_warnings,
)
from pytest_skilltrigger.support.errors import InputError


def make_skill(root: Path, folder: str, content: str | bytes) -> Path:
    """Create ``root/folder/SKILL.md`` holding ``content`` and return the folder."""
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8") if isinstance(content, str) else content
    (path / "SKILL.md").write_bytes(data)
    return path


def skill_text(description_lines: str, name: str = "my-skill", extra: str = "") -> str:
    return f"---\nname: {name}\n{description_lines}{extra}---\n# Body\n\nText.\n"


STYLES = [
    pytest.param("description: Use this for PDF files.\n", "Use this for PDF files.", id="plain"),
    pytest.param(
        "description: first line\n  second line\n\n  third\n",
        "first line second line\nthird",
        id="plain-multiline",
    ),
    pytest.param(
        "description: 'It''s for: PDFs, \"quoted\" \\n kept'\n",
        'It\'s for: PDFs, "quoted" \\n kept',
        id="single-quoted",
    ),
    pytest.param(
        'description: "Say \\"hi\\"\\nnext \\\\ line\\ttab"\n',
        'Say "hi"\nnext \\ line\ttab',
        id="double-quoted",
    ),
    pytest.param(
        'description: "folded\n  quoted"\n', "folded quoted", id="double-quoted-multiline"
    ),
    pytest.param("description: |\n  a: b\n  c # d\n", "a: b\nc # d", id="literal"),
    pytest.param("description: |-\n  a\n\n  b\n", "a\n\nb", id="literal-strip"),
    pytest.param("description: >\n  a\n  b\n\n  c\n", "a b\nc", id="folded"),
    pytest.param("description: >-\n    a\n    b\n", "a b", id="folded-strip"),
    pytest.param(
        "description: 한국어 설명 — émoji 🎉 中文\n", "한국어 설명 — émoji 🎉 中文", id="non-ascii"
    ),
    pytest.param("description: value  # a comment\n", "value", id="trailing-comment"),
    pytest.param("description:\n  on the next line\n", "on the next line", id="next-line"),
]


@pytest.mark.parametrize(("lines", "expected"), STYLES)
def test_description_read_as_yaml_reads_it(tmp_path: Path, lines: str, expected: str) -> None:
    """Valid YAML reads as YAML, trimmed as the CLI trims a description."""
    folder = make_skill(tmp_path, "my-skill", skill_text(lines))
    skill = read_skill(folder)
    assert skill.description == expected
    assert skill.name == "my-skill"
    assert skill.warnings == ()


def test_skill_fields(tmp_path: Path) -> None:
    content = skill_text("description: Does things.\n")
    folder = make_skill(tmp_path, "my-skill", content)
    skill = read_skill(str(folder))
    assert isinstance(skill, Skill)
    assert skill.path == os.path.abspath(folder)
    assert isinstance(skill.path, str) and os.path.isabs(skill.path)
    assert skill.skill_md == os.path.join(skill.path, "SKILL.md")
    assert skill.raw == content.encode("utf-8")
    assert skill.body == "# Body\n\nText.\n"
    assert skill.frontmatter == {"name": "my-skill", "description": "Does things."}


def test_bom_and_crlf(tmp_path: Path) -> None:
    text = "---\r\nname: my-skill\r\ndescription: |\r\n  line one\r\n  line two\r\n---\r\nBody\r\n"
    raw = b"\xef\xbb\xbf" + text.encode("utf-8")
    skill = read_skill(make_skill(tmp_path, "my-skill", raw))
    assert skill.description == "line one\nline two"
    assert skill.body == "Body\r\n"
    assert skill.raw == raw
    assert skill.warnings == ()


def test_extra_keys_comments_and_nested_values(tmp_path: Path) -> None:
    content = (
        "---\n"
        "# leading comment\n"
        "name: my-skill  # trailing comment\n"
        "description: Reads PDFs.\n"
        "license: MIT\n"
        "allowed-tools: [Read, Bash]\n"
        "metadata:\n"
        "  author: someone\n"
        "  nested:\n"
        "    level: 2\n"
        "tags:\n"
        "  - pdf\n"
        "  - docs\n"
        "homepage: https://example.org/x\n"
        "argument-hint: '[file]'\n"
        "---\n"
    )
    skill = read_skill(make_skill(tmp_path, "my-skill", content))
    assert skill.frontmatter["metadata"] == {"author": "someone", "nested": {"level": 2}}
    assert skill.frontmatter["tags"] == ["pdf", "docs"]
    assert skill.frontmatter["allowed-tools"] == ["Read", "Bash"]
    assert skill.frontmatter["argument-hint"] == "[file]"
    assert skill.body == ""
    unexpected = [w for w in skill.warnings if "unexpected frontmatter key" in w]
    assert len(unexpected) == 2
    assert all(w.startswith(skill.skill_md + ": ") for w in skill.warnings)
    joined = "\n".join(unexpected)
    for key in ("'tags'", "'homepage'"):
        assert key in joined
    for allowed in ("'license'", "'metadata'", "'allowed-tools'", "'argument-hint'"):
        assert allowed not in joined


@pytest.mark.parametrize(
    "key",
    [
        *("argument-hint", "allowed-tools", "model", "version", "effort", "context", "agent"),
        *("hooks", "user-invocable", "when_to_use", "license", "compatibility", "shell"),
    ],
)
def test_the_keys_claude_code_documents_are_not_unexpected(tmp_path: Path, key: str) -> None:
    skill = read_skill(
        make_skill(tmp_path, "my-skill", skill_text("description: d\n", extra=f"{key}: x\n"))
    )
    assert not [w for w in skill.warnings if "unexpected" in w]


def test_a_colon_in_a_description_is_read_as_the_cli_reads_it(tmp_path: Path) -> None:
    """Not valid YAML: the CLI quotes the value and reads it (``when_to_use`` too). The
    warning says so before any call, with the text tested and the quoting that fixes it."""
    content = (
        "---\n"
        "name: my-skill\n"
        "description: Use this when: the user asks about PDFs\n"
        "when_to_use: Also for t: labels\n"
        "metadata:\n"
        "  version: 1\n"
        "---\n"
        "Body\n"
    )
    skill = read_skill(make_skill(tmp_path, "my-skill", content))
    assert skill.description == "Use this when: the user asks about PDFs"
    assert skill.when_to_use == "Also for t: labels"
    assert skill.frontmatter["metadata"] == {"version": 1}
    (warning,) = skill.warnings
    assert warning.startswith(skill.skill_md + ": frontmatter is not valid YAML (")
    assert "line 3" in warning and "\n" not in warning
    assert "the description tested is 'Use this when: the user asks about PDFs'" in warning
    assert warning.endswith(
        'quote them to make it valid: description: "Use this when: the user asks about PDFs";'
        ' when_to_use: "Also for t: labels"'
    )


def test_a_frontmatter_the_cli_cannot_read_lists_the_body_line(tmp_path: Path) -> None:
    """An unclosed quote: not readable even after the CLI's rewrite, so no key is read and
    the skill is listed under its folder with the body's first line."""
    content = '---\nname: x\ndescription: "unclosed\n---\n\n# The heading\n\nText.\n'
    skill = read_skill(make_skill(tmp_path, "my-skill", content))
    assert (skill.name, skill.description, skill.described) == ("my-skill", "The heading", False)
    (warning,) = skill.warnings
    assert "not readable YAML" in warning and "'The heading'" in warning


LISTED_ANYWAY = [
    pytest.param("name: x\ndescription: y\n", "name: x", "no frontmatter", id="no-opening"),
    pytest.param(
        "\n---\nname: x\ndescription: y\n---\n", "---", "no frontmatter", id="blank-first"
    ),
    pytest.param("", "Skill", "no frontmatter", id="empty-file"),
    pytest.param("---\njust some text\n---\n", "Skill", "not readable YAML", id="scalar"),
    pytest.param("---\nname: x\n---\n", "Skill", "no description", id="no-description"),
    pytest.param("---\n---\n# Head\n", "Head", "no description", id="empty-frontmatter"),
    pytest.param("---\ndescription: ''\n---\n", "Skill", "no description", id="empty"),
    pytest.param("---\ndescription: [a, b]\n---\nx\n", "x", "no description", id="list-desc"),
]


@pytest.mark.parametrize(("content", "listed", "message"), LISTED_ANYWAY)
def test_a_skill_the_cli_lists_without_a_description_is_tested_as_listed(
    tmp_path: Path, content: str, listed: str, message: str
) -> None:
    """The CLI lists these with the body's first line (``Skill`` for none): so does the
    builtin context, with a one-line warning naming the file."""
    folder = make_skill(tmp_path, "my-skill", content)
    skill = read_skill(folder)
    assert skill.description == listed and not skill.described
    (warning,) = [w for w in skill.warnings if message in w]
    assert warning.startswith(str(folder / "SKILL.md") + ": ") and "\n" not in warning


@pytest.mark.parametrize(
    "content",
    ["---\nname: x\ndescription: y\n", "---", "\ufeff---  \r\nname: x\r\n\r\nBody\r\n"],
    ids=["no-second-line", "only-the-first", "bom-crlf"],
)
def test_a_frontmatter_that_never_closes_is_a_one_line_error(tmp_path: Path, content: str) -> None:
    """The CLI would list such a skill with ``---`` as its description: testing (and paying
    for) that measures nothing the author wrote, so it is an error naming the file."""
    folder = make_skill(tmp_path, "my-skill", content)
    with pytest.raises(InputError) as info:
        read_skill(folder)
    message = str(info.value)
    assert message.startswith(str(folder / "SKILL.md") + ": ") and "\n" not in message
    assert "not closed" in message


def test_undecodable_bytes(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "my-skill", b"---\nname: x\ndescription: caf\xe9\n---\n")
    with pytest.raises(InputError, match="not valid UTF-8") as info:
        read_skill(folder)
    assert str(folder / "SKILL.md") in str(info.value)


def test_missing_skill_md(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as info:
        read_skill(tmp_path / "empty")
    assert str(info.value).startswith(str(tmp_path / "empty" / "SKILL.md") + ": ")


def test_missing_name_uses_folder_name(tmp_path: Path) -> None:
    """``name`` is optional in Claude Code: no warning."""
    skill = read_skill(make_skill(tmp_path, "pdf-tools", "---\ndescription: d\n---\n"))
    assert skill.name == "pdf-tools" and skill.warnings == ()


def test_valid_skill_has_no_validation_warnings(tmp_path: Path) -> None:
    skill = read_skill(make_skill(tmp_path, "my-skill", skill_text("description: d\n")))
    assert validation_warnings(skill) == []


@pytest.mark.parametrize(
    ("folder", "name", "description", "needle"),
    [
        ("My_Skill", "My_Skill", "d", "not kebab-case"),
        ("a--b", "a--b", "d", "not kebab-case"),
        ("-ab", "-ab", "d", "not kebab-case"),
        ("x" * 65, "x" * 65, "d", "65 characters long"),
        ("folder", "other-name", "d", "differs from the folder name 'folder'"),
        ("my-skill", "my-skill", "x" * 1025, "1025 characters long"),
        ("my-skill", "my-skill", "use <tag> here", "'<' or '>'"),
        ("my-skill", "my-skill", "a -> b", "'<' or '>'"),
    ],
)
def test_validation_warnings(
    tmp_path: Path, folder: str, name: str, description: str, needle: str
) -> None:
    skill = read_skill(
        make_skill(tmp_path, folder, skill_text(f"description: {description}\n", name))
    )
    assert skill.description == description  # evaluated as it is
    found = [w for w in validation_warnings(skill) if needle in w]
    assert len(found) == 1
    assert found[0].startswith(skill.skill_md + ": ")
    assert found[0] in skill.warnings


def test_description_problems() -> None:
    assert description_problems("Use this skill for PDFs.") == []
    assert description_problems("x" * 1024) == []
    assert any("empty" in p for p in description_problems(""))
    assert any("empty" in p for p in description_problems("  \n "))
    assert any("1025" in p for p in description_problems("x" * 1025))
    assert any("'<'" in p for p in description_problems("a < b"))
    assert any("'>'" in p for p in description_problems("a > b"))
    assert len(description_problems("<" + "x" * 1024)) == 2


def test_discover_single_skill(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "one", skill_text("description: d\n", "one"))
    make_skill(folder, "nested", skill_text("description: n\n", "nested"))
    skills = discover_skills(folder)
    assert [s.name for s in skills] == ["one"]
    # A path to the SKILL.md file itself means its folder.
    assert [s.name for s in discover_skills(folder / "SKILL.md")] == ["one"]


def test_discover_folder_of_skills_sorted(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        make_skill(tmp_path, name, skill_text(f"description: {name} skill\n", name))
    (tmp_path / "not-a-skill").mkdir()
    (tmp_path / "README.md").write_text("hello")
    make_skill(tmp_path / "deeper", "inner", skill_text("description: d\n", "inner"))
    skills = discover_skills(str(tmp_path))
    # folders in name order, depth first: deeper/inner comes between alpha and mid
    assert [s.name for s in skills] == ["alpha", "inner", "mid", "zeta"]
    assert [os.path.basename(s.path) for s in skills] == ["alpha", "inner", "mid", "zeta"]


def test_discover_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist") as info:
        discover_skills(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value)


def test_discover_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(InputError, match="holds no skill") as info:
        discover_skills(tmp_path)
    assert "\n" not in str(info.value)


def test_discover_propagates_bad_skill(tmp_path: Path) -> None:
    make_skill(tmp_path, "good", skill_text("description: d\n", "good"))
    make_skill(tmp_path, "bad", b"---\ndescription: caf\xe9\n---\n")
    with pytest.raises(InputError, match="bad"):
        discover_skills(tmp_path)


def test_skills_are_found_at_any_depth_but_not_in_tooling_folders(tmp_path: Path) -> None:
    """As pytest finds tests: ``plugins/*/skills/*`` works; hidden folders, virtualenvs,
    node_modules and a skill's own folders are not searched."""

    def skill(path: Path, name: str) -> None:
        path.mkdir(parents=True)
        (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Does {name}.\n---\n")

    skill(tmp_path / "plugins" / "a" / "skills" / "alpha", "alpha")
    skill(tmp_path / "plugins" / "b" / "skills" / "beta", "beta")
    skill(tmp_path / "top", "top")
    skill(tmp_path / "top" / "resources" / "inner", "inner")  # inside a skill: its resource
    skill(tmp_path / ".hidden" / "gamma", "gamma")
    skill(tmp_path / "node_modules" / "pkg" / "delta", "delta")
    (tmp_path / "env2").mkdir()
    (tmp_path / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
    skill(tmp_path / "env2" / "lib" / "epsilon", "epsilon")
    found = [s.name for s in discover_skills(tmp_path)]
    assert found == ["alpha", "beta", "top"]
