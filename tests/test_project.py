"""Project-level promises: the README documents every option, CI runs the README's command,
and the code stays ruff clean."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_skilltrigger.plugin.option_table import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_quick_start_has_exactly_two_commands_and_ci_runs_the_test_one() -> None:
    commands = quick_start_commands()
    assert len(commands) == 2
    assert "--skill-path=example_skills" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines()


@pytest.mark.parametrize("flag,ini", [(o[0], o[1]) for o in OPTIONS])
def test_every_option_and_ini_key_is_documented(flag: str, ini: str | None) -> None:
    table = README.split("## Options", 1)[1]
    assert f"`{flag}`" in table
    if ini:
        assert re.search(rf"`{re.escape(flag)}` \| `{ini}` \|", table)


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    done = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
