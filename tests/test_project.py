"""Project-level promises: the docs' options page and ``pytest --help`` agree, CI runs the
README's command, the README stays short, and the code stays formatted, lint- and type-clean."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_skilltrigger.model.options import (
    GROUP_TITLE,
    GROUPS,
    OPTIONS,
    group_heading,
    options_markdown,
)

ROOT = Path(__file__).resolve().parent.parent


def _docs_hooks() -> ModuleType:
    """The docs' build hooks (docs/hooks.py, a file mkdocs loads, not a package)."""
    spec = importlib.util.spec_from_file_location("skilltrigger_docs_hooks", DOCS_HOOKS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOCS_HOOKS = ROOT / "docs" / "hooks.py"
README = (ROOT / "README.md").read_text(encoding="utf-8")
OPTIONS_PAGE = ROOT / "docs" / "reference" / "options.md"
MARKER = "<!-- skilltrigger:options -->"


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    commands = quick_start_commands()
    assert len(commands) == 2
    assert "--trigger-skill-path=example_skills" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines()


def test_the_readme_is_short_and_starts_with_the_quick_start() -> None:
    assert len(README.splitlines()) <= 200
    sections = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert sections[:1] == ["Quick start"]


def help_text() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return done.stdout


def our_groups(text: str) -> dict[str, str]:
    """Our groups of ``pytest --help``: each heading with its options' text."""
    found = {}
    for part in text.split(f"\n{GROUP_TITLE}: ")[1:]:
        heading, _, body = part.partition("\n")
        found[f"{GROUP_TITLE}: {heading.removesuffix(':')}"] = body.split("\n\n", 1)[0]
    return found


def options_in_help(text: str) -> tuple[set[str], set[str]]:
    """Our groups' flags, and the ini keys pytest lists, from ``pytest --help``."""
    groups = "\n".join(our_groups(text).values())
    flags = set(re.findall(r"^  (--[a-z-]+)", groups, flags=re.MULTILINE))
    ini_section = text.split("[pytest] ", 1)[1].split("\nEnvironment variables:", 1)[0]
    ini_keys = set(re.findall(r"^  ([a-z_]+) \(", ini_section, flags=re.MULTILINE))
    return flags, ini_keys


def options_in_docs(table: str) -> tuple[set[str], set[str]]:
    """The flags and ini keys of the docs' options table."""
    flags, ini_keys = set(), set()
    for row in table.splitlines():
        if not row.startswith("| ") or row.startswith(("| option ", "| --- ")):
            continue
        cells = [c.strip() for c in row.strip("|").split("|")]
        flags.update(re.findall(r"^`(--[a-z-]+)`", cells[0]))
        ini_keys.update(re.findall(r"ini `([a-z_]+)`", cells[0]))
    return flags, ini_keys


def test_the_options_page_and_pytest_help_list_the_same_options() -> None:
    """The reference page is rendered from the one declaration (docs/hooks.py): it must list
    every option and ini key ``pytest --help`` shows, and nothing else."""
    assert MARKER in OPTIONS_PAGE.read_text(encoding="utf-8")
    help_flags, help_ini = options_in_help(help_text())
    doc_flags, doc_ini = options_in_docs(options_markdown())
    assert doc_flags == help_flags
    assert doc_ini == _our_ini_keys()
    assert doc_ini <= help_ini


def test_the_options_page_keeps_the_tables_the_code_declares() -> None:
    """The page's copy (read on GitHub) is what the docs' build would put there."""
    page = OPTIONS_PAGE.read_text(encoding="utf-8")
    assert _docs_hooks().with_options(page) == page, "stale: run python docs/hooks.py"


def test_pytest_help_shows_the_groups_in_order_each_naming_its_usual_options() -> None:
    """A newcomer scans five short groups, each heading naming the options most runs set;
    the former names are not shown (they still work, see tests/plugin/test_deprecated.py)."""
    groups = our_groups(help_text())
    assert list(groups) == [group_heading(title, lead) for _, title, lead in GROUPS]
    for heading, body in groups.items():
        assert len(heading) <= 100
        named = re.findall(r"--[a-z-]+", heading)
        listed = re.findall(r"^  (--[a-z-]+)", body, flags=re.MULTILINE)
        assert set(named) <= set(listed), heading
        assert all(flag.startswith("--trigger-") for flag in listed)
        assert len(listed) <= 20


def _our_ini_keys() -> set[str]:
    return {o.ini_key for o in OPTIONS if o.ini_key} | {"skill_paths"}


def test_every_option_has_help_and_its_default_is_added_from_the_table() -> None:
    for opt in OPTIONS:
        assert opt.help and not opt.help.endswith(".")
        assert "(default" not in opt.help, f"{opt.flag}: the default is added from the table"


def _tool(name: str) -> str:
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(found).exists():
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return found


@pytest.mark.parametrize(
    "command",
    [["check", "."], ["format", "--check", "."]],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff_clean(command: list[str]) -> None:
    done = subprocess.run([_tool("ruff"), *command], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_clean() -> None:
    done = subprocess.run(
        [_tool("mypy"), "--strict", "pytest_skilltrigger"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_docs_build_strict(tmp_path: Path) -> None:
    done = subprocess.run(
        [_tool("mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_fmt_skips_are_few_and_each_has_a_reason() -> None:
    found = []
    folders = ("pytest_skilltrigger", "tests", "benchmarks")
    for path in [p for folder in folders for p in ROOT.glob(f"{folder}/**/*.py")]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if line.rstrip().endswith("# fmt: skip") or line.strip() == "# fmt: off":
                before = lines[number - 1].strip() if number else ""
                found.append((path, number, before))
    assert len(found) <= 5
    for path, number, before in found:
        assert before.startswith("#"), f"{path}:{number + 1}: a formatter exception needs a reason"
