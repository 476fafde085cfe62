"""Who may do what, checked on the source: the rules the README's architecture section states
beyond the floors (one store writer, one backend factory, one JSON edge for the reports, a
closed list of modules that write files, none of them reachable from an xdist worker's role).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.architecture.test_layout import MODULES, NAME, all_imports

# The modules that write files, and what each writes (checked: no other module does).
FILE_WRITERS = {
    "support.atomic": "the one atomic writer the others call",
    "reports.json_report": "the results JSON",
    "conclusion.round_files": "each iteration's exchange with the improve model",
    "conclusion.outputs": "the pages and the step summary",
    "conclusion.session_end": "the time-stamped results folder",
    "skills.write_back": "SKILL.md's new description",
    "skills.plugin_eval.write": "the claude plugin eval cases --trigger-export-plugin-eval writes",
    "skills.harvest_file": "the harvest file and, when merged, the eval sets it adds to",
    "plugin.xdist": "the runs made ahead in batches, for the workers (controller)",
    "backends.claude_code.workspace": "the throw-away workspace of one CLI run",
    "backends.claude_code.backend": "the CLI's throw-away home: its config and installed skills",
    "backends.capture": "the throw-away project a capture runs the CLI in",
    "backends.api.rate_limit": "the rate limits a session's processes share (a temporary file)",
}
WRITING_CALLS = {"atomic_write_text", "atomic_write_bytes", "write_text", "write_bytes"}


def calls(name: str) -> Iterator[ast.Call]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    yield from (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def receiver(call: ast.Call) -> str:
    """``store`` for ``self.store.record(...)`` or ``store.record(...)``."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return ""
    value = func.value
    if isinstance(value, ast.Attribute):
        return value.attr
    return value.id if isinstance(value, ast.Name) else ""


def opens_for_writing(call: ast.Call) -> bool:
    if callee(call) not in {"open", "fdopen"}:
        return False
    modes = [a.value for a in call.args[1:2] if isinstance(a, ast.Constant)]
    modes += [
        k.value.value
        for k in call.keywords
        if k.arg == "mode" and isinstance(k.value, ast.Constant)
    ]
    return any(isinstance(m, str) and set(m) & set("wax+") for m in modes)


def short(name: str) -> str:
    return name.removeprefix(NAME + ".")


def test_only_the_listed_modules_write_files() -> None:
    writers = {
        short(name)
        for name in MODULES
        if any(callee(c) in WRITING_CALLS or opens_for_writing(c) for c in calls(name))
    }
    assert writers <= set(FILE_WRITERS), writers - set(FILE_WRITERS)


def test_a_worker_role_reaches_no_report_or_skill_writer() -> None:
    """An xdist worker hands its results to the controller: nothing it imports, now or
    lazily, writes the reports, the round files or SKILL.md."""
    seen, todo = set(), [f"{NAME}.plugin.strategy"]
    while todo:
        name = todo.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        todo += [m for m in all_imports(MODULES[name]) if m.startswith(NAME)]
    forbidden = {
        f"{NAME}.{m}"
        for m in (
            "reports.json_report",
            "conclusion.round_files",
            "conclusion.outputs",
            "skills.write_back",
        )
    }
    assert not seen & forbidden, seen & forbidden


def test_the_session_is_the_stores_only_writer() -> None:
    """``ResultStore`` is opened by the session alone, and only the session records runs in
    it; captures are saved through the ``StoredCaptures`` the session builds and hands to
    the backend's captures (it knows whether this process may write); the sampler only reads
    it."""
    makers = {short(n) for n in MODULES if any(callee(c) == "ResultStore" for c in calls(n))}
    assert makers - {"engine.store"} == {"engine.session"}  # (the store checks a path itself)
    writes = {
        short(n)
        for n in MODULES
        for c in calls(n)
        if receiver(c) == "store" and callee(c) in {"record", "save_capture"}
    }
    assert writes == {"engine.session", "engine.store", "backends.capture"}


def test_backends_are_made_only_by_the_factory() -> None:
    """The backend classes are built in ``backends/__init__.py`` alone, and the factory is
    called by the session alone: for its lanes (one backend per model) and, handed to its
    asker, for the backend that answers plain questions."""
    classes = {"AnthropicBackend", "ClaudeCodeBackend"}
    builders = {short(n) for n in MODULES if any(callee(c) in classes for c in calls(n))}
    assert builders == {"backends"}

    def uses_the_factory(name: str) -> bool:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        return any(isinstance(n, ast.Name) and n.id == "make_backend" for n in ast.walk(tree))

    assert {short(n) for n in MODULES if uses_the_factory(n)} == {"engine.lanes", "engine.session"}


def test_the_reports_make_json_in_one_place() -> None:
    """Results stay typed until the edge: of the reports and the conclusion, only
    ``json_report`` serialises to JSON (reading a baseline file is reading input)."""
    makers = {
        short(n)
        for n in MODULES
        if short(n).startswith(("reports.", "conclusion."))
        and any(receiver(c) == "json" and callee(c) in {"dumps", "dump"} for c in calls(n))
    }
    assert makers == {"reports.json_report"}
