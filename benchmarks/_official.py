"""Shared set-up of the benchmarks that run this plugin beside the official runner.

``claude plugin eval`` is Claude Code's own eval runner for plugins. Both benchmarks
(``bench_official_runner.py``, ``bench_local_latency.py``) build one throw-away plugin
``acme`` in a temporary folder: the example skill ``csv-cleaner`` with its eval set (20
queries, or fewer with ``--quick``) and the other example skills beside it (their
``SKILL.md`` alone, so they compete in the listing but are not tested). The eval set is
exported into the plugin's ``evals/`` with ``pytest --trigger-export-plugin-eval``, so both runners
run the same queries. The pinned CLI (``.tools/``, ``.ci/install_claude_code.sh``) runs
the official runner with a fresh HOME, results in a temporary ``--output-dir``.

The model behind the local fake Messages API is the graded stand-in
(``tests/graded_model.py``, seed 7): each query has a true rate at which the model picks
``acme:csv-cleaner``, and every request draws afresh. That rate depends on what the request
lists, so each runner's true rates are recorded from its own requests (:class:`RateRecorder`).

A verdict is **right** when it agrees with the true rate: a should-trigger query is right
when it passes if and only if its rate is at least 0.5, a should-not query when it passes if
and only if its rate is below 0.5. For the official runner a case passes when its score (the
mean over its runs) reaches ``--threshold``; for this plugin it is the item's ``pass`` in
``--trigger-json`` (a borderline item fails).
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import ROOT, child_env, pytest_cmd

from tests.fake_messages_api import FakeMessagesAPI
from tests.graded_model import GradedModel

CLI = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
PLUGIN = "acme"
SKILL = "csv-cleaner"
LISTED = f"{PLUGIN}:{SKILL}"
SIBLINGS = ("release-notes", "spreadsheet-charts")
SEED = 7
THRESHOLD = 0.5
MB = 1_000_000


@dataclass(frozen=True)
class Entry:
    query: str
    should_trigger: bool


def pick_entries(count: int) -> list[Entry]:
    """The first ``count`` entries of the example eval set, half should-trigger, in order."""
    path = ROOT / "example_skills" / SKILL / "evals" / "trigger-eval.json"
    rows = json.loads(path.read_text())
    entries = [Entry(e["query"].strip(), e["should_trigger"]) for e in rows]
    if count >= len(entries):
        return entries
    pos = [e for e in entries if e.should_trigger][: (count + 1) // 2]
    neg = [e for e in entries if not e.should_trigger][: count // 2]
    return [e for e in entries if e in pos or e in neg]


def make_plugin(folder: Path, entries: Sequence[Entry]) -> Path:
    """Lay out the throw-away plugin and export its eval set as cases; return its root."""
    root = folder / PLUGIN
    (root / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": PLUGIN, "version": "0.1.0"}
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    skill = root / "skills" / SKILL
    (skill / "evals").mkdir(parents=True)
    shutil.copy(ROOT / "example_skills" / SKILL / "SKILL.md", skill / "SKILL.md")
    rows = [{"query": e.query, "should_trigger": e.should_trigger} for e in entries]
    (skill / "evals" / "trigger-eval.json").write_text(json.dumps(rows, ensure_ascii=False))
    for sibling in SIBLINGS:
        (root / "skills" / sibling).mkdir()
        shutil.copy(ROOT / "example_skills" / sibling / "SKILL.md", root / "skills" / sibling)
    (folder / "pytest.ini").write_text("[pytest]\n")
    export = [f"--trigger-skill-path={root}", f"--trigger-export-plugin-eval={root / 'evals'}"]
    proc = subprocess.run(
        pytest_cmd(export), cwd=folder, env=child_env(None), capture_output=True, text=True
    )
    cases = list((root / "evals").glob("*/case.yaml"))
    if proc.returncode != 0 or len(cases) != len(entries):
        raise RuntimeError(f"the export wrote {len(cases)} cases:\n{proc.stdout[-800:]}")
    return root


class RateRecorder(GradedModel):
    """The graded stand-in, recording each eval query's true rate of the tested skill as the
    requests it answers list the skills (a query seen with two listings keeps both)."""

    def __init__(self, queries: Sequence[str], draws: int) -> None:
        super().__init__(seed=SEED)
        self.reseed(draws)
        self.queries = frozenset(queries)
        self.seen: dict[str, set[float]] = {}

    def choose(self, query: str, listing: Sequence[tuple[str, str]]) -> str | None:
        if query in self.queries:
            rate = self.first_choice_rates(query, listing).get(LISTED, 0.0)
            with self._lock:
                self.seen.setdefault(query, set()).add(round(rate, 9))
        return super().choose(query, listing)

    def rates(self) -> dict[str, float]:
        """query -> its true rate (the lowest, should its requests have listed differently)."""
        return {q: min(s) for q, s in self.seen.items()}


# -- sampling the CLI processes in /proc -------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(name))
    return kids


def _descendants(pid: int) -> list[int]:
    kids, out, todo = _children_map(), [], [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _cli_hwm(pid: int) -> int | None:
    """A ``claude`` process's peak RSS (``VmHWM``) in bytes; None for any other process."""
    try:
        if not Path(f"/proc/{pid}/comm").read_text().startswith("claude"):
            return None
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    return int(found.group(1)) * 1024 if found else None


