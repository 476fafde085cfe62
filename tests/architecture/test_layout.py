"""The package's shape, checked: the pytest layer apart, no import cycles, a cheap entry point,
a typed public API at the root, and classes with a handful of jobs. (How complex a function
may be is ruff's to check: C901, PLR0912, PLR0913 and PLR0915 in pyproject.toml.)"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_skilltrigger"
NAME = "pytest_skilltrigger"
MAX_PUBLIC_METHODS = 15
# The floors, from the ground up: a module may import its own floor and those below it, never
# one above (lazy imports included). Value types at the bottom, pytest at the top.
FLOORS = (
    "support",
    "model",
    "skills",
    "backends",
    "engine",
    "optimizer",
    "reports",
    "conclusion",
    "plugin",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def top_level_imports(path: Path) -> set[str]:
    """Modules imported when ``path`` is imported: module-level statements, outside
    ``if TYPE_CHECKING:`` (imports inside functions run later, on use)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))

    visit(tree.body)
    return found


def all_imports(path: Path) -> set[str]:
    """Modules ``path`` imports at any time: module-level statements and those inside
    functions and classes (lazy imports, run on first use), outside ``if TYPE_CHECKING:``
    blocks (which never run; their ``else`` does).

    ``from package import module`` needs that module, not what the package's ``__init__``
    defines: the package counts only for a name that is not one of our modules (Python loads
    a module's package first whatever the spelling, so a package's ``__init__`` that imports
    its own modules on use is no cycle, unless they use what it defines)."""
    found: set[str] = set()

    class Imports(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.orelse:
                    self.visit(child)
            else:
                self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module:
                named = {f"{node.module}.{alias.name}" for alias in node.names}
                found.update(named)
                if not named <= MODULES.keys():
                    found.add(node.module)

    Imports().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def package_edges(imports: Callable[[Path], set[str]] = top_level_imports) -> dict[str, set[str]]:
    return {
        name: {m for m in imports(path) if m in MODULES and m != name}
        for name, path in MODULES.items()
    }


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first walk of ``edges`` closes, each as its trail of modules."""
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                walk(nxt, [*trail, nxt])
        state[node] = 2

    for start in sorted(edges):
        if start not in state:
            walk(start, [start])
    return cycles


def test_only_the_pytest_layer_imports_pytest() -> None:
    outside = [
        name
        for name, path in MODULES.items()
        if not name.startswith(f"{NAME}.plugin")
        and any(m == "pytest" or m.startswith("pytest.") for m in top_level_imports(path))
    ]
    assert outside == []


def test_the_engine_never_imports_the_pytest_layer() -> None:
    wrong = {
        name: sorted(m for m in edges if m.startswith(f"{NAME}.plugin"))
        for name, edges in package_edges().items()
        if not name.startswith(f"{NAME}.plugin")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


def floor_of(module: str) -> int:
    """The floor of a package module (the package root, the lazy public API, is above all)."""
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 1 else len(FLOORS)


def test_every_arrow_points_down_the_floors() -> None:
    """support < model < skills < backends < engine < optimizer < reports < conclusion < plugin:
    no module imports one on a floor above its own, at import time or on first use."""
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in package_edges(all_imports).items()
        for target in targets
        if floor_of(target) > floor_of(name)
    )
    assert upward == []


MAX_PYTEST_LAYER_IMPORTS = 15


@pytest.mark.parametrize("name", sorted(m for m in MODULES if m.startswith(f"{NAME}.plugin")))
def test_the_pytest_layer_stays_thin(name: str) -> None:
    """A module of the pytest layer holds hooks and pytest's terminal: it drives the package
    through a few front doors, so it imports at most 15 of the package's modules (lazy
    imports included)."""
    used = package_edges(all_imports)[name]
    assert len(used) <= MAX_PYTEST_LAYER_IMPORTS, sorted(used)


def is_property(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        ast.unparse(d) in ("property", "cached_property", "functools.cached_property")
        or ast.unparse(d).endswith((".setter", ".getter"))
        for d in function.decorator_list
    )


def public_methods() -> dict[str, int]:
    """Every class of the package by its qualified name, with its public methods (not its
    properties: a value type's derived values are data; inherited methods are counted where
    they are written)."""
    found: dict[str, int] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                methods = [
                    f
                    for f in node.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and not f.name.startswith("_")
                    and not is_property(f)
                ]
                found[f"{name}.{node.name}"] = len(methods)
    return found


def test_no_class_has_more_than_a_handful_of_jobs() -> None:
    """A class with many public methods does several jobs: split it."""
    large = {k: v for k, v in public_methods().items() if v > MAX_PUBLIC_METHODS}
    assert large == {}


def test_no_import_cycles() -> None:
    assert import_cycles(package_edges()) == []


def test_no_import_cycles_counting_lazy_imports() -> None:
    """An import inside a function only postpones a cycle: the modules still need each other
    (and the first call pays for the import under whatever lock it holds)."""
    assert import_cycles(package_edges(all_imports)) == []


def test_lazy_imports_are_counted_and_type_checking_ones_are_not(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import top\n"
        "if TYPE_CHECKING:\n    import typed_only\nelse:\n    import at_runtime\n"
        "def f():\n    from lazy.inner import name\n"
        "class C:\n    def m(self):\n        if True:\n            import deeper\n"
        "def g():\n    from pytest_skilltrigger.plugin import options\n"
        "    from pytest_skilltrigger.support import ROLE\n"
    )
    assert all_imports(source) == {
        "typing",
        "typing.TYPE_CHECKING",
        "top",
        "at_runtime",
        "lazy.inner",
        "lazy.inner.name",
        "deeper",
        f"{NAME}.plugin.options",  # the module, not its package
        f"{NAME}.support",
        f"{NAME}.support.ROLE",  # a name the package defines: the package
    }
    assert "lazy.inner" not in top_level_imports(source)


def test_the_package_root_holds_only_the_public_api_and_the_entry_point() -> None:
    at_root = sorted(p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir())
    assert [n for n in at_root if n != "__pycache__"] == [
        "__init__.py",
        *sorted(FLOORS),
    ]
    import pytest_skilltrigger as api

    for name in api.__all__:
        assert getattr(api, name) is not None


PROBE = """
import sys

