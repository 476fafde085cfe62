"""Shared helpers of the benchmarks: generated skills, the local fake API, measured pytest runs.

Every benchmark builds a throw-away project in a temporary folder (a ``pytest.ini``, a skill
folder with ``SKILL.md`` and ``evals/trigger-eval.json``), starts the fake Messages API
(``tests/fake_messages_api.py``) in a thread of *this* process, and runs pytest on the project
as a child process, exactly as a user would: ``python -m pytest --trigger-skill-path ...`` with
``ANTHROPIC_BASE_URL`` pointing at the fake. Because the server lives in this process, the
child's CPU time (``RUSAGE_CHILDREN``) is the client's alone.

Queries are clear-cut: each one is scripted on the server (``api.script``) to always choose the
skill (should-trigger queries) or always something else (should-not queries), so verdicts and
call counts are deterministic.

Benchmarks print measurements; they never assert and always exit 0.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_messages_api import FakeMessagesAPI  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
if not os.path.exists(PYTHON):
    PYTHON = sys.executable

SKILL_NAME = "ledger-reconciler"
MODEL = "claude-bench-model"
DESCRIPTION = (
    "Reconcile bank ledgers against invoices: match payments to invoices, flag unmatched or "
    "duplicated payments, and explain differences in totals. Use when the user wants ledger "
    "entries, statements or payment exports reconciled or checked against each other."
)
NEGATIVE_CHOICES = ("text", "tool:Bash", "tool:Read", "skill:data-charts")

_POS_TEMPLATES = (
    "reconcile ledger batch {i} against the invoices from supplier {j}",
    "match the payments in statement {i} to open invoices of account {j}",
    "why does the ledger total of export {i} differ from invoice run {j}",
    "find duplicated payments in bank export {i} for cost centre {j}",
)
_NEG_TEMPLATES = (
    "write a haiku about autumn leaves number {i} in style {j}",
    "what is the capital of country number {i} on list {j}",
    "rename variable v{i} to count{j} in main.py",
    "draw a bar chart of series {i} against series {j}",
)


class _NoList(list):
    """Stands in for the fake server's request log: long runs must not grow this process."""

    def append(self, item: Any) -> None:
        return None