class ProcSampler:
    """Every 0.2 s, the ``claude`` processes below a process (not it): how many are alive,
    and the largest peak RSS any of them reached. Linux only; off where /proc is missing."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self.alive: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        if os.path.exists("/proc/self/status"):
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            hwms = [h for p in _descendants(self.pid) if (h := _cli_hwm(p)) is not None]
            self.alive.append(len(hwms))
            self.peak = max([self.peak, *hwms])

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def average_alive(self) -> float | None:
        busy = [n for n in self.alive if n]
        return sum(busy) / len(busy) if busy else None


# -- one measured run of either runner ---------------------------------------------------------

Chance = Callable[[float, bool], float]
"""A runner's chance to pass a query, from its true rate and whether it should trigger."""


def should_pass(entry: Entry, rate: float) -> bool:
    """Whether a right verdict passes the query: its true rate on the expected side of 0.5."""
    return rate >= THRESHOLD if entry.should_trigger else rate < THRESHOLD


@dataclass
class Row:
    """One runner's run: what it cost and each query's pass/fail."""

    label: str
    wall: float = 0.0
    cpu: float = 0.0
    calls: int = 0
    runs: int = 0
    returncode: int = 0
    passed: dict[str, bool | None] = field(default_factory=dict)
    rates: dict[str, float] = field(default_factory=dict)
    in_flight: str = ""
    peak_rss: int | None = None
    sampled_peak: int = 0
    sampled_alive: float | None = None
    alive: list[int] = field(default_factory=list)  # CLI processes alive, every 0.2 s
    problem: str = ""
    chance: Chance | None = None

    def right(self, entries: Sequence[Entry]) -> int:
        """How many verdicts agree with the true rates this run's requests had."""
        good = 0
        for e in entries:
            rate = self.rates.get(e.query)
            if rate is not None and self.passed.get(e.query) is not None:
                good += self.passed[e.query] == should_pass(e, rate)
        return good

    def expected_right(self, entries: Sequence[Entry]) -> float | None:
        """The verdicts right this runner gets on average over fresh draws, exactly, from the
        true rates its requests had (``chance``: its chance to pass a query)."""
        if self.chance is None:
            return None
        return sum(_right_chance(self, e) or 0.0 for e in entries)

    def right_cell(self, entries: Sequence[Entry]) -> str:
        expected = self.expected_right(entries)
        shown = f"{self.right(entries)} of {len(entries)}"
        return shown if expected is None else f"{shown} (expected {expected:.1f})"


def official_chance(runs: int = 3, threshold: float = 1.0) -> Chance:
    """The official runner's chance to pass a case: a run passes when the skill is called
    (should-trigger) or not (should-not), the case when the share of passing runs reaches the
    threshold."""
    need = math.ceil(threshold * runs - 1e-9)

    def chance(rate: float, should_trigger: bool) -> float:
        p = rate if should_trigger else 1 - rate
        return sum(math.comb(runs, k) * p**k * (1 - p) ** (runs - k) for k in range(need, runs + 1))

    return chance


