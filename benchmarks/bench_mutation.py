"""Mutation testing of the modules whose tests pin the statistics and the money: how many of
mutmut's mutants of each module its tests detect (fail, or hang past mutmut's timeout).

mutmut 3 is not a dependency (``.venv/bin/pip install mutmut``). The tree is copied to a
temporary folder (mutmut writes its ``mutants/`` beside the code) and each module is run with
the test files that import it, the configuration the README shows. It takes long: about half
an hour for ``model/verdict.py`` on two CPUs.

    .venv/bin/python benchmarks/bench_mutation.py [verdict cost_guard prices sampler]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MUTMUT = ROOT / ".venv" / "bin" / "mutmut"
VERDICT_TESTS = [
    "tests/model/test_verdict.py",
    "tests/model/test_verdict_edges.py",
    "tests/model/test_stats.py",
    "tests/engine/test_sampler.py",
    "tests/optimizer/test_scoring.py",
    "tests/optimizer/test_rounds.py",
    "tests/optimizer/test_accept.py",
    "tests/conclusion/test_session_end.py",
    "tests/plugin/test_wire.py",
]
MODULES = {  # name: (the module, its tests, mutmut's timeout multiplier)
    "verdict": ("pytest_skilltrigger/model/verdict.py", VERDICT_TESTS, 1.0),
    "cost_guard": (
        "pytest_skilltrigger/engine/cost_guard.py",
        ["tests/engine/test_cost_guard.py"],
        1.0,
    ),
    "prices": ("pytest_skilltrigger/model/prices.py", ["tests/model/test_prices.py"], 1.0),
    "sampler": ("pytest_skilltrigger/engine/sampler.py", ["tests/engine/test_sampler.py"], 3.0),
}


def config(module: str, tests: list[str], multiplier: float) -> str:
    listed = ", ".join(f'"{t}"' for t in tests)
    return (
        "\n[tool.mutmut]\n"
        f'paths_to_mutate = ["{module}"]\n'
        'also_copy = ["pytest_skilltrigger/", "tests/", "example_skills/"]\n'
        f"pytest_add_cli_args_test_selection = [{listed}]\n"
        'pytest_add_cli_args = ["-p", "no:randomly", "-p", "no:xdist", "-q"]\n'
        f"timeout_multiplier = {multiplier}\n"
    )


def run(name: str) -> None:
    module, tests, multiplier = MODULES[name]
    with tempfile.TemporaryDirectory(prefix="skilltrigger-mutation-") as tmp:
        copy = Path(tmp) / "tree"
        shutil.copytree(
            ROOT,
            copy,
            ignore=shutil.ignore_patterns(
                ".venv", ".tools", ".git", "mutants", "__pycache__", ".pytest_cache"
            ),
        )
        with open(copy / "pyproject.toml", "a", encoding="utf-8") as toml:
            toml.write(config(module, tests, multiplier))
        subprocess.run(
            [str(MUTMUT), "run", "--max-children", "2"], cwd=copy, capture_output=True, check=False
        )
        listed = subprocess.run(
            [str(MUTMUT), "results", "--all", "true"],
            cwd=copy,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    states = re.findall(r": (\w[\w ]*)$", listed, flags=re.MULTILINE)
    total = len(states)
    survived = sum(1 for s in states if s in ("survived", "no tests", "not checked"))
    hung = sum(1 for s in states if s == "timeout")
    detected = total - survived
    share = f"{detected / total:.0%}" if total else "—"
    print(
        f"{module}: {detected} of {total} mutants detected ({share}; {hung} of them by "
        f"hanging past the timeout), {survived} survived",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", default=list(MODULES), choices=list(MODULES))
    args = parser.parse_args()
    if not MUTMUT.exists():
        print("mutmut is not installed: .venv/bin/pip install mutmut")
        return 0
    for name in args.modules:
        run(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