def test_probe(request):
    mods = sorted(m for m in sys.modules if m.startswith("pytest_skilltrigger"))
    heavy = sorted(m for m in ("yaml", "sqlite3", "anthropic") if m in sys.modules)
    worker = getattr(request.config, "workerinput", {}).get("workerid")
    with open("probe.json", "w") as f:
        import json
        json.dump({"modules": mods, "heavy": heavy, "worker": worker}, f)
"""


@pytest.mark.parametrize(
    "args,worker", [((), None), (("-n", "1"), "gw0")], ids=["plain", "xdist-worker"]
)
def test_a_project_without_skills_loads_little_of_the_plugin(
    pytester: pytest.Pytester, args: tuple[str, ...], worker: str | None
) -> None:
    """Every pytest run of a project that has the plugin installed imports the entry point;
    without a skill in play (and no option of ours given) that must not load the engine,
    yaml, sqlite3 or the SDK: in a plain run, and in an xdist worker (``-n 1``), where the
    probe records the worker's modules."""
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest_subprocess("-q", *args)
    result.assert_outcomes(passed=1)
    probe = json.loads((pytester.path / "probe.json").read_text())
    assert probe["worker"] == worker  # the probe ran where it was meant to
    assert probe["heavy"] == []
    # the plugin object, its strategy, the reporter, the option declaration (a table in three
    # modules: the sampling options, the outputs', and the groups) and their few helpers:
    # small modules, no engine
    assert len(probe["modules"]) <= 21, probe["modules"]
    engine = [m for m in probe["modules"] if m.startswith(f"{NAME}.engine.")]
    assert engine == []
    assert not [m for m in probe["modules"] if m.startswith(f"{NAME}.backends")]


def test_importing_the_public_api_does_not_import_pytest() -> None:
    code = "import sys, pytest_skilltrigger as p; p.evaluate_skill; print('pytest' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_public_api_is_typed_for_users(tmp_path: Path) -> None:
    """A user's type checker sees the real types through the lazy package root (its imports
    under TYPE_CHECKING), not ``Any``, and every exported name is listed there."""
    import pytest_skilltrigger as api

    source = (PACKAGE / "__init__.py").read_text(encoding="utf-8")
    for name in api.__all__:
        if name != "__version__":
            assert f" {name}" in source.split("if TYPE_CHECKING:", 1)[1].split("__version__")[0]
    user = tmp_path / "user.py"
    user.write_text(
        "from pytest_skilltrigger import Settings, TriggerSession, evaluate_skill\n"
        "session = TriggerSession(Settings(min_runs=5))\n"
        "reveal_type(session.submit)\n"
        "reveal_type(evaluate_skill)\n"
    )
    mypy = Path(sys.executable).parent / "mypy"
    if not mypy.exists():
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    done = subprocess.run(
        [str(mypy), "--strict", str(user)], capture_output=True, text=True, cwd=PACKAGE.parent
    )
    assert "Future[pytest_skilltrigger.model.outcome.QueryResult]" in done.stdout, done.stdout
    assert "Any" not in done.stdout.replace("Any]", ""), done.stdout