def plugin_chance(rule: Any) -> Chance:
    """This plugin's chance to pass a query under a verdict rule (a borderline one fails)."""
    from pytest_skilltrigger.model.verdict import operating

    def chance(rate: float, should_trigger: bool) -> float:
        o = operating(rule, rate)
        return o.triggered if should_trigger else o.not_triggered

    return chance


def _measure(row: Row, cmd: Sequence[str], cwd: Path, env: dict[str, str], api: Any) -> str:
    """Run ``cmd``: fill the row's wall, CPU (children's rusage), calls and the sampled CLI
    processes; return its output."""
    calls = api.stats["calls"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sampler = ProcSampler(proc.pid)
    output, _ = proc.communicate(timeout=3600)
    sampler.stop()
    row.wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row.cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    row.calls = api.stats["calls"] - calls
    row.returncode = proc.returncode
    row.sampled_peak, row.sampled_alive = sampler.peak, sampler.average_alive
    row.alive = sampler.alive
    return output


def _use_model(api: FakeMessagesAPI, entries: Sequence[Entry], draws: int) -> RateRecorder:
    model = RateRecorder([e.query for e in entries], draws)
    api.graded = model
    return model


def run_official(
    label: str,
    plugin: Path,
    api: FakeMessagesAPI,
    entries: Sequence[Entry],
    *,
    options: Sequence[str] = (),
    draws: int = 0,
) -> Row:
    """``claude plugin eval`` on the plugin's exported cases, offline, with a fresh HOME."""
    row = Row(label)
    model = _use_model(api, entries, draws)
    with tempfile.TemporaryDirectory(prefix="bench-official-") as tmp:
        home, out = Path(tmp) / "home", Path(tmp) / "out"
        home.mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        cmd = [str(CLI), "plugin", "eval", str(plugin), "--ablation", "none", "--trust-plugin"]
        cmd += ["--no-publish", "--json", str(out / "eval.json"), "--output-dir", str(out)]
        output = _measure(row, [*cmd, *options], home, env, api)
        if row.returncode not in (0, 1) or not (out / "eval.json").exists():
            row.problem = f"claude plugin eval exited {row.returncode}: {output[-600:]}"
            return row
        _read_official(row, json.loads((out / "eval.json").read_text()))
    row.rates = model.rates()
    return row


MAX_TURNS_ERROR = "Reached maximum number of turns"


def _read_official(row: Row, data: dict[str, Any]) -> None:
    """Each case's pass (score >= the suite's threshold), runs, and -j from its JSON."""
    threshold = data["suite"]["threshold"]
    errors = 0
    for case in data["cases"]:
        runs = case["arms"]["with"]
        row.runs += len(runs)
        errors += sum(1 for r in runs if r["error"] and MAX_TURNS_ERROR not in r["error"])
        row.passed[case["promptMarkdown"].strip()] = case["aggregates"]["score"] >= threshold
    row.in_flight = f"-j {data['suite']['concurrency']}"
    if errors:
        row.problem = f"{errors} runs errored (other than reaching max turns)"


def run_ours(
    label: str,
    plugin: Path,
    api: FakeMessagesAPI,
    entries: Sequence[Entry],
    *,
    options: Sequence[str] = (),
    draws: int = 0,
    pythonpath: str | None = None,
) -> Row:
    """This plugin on the plugin folder (pytest as a child, a fresh HOME so the result store
    starts empty), its verdicts and concurrency from ``--trigger-json``; ``pythonpath``: a
    folder the child imports from (a benchmark's own ``-p`` plugin)."""
    row = Row(label)
    model = _use_model(api, entries, draws)
    with tempfile.TemporaryDirectory(prefix="bench-ours-") as tmp:
        report = Path(tmp) / "report.json"
        env = child_env(api)
        env.update(HOME=tmp, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        if pythonpath is not None:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
        args = [f"--trigger-skill-path={plugin}", f"--trigger-json={report}", *options]
        output = _measure(row, pytest_cmd(args), plugin.parent, env, api)
        if row.returncode not in (0, 1) or not report.exists():
            row.problem = f"pytest exited {row.returncode}:\n{output[-800:]}"
            return row
        _read_ours(row, json.loads(report.read_text()))
    row.rates = model.rates()
    return row


def _read_ours(row: Row, data: dict[str, Any]) -> None:
    results = [r for skill in data["skills"] for r in skill["results"]]
    row.passed = {r["query"]: r["pass"] for r in results}
    row.runs = sum(r["runs"] for r in results)
    errors = sum(r["errors"] for r in results)
    if errors:
        row.problem = f"{errors} runs errored"
    concurrency = data.get("concurrency")
    if concurrency:
        row.in_flight = (
            f"{concurrency['average_in_flight']:.1f} (most {concurrency['most_in_flight']}, "
            f"limit {concurrency.get('lowest_limit')} to {concurrency.get('highest_limit')})"
        )
        row.peak_rss = concurrency.get("process_peak_rss_bytes")


# -- printing ----------------------------------------------------------------------------------


def markdown(head: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def truth_table(entries: Sequence[Entry], rows: Sequence[Row]) -> str:
    """Each query's true rate (from the first row that saw it; others' in brackets where
    their requests listed the skills differently) and each row's pass/fail."""
    head = ["#", "should", "true rate", *(r.label for r in rows)]
    body = []
    for n, e in enumerate(entries, 1):
        rates = [r.rates[e.query] for r in rows if e.query in r.rates]
        shown = f"{rates[0]:.2f}" if rates else "?"
        others = sorted({f"{x:.2f}" for x in rates} - {shown})
        if others:
            shown += f" ({', '.join(others)})"
        marks = [_mark(r, e) for r in rows]
        body.append([str(n), "yes" if e.should_trigger else "no", shown, *marks])
    return markdown(head, body)


def chance_table(entries: Sequence[Entry], rows: Sequence[Row]) -> str:
    """The queries on which the rows' chances of a right verdict differ by more than 0.05:
    each row's exact chance, from its true rate. Where the expected counts come from."""
    head = ["#", "should", "true rate", *(r.label for r in rows)]
    body = []
    for n, e in enumerate(entries, 1):
        chances = [_right_chance(r, e) for r in rows]
        known = [c for c in chances if c is not None]
        if known and max(known) - min(known) > 0.05:
            cells = [f"{c:.2f}" if c is not None else "?" for c in chances]
            rate = rows[0].rates.get(e.query)
            shown = f"{rate:.2f}" if rate is not None else "?"
            body.append([str(n), "yes" if e.should_trigger else "no", shown, *cells])
    return markdown(head, body) if body else "(no query where they differ by more than 0.05)"


def _right_chance(row: Row, entry: Entry) -> float | None:
    rate = row.rates.get(entry.query)
    if rate is None or row.chance is None:
        return None
    passes = row.chance(rate, entry.should_trigger)
    return passes if should_pass(entry, rate) else 1 - passes


def _mark(row: Row, entry: Entry) -> str:
    passed = row.passed.get(entry.query)
    if passed is None:
        return "-"
    rate = row.rates.get(entry.query)
    wrong = rate is not None and row.right([entry]) == 0
    return ("pass" if passed else "fail") + (" (wrong)" if wrong else "")


def differing_rates(entries: Sequence[Entry], rows: Sequence[Row]) -> list[str]:
    """The rows whose requests gave some query another true rate than the first row's."""
    first = rows[0].rates
    out = []
    for row in rows[1:]:
        moved = [e for e in entries if e.query in row.rates and e.query in first]
        moved = [e for e in moved if abs(row.rates[e.query] - first[e.query]) > 1e-6]
        crossed = [e for e in moved if (row.rates[e.query] >= 0.5) != (first[e.query] >= 0.5)]
        if moved:
            out.append(
                f"{row.label}: {len(moved)} of {len(entries)} queries have other true rates "
                f"(its requests list other competing skills); {len(crossed)} cross 0.5"
            )
    return out


def problems(rows: Sequence[Row]) -> list[str]:
    return [f"!! {r.label}: {r.problem}" for r in rows if r.problem]


def mb(value: int | None) -> str:
    return f"{value / MB:.0f}" if value else "unknown"


def need_cli() -> str | None:
    """Why the benchmark cannot run here, or None."""
    if not CLI.exists():
        return f"no pinned CLI at {CLI}: run .ci/install_claude_code.sh"
    return None


def cli_options() -> list[str]:
    return ["--trigger-backend=claude-code", f"--trigger-claude-bin={CLI}"]