def make_entries(n: int) -> list[dict[str, Any]]:
    """``n`` unique eval entries, alternating should-trigger and should-not."""
    entries = []
    for i in range(n):
        positive = i % 2 == 0
        templates = _POS_TEMPLATES if positive else _NEG_TEMPLATES
        query = templates[(i // 2) % len(templates)].format(i=i, j=(i * 7919) % 1000)
        entries.append({"query": query, "should_trigger": positive})
    return entries


def write_project(
    folder: Path,
    entries: Sequence[dict[str, Any]],
    *,
    conftest: str | None = None,
    description: str = DESCRIPTION,
) -> Path:
    """Lay out a project in ``folder``; return the skill folder (for ``--trigger-skill-path``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pytest.ini").write_text("[pytest]\n")
    skill = folder / "skills" / SKILL_NAME
    (skill / "evals").mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(
        f"---\nname: {SKILL_NAME}\ndescription: {description}\n---\n\n# Ledger reconciler\n\n"
        "Match every payment to an invoice and report what is left over.\n"
    )
    (skill / "evals" / "trigger-eval.json").write_text(json.dumps(list(entries), indent=1))
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest)
    return skill


def script_entries(
    api: FakeMessagesAPI, entries: Sequence[dict[str, Any]], pattern: Sequence[str] | None = None
) -> None:
    """Script every query: should-trigger ones always pick the skill, others never do.

    ``pattern`` overrides the outcomes of every query (e.g. mixed ones); scripting again also
    rewinds each query's cycle, so two runs see the same outcome sequences.
    """
    for n, entry in enumerate(entries):
        if pattern is not None:
            outcomes = list(pattern)
        elif entry["should_trigger"]:
            outcomes = [f"skill:{SKILL_NAME}"]
        else:
            outcomes = [NEGATIVE_CHOICES[n % len(NEGATIVE_CHOICES)]]
        api.script(entry["query"], outcomes)


@contextmanager
def fake_api(latency: float = 0.0, awkward: bool = True) -> Iterator[FakeMessagesAPI]:
    api = FakeMessagesAPI(latency=latency, awkward=awkward)
    api.requests = _NoList()
    api.request_headers = _NoList()
    with api:
        yield api


@contextmanager
def temp_dir(prefix: str = "skilltrigger-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def scripted_project(
    entries: Sequence[dict[str, Any]], *, latency: float = 0.0, conftest: str | None = None
) -> Iterator[tuple[Path, FakeMessagesAPI, Path]]:
    """A throw-away project of ``entries`` with the fake API scripted for them.

    Yields ``(folder, api, skill)``: the project folder (pytest's ``cwd``), the running fake
    server and the skill folder (for ``--trigger-skill-path``); both go away on exit.
    """
    with temp_dir() as tmp, fake_api(latency=latency) as api:
        skill = write_project(tmp, entries, conftest=conftest)
        script_entries(api, entries)
        yield tmp, api, skill


@dataclass
class RunResult:
    wall: float
    user: float
    sys: float
    calls: int
    returncode: int
    output: str
    maxrss_kb: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu(self) -> float:
        return self.user + self.sys

    def tail(self, lines: int = 3) -> str:
        return "\n".join(self.output.strip().splitlines()[-lines:])


def child_env(api: FakeMessagesAPI | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ANTHROPIC_AUTH_TOKEN", None)
    env.pop("PYTEST_ADDOPTS", None)
    env["ANTHROPIC_API_KEY"] = "test-key"
    if api is not None:
        env["ANTHROPIC_BASE_URL"] = api.url
    # Let the child cache bytecode like a user's pytest would (the sessions' shells set this).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def pytest_cmd(args: Sequence[str], prefix: Sequence[str] = ()) -> list[str]:
    return [*prefix, PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def skill_args(
    skill: Path,
    *,
    runs: int = 3,
    concurrency: int | None = None,
    early_stop: bool = True,
    cache: str = "off",
    store: Path | None = None,
    json_path: Path | None = None,
    confidence: str = "off",
) -> list[str]:
    """The plugin's options for one run of the generated skill. The targets are defined on
    the reference rule (``runs`` runs against the threshold, the first call judged), so it is
    the default here: ``confidence`` "off"; a number runs the sequential rule."""
    args = [
        "--trigger-skill-path",
        str(skill),
        "--trigger-backend",
        "anthropic",
        "--trigger-model",
        MODEL,
        "--trigger-runs",
        str(runs),
        "--trigger-cache",
        cache,
        f"--trigger-confidence={confidence}",
        # the reference scripts' rule, as the loops these benchmarks compare with judge a run
        # (what judging the turn costs is bench_within_turn.py's)
        "--trigger-within=first-call",
    ]
    if concurrency is not None:
        args += ["--trigger-concurrency", str(concurrency)]
    if not early_stop:
        args.append("--trigger-no-early-stop")
    if store is not None:
        args += ["--trigger-store", str(store)]
    if json_path is not None:
        args += ["--trigger-json", str(json_path)]
    return args


def run_pytest(
    args: Sequence[str],
    cwd: Path,
    api: FakeMessagesAPI | None,
    *,
    prefix: Sequence[str] = (),
    timeout: float = 900,
) -> RunResult:
    """Run pytest as a child; measure wall time, the child's CPU and the server's calls."""
    calls_before = api.stats["calls"] if api is not None else 0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        pytest_cmd(args, prefix),
        cwd=cwd,
        env=child_env(api),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    calls = (api.stats["calls"] - calls_before) if api is not None else 0
    return RunResult(
        wall=wall,
        user=after.ru_utime - before.ru_utime,
        sys=after.ru_stime - before.ru_stime,
        calls=calls,
        returncode=proc.returncode,
        output=proc.stdout,
        maxrss_kb=after.ru_maxrss,
    )


def best_of(n: int, fn: Any) -> RunResult:
    """The fastest of ``n`` runs (start-up measurements are noisy on a busy 2-core box)."""
    results = [fn() for _ in range(n)]
    return min(results, key=lambda r: r.wall)


def fill_store(store: Path, skill: Path, entries: Sequence[dict[str, Any]], runs: int = 2) -> int:
    """Write ``runs`` agreeing runs per entry straight into a result store; return the count.

    Uses the plugin's own context key (same backend, model and listing as ``skill_args``), so
    a later ``--trigger-cache use`` run finds every entry decided and makes no call. Much
    faster than filling it through the fake server when there are thousands of entries.
    """
    os.environ.setdefault("ANTHROPIC_API_KEY", "test-key")
    from pytest_skilltrigger.backends.api.backend import AnthropicBackend
    from pytest_skilltrigger.engine.store import ResultStore
    from pytest_skilltrigger.model.outcome import RunOutcome
    from pytest_skilltrigger.skills.catalog import load_targets

    target = load_targets([str(skill)])[0]
    backend = AnthropicBackend(model=MODEL)
    key = backend.context_key(target.context())
    backend.close()
    db = ResultStore(str(store))
    written = 0
    try:
        for entry in entries:
            if entry["should_trigger"]:
                outcomes = [
                    RunOutcome("triggered", chosen=f"skill:{SKILL_NAME}") for _ in range(runs)
                ]
            else:
                outcomes = [RunOutcome("not_triggered", chosen="text") for _ in range(runs)]
            written += db.record(("anthropic", MODEL), key, entry["query"], outcomes)
    finally:
        db.close()
    return written


def report_verdicts(path: Path) -> dict[str, bool | None]:
    """query -> pass/fail from a ``--trigger-json`` report."""
    data = json.loads(path.read_text())
    out: dict[str, bool | None] = {}
    for skill in data["skills"]:
        for row in skill["results"]:
            out[row["query"]] = row.get("pass")
    return out


def check(label: str, result: RunResult) -> None:
    """Say so when a run did not end the way a benchmark expects (all passed: exit 0)."""
    if result.returncode != 0:
        print(f"  !! {label}: pytest exited {result.returncode}:\n{result.tail(8)}")


def emit(rows: list[dict[str, Any]]) -> None:
    """Print machine-readable target rows (run_all.py collects lines starting with '@@')."""
    for row in rows:
        print("@@ " + json.dumps(row), flush=True)


def target_row(
    target: str, measured: float, limit: float, unit: str, note: str = "", lower_is_better=True
) -> dict[str, Any]:
    ratio = measured / limit if limit else float("inf")
    ok = measured <= limit if lower_is_better else measured >= limit
    return {
        "target": target,
        "measured": measured,
        "limit": limit,
        "unit": unit,
        "ratio": ratio,
        "ok": ok,
        "note": note,
    }


def bench_parser(doc: str | None) -> argparse.ArgumentParser:
    """A benchmark's command line: its docstring's first paragraph as help, and ``--quick``."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    return parser


def quick_flag(argv: Sequence[str] | None = None) -> bool:
    return "--quick" in (argv if argv is not None else sys.argv[1:])
