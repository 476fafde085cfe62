"""The design rules the layering alone does not hold: small modules, single inheritance, no
state kept by a module, and collaborators that are handed in, never wired in afterwards.

Each rule reads the source (``ast``), so it fails on the line that breaks it, before any
behaviour does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.architecture.test_layout import MODULES, NAME

MAX_LINES = 600
# stateful types of the standard library: a module-level instance is state every caller shares
STATEFUL = {
    "Lock",
    "RLock",
    "Condition",
    "Event",
    "Semaphore",
    "BoundedSemaphore",
    "local",
    "set",
    "list",
    "dict",
    "defaultdict",
    "deque",
    "Counter",
    "OrderedDict",
    "Queue",
    "SimpleQueue",
    "WeakSet",
    "WeakKeyDictionary",
    "WeakValueDictionary",
}
MUTATING = {
    "add",
    "append",
    "extend",
    "insert",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "clear",
    "discard",
    "remove",
}
# bases a class may add to its one base: typing's markers and the exceptions' ``Exception``
MARKER_BASES = {"Protocol", "Generic", "Exception", "ValueError", "RuntimeError", "TypeError"}


def tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


def short(name: str) -> str:
    return name.removeprefix(NAME + ".")


def base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ast.unparse(node)


def classes() -> Iterator[tuple[str, ast.ClassDef]]:
    for name in MODULES:
        for node in ast.walk(tree(name)):
            if isinstance(node, ast.ClassDef):
                yield name, node


def immutable_class(node: ast.ClassDef) -> bool:
    """A frozen dataclass, a named tuple or an enum: an instance at module level is a
    constant."""
    for decorator in node.decorator_list:
        text = ast.unparse(decorator)
        if text.startswith("dataclass") and "frozen=True" in text:
            return True
    return any(base_name(b) in {"NamedTuple", "Enum", "StrEnum", "IntEnum"} for b in node.bases)


MUTABLE_CLASSES = {node.name for _, node in classes() if not immutable_class(node)}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_long(name: str) -> None:
    """A module over 600 lines holds more than one job: split it by job (as
    ``skills/plugin_eval/`` is: read, schema, classify, write)."""
    lines = MODULES[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{short(name)}: {lines} lines"


def test_every_class_has_one_base_at_most() -> None:
    """Single inheritance: a class that needs two parents' behaviour composes one of them.
    Protocols (which only add the marker) and exceptions are the exception."""
    found = []
    for name, node in classes():
        bases = [base_name(b) for b in node.bases]
        if len([b for b in bases if b not in MARKER_BASES]) > 1:
            found.append(f"{short(name)}.{node.name}({', '.join(bases)})")


def module_bindings(module: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    for node in module.body:
        if isinstance(node, ast.Assign) and node.value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                yield node.target.id, node.value


def mutated_names(module: ast.Module) -> set[str]:
    """Names a module's code mutates: ``NAME.add(...)``, ``NAME[key] = ...``, ``del
    NAME[key]``, ``global NAME``."""
    found: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in MUTATING and isinstance(node.func.value, ast.Name):
                found.add(node.func.value.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    found.add(target.value.id)
        elif isinstance(node, ast.Global):
            found.update(node.names)
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_keeps_state(name: str) -> None:
    """No module-level mutable singleton: no lock, registry, cache or instance at module
    level that callers share, and no module-level table that the code changes. State lives in
    an object someone made and handed on."""
    module = tree(name)
    mutated = mutated_names(module)
    found = []
    for bound, value in module_bindings(module):
        if isinstance(value, ast.Call) and base_name(value.func) in STATEFUL | MUTABLE_CLASSES:
            found.append(f"{bound} = {ast.unparse(value)}")
        elif bound in mutated:
            found.append(f"{bound} is changed by the module's code")
    assert found == [], short(name)


def init_collaborators(node: ast.ClassDef) -> set[str]:
    """The attributes a class's ``__init__`` stores from its parameters as they came:
    ``self.store = store``."""
    for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            params = {a.arg for a in (*item.args.args, *item.args.kwonlyargs)} - {"self"}
            return {
                target.attr
                for stmt in ast.walk(item)
                if isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.Name)
                and stmt.value.id in params
                for target in stmt.targets
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            }
    return set()


def assigned_attributes(node: ast.AST) -> Iterator[ast.Attribute]:
    for stmt in ast.walk(node):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(one, ast.Attribute):
                        yield one


def test_no_collaborator_is_changed_from_outside() -> None:
    """An object handed in at construction is used, never rewired: no method assigns an
    attribute of a collaborator its ``__init__`` stored (``self.limiter.notify = ...``)."""
    found = []
    for name, node in classes():
        handed_in = init_collaborators(node)
        for attribute in assigned_attributes(node):
            owner = attribute.value
            if (
                isinstance(owner, ast.Attribute)
                and isinstance(owner.value, ast.Name)
                and owner.value.id == "self"
                and owner.attr in handed_in
            ):
                found.append(f"{short(name)}.{node.name}: {ast.unparse(attribute)} = ...")


def test_no_behaviour_is_wired_in_from_outside() -> None:
    """No function or method hands another object its behaviour by assignment
    (``batches.record = self.record``, ``limiter.notify = lambda ...``): a collaborator is a
    keyword argument of the constructor."""
    found = []
    for name in MODULES:
        module = tree(name)
        functions = {n.name for n in ast.walk(module) if isinstance(n, ast.FunctionDef)}
        for stmt in ast.walk(module):
            if not isinstance(stmt, ast.Assign):
                continue
            value = stmt.value
            wiring = isinstance(value, ast.Lambda) or (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Name)
                and value.value.id == "self"
                and value.attr in functions
            )
            for target in stmt.targets:
                outside = isinstance(target, ast.Attribute) and not (
                    isinstance(target.value, ast.Name) and target.value.id in {"self", "cls"}
                )
                if wiring and outside:
                    found.append(f"{short(name)}: {ast.unparse(stmt)}")


def test_cached_properties_only_compute() -> None:
    """A cached property computes its value and returns it: it sets no other attribute (a
    side effect there happens whenever something first reads the property)."""
    found = []
    for name, node in classes():
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and any(
                base_name(d) == "cached_property" for d in item.decorator_list
            ):
                for attribute in assigned_attributes(item):
                    if isinstance(attribute.value, ast.Name) and attribute.value.id == "self":
                        found.append(f"{short(name)}.{node.name}.{item.name}")


def test_the_rules_see_what_they_forbid(tmp_path: Path) -> None:
    """Each rule, on a module written to break it."""
    bad = ast.parse(
        "import threading\n"
        "LOCK = threading.Lock()\n"
        "SEEN = set()\n"
        "TABLE = {}\n"
        "def note(x):\n"
        "    TABLE[x] = 1\n"
    )
    assert {n for n, v in module_bindings(bad) if isinstance(v, ast.Call)} == {"LOCK", "SEEN"}
    assert "TABLE" in mutated_names(bad)
    cls = ast.parse(
        "class A:\n"
        "    def __init__(self, limiter):\n"
        "        self.limiter = limiter\n"
        "    def wire(self):\n"
        "        self.limiter.notify = print\n"
    ).body[0]
    assert isinstance(cls, ast.ClassDef)
    assert init_collaborators(cls) == {"limiter"}
    assert [ast.unparse(a) for a in assigned_attributes(cls)] == [
        "self.limiter",
        "self.limiter.notify",
    ]


REASONS = ("# deferred:", "# optional:", "# private:")


def test_an_import_inside_a_function_says_why() -> None:
    """An import inside a function defers a heavy dependency (``deferred:``), reaches an
    optional one (``optional:``) or a private one that may be gone (``private:``), and the
    comment above its group says which; any other import belongs at the top."""
    found = []
    for name in MODULES:
        lines = MODULES[name].read_text(encoding="utf-8").split("\n")
        for function in ast.walk(tree(name)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                start = node.lineno - 1
                while start > 0 and lines[start - 1].strip().startswith(("from ", "import ")):
                    start -= 1
                above = start - 1
                while above > 0 and lines[above - 1].strip().startswith("#"):
                    above -= 1  # a comment of several lines: its first line says why
                said = lines[above].strip() + lines[node.lineno - 1]
                if not any(reason in said for reason in REASONS):
                    found.append(f"{short(name)}:{node.lineno}")
