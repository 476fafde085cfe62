"""Edge cases found in review: shared samplings with opposite expectations, threshold 0,
``refresh`` replacing stored runs, the default store, per-session budgets under xdist, and
bad input that must be a one-line usage error (never an INTERNALERROR)."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.cost import CostGuard, cost_usd
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage
from pytest_skilltrigger.engine.sampler import Sampler, SamplingPlan
from pytest_skilltrigger.engine.store import ResultStore
from pytest_skilltrigger.skills.evalset import parse_eval_set
from pytest_skilltrigger.support.errors import InputError
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

CONTEXT = TriggerContext("pdf-tools", "Merge PDF files.")


class ScriptedBackend:
    """A backend whose answers a test sets; counts its calls."""

    name = "scripted"
    model = "claude-test"

    def __init__(self, status: str = "triggered") -> None:
        self.status = status
        self.calls = 0
        self._lock = threading.Lock()

    def context_key(self, context: TriggerContext) -> str:
        return context.key(backend=self.name)

    def run(self, context: TriggerContext, query: str) -> RunOutcome:
        with self._lock:
            self.calls += 1
        chosen = "skill:pdf-tools" if self.status == "triggered" else "text"
        return RunOutcome(self.status, chosen=chosen, usage=Usage(10, 1))  # type: ignore[arg-type]

    def close(self) -> None:
        pass


def test_one_sampling_serves_callers_with_opposite_expectations() -> None:
    backend = ScriptedBackend("not_triggered")
    sampler = Sampler(backend, concurrency=2)
    plan = SamplingPlan(3, 0.5)
    as_positive = sampler.submit(CONTEXT, "merge these", True, plan).result()
    as_negative = sampler.submit(CONTEXT, "merge these", False, plan).result()
    sampler.close()
    assert backend.calls == 2  # sampled once
    assert as_positive.should_trigger is True and as_positive.passed is False
    assert as_negative.should_trigger is False and as_negative.passed is True


def test_threshold_zero_still_measures_a_rate() -> None:
    backend = ScriptedBackend("not_triggered")
    sampler = Sampler(backend, concurrency=1)
    result = sampler.submit(CONTEXT, "anything", True, SamplingPlan(3, 0.0)).result()
    sampler.close()
    assert result.runs == 1 and result.passed is True  # rate 0.0 >= threshold 0.0


def storing_sampler(backend: ScriptedBackend, store: ResultStore, mode: str) -> Sampler:
    """A sampler wired to a store as a session wires it: read with ``use``, always written."""
    return Sampler(
        backend,
        concurrency=1,
        store=store if mode == "use" else None,
        record=lambda key, query, outcomes: store.record(
            backend.name, backend.model, key, query, outcomes
        ),
    )


def test_refresh_replaces_what_later_runs_read(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "store.sqlite"))
    backend = ScriptedBackend("triggered")
    plan = SamplingPlan(2, 0.5)

    def sample(mode: str) -> tuple[int, int]:
        sampler = storing_sampler(backend, store, mode)
        result = sampler.submit(CONTEXT, "merge these", True, plan).result()
        sampler.close()
        return result.triggers, result.calls

    assert sample("use") == (1, 1)  # 1/1 decides at k=2, t=0.5
    backend.status = "not_triggered"
    assert sample("refresh") == (0, 2)
    assert sample("use") == (0, 0)  # the refreshed runs, not the stale ones
    store.close()


def test_fresh_samplings_neither_read_nor_write_the_store(tmp_path: Path) -> None:
    """The optimizer's re-measurement must be independent of stored runs and must not become
    what a later cached rerun of the description reuses."""
    store = ResultStore(str(tmp_path / "store.sqlite"))
    backend = ScriptedBackend("triggered")
    plan = SamplingPlan(2, 0.5)
    sampler = storing_sampler(backend, store, "use")
    first = sampler.submit(CONTEXT, "merge these", True, plan).result()
    backend.status = "not_triggered"
    fresh = sampler.submit(CONTEXT, "merge these", True, replace(plan, fresh=True)).result()
    sampler.close()
    assert (first.triggers, fresh.triggers, fresh.calls) == (1, 0, 2)  # really sampled again
    sampler = storing_sampler(backend, store, "use")
    later = sampler.submit(CONTEXT, "merge these", True, plan).result()
    sampler.close()
    store.close()
    assert (later.triggers, later.calls) == (1, 0)  # the stored runs, untouched by the fresh ones


def test_lone_surrogate_query_is_bad_input() -> None:
    with pytest.raises(InputError, match="entry 1: query is not valid Unicode"):
        parse_eval_set([{"query": "bad \ud800 x", "should_trigger": True}], "evals.json")


def make_skill(root: Path, entries: list[tuple[str, bool]]) -> Path:
    folder = root / "skills" / "pdf-tools"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Merge and split PDF documents and pages.\n---\n"
    )
    data = [{"query": q, "should_trigger": s} for q, s in entries]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder


def test_default_store_lives_in_the_pytest_cache(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    first = pytester.runpytest_subprocess("--skill-path", str(folder))
    first.assert_outcomes(passed=1)
    calls = fake_api.stats["calls"]
    assert calls >= 1
    assert list((pytester.path / ".pytest_cache").rglob("results.sqlite"))
    second = pytester.runpytest_subprocess("--skill-path", str(folder))
    second.assert_outcomes(passed=1)
    assert fake_api.stats["calls"] == calls  # served from the default store


def test_budget_is_per_session_under_xdist(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    entries = [(f"merge PDF documents batch {i}", True) for i in range(12)]
    folder = make_skill(pytester.path, entries)
    common = plugin_args(
        folder, "--no-early-stop", "--trigger-concurrency", "1", "--trigger-json", "out.json"
    )
    pytester.runpytest_subprocess(*common, "--runs-per-query", "1")
    per_call = json.loads((pytester.path / "out.json").read_text())["skills"][0]["summary"]
    budget = per_call["cost_usd"] / 12 * 4.5  # room for about four calls in the session
    result = pytester.runpytest_subprocess(
        *common, "--runs-per-query", "1", "-n", "3", "--trigger-budget-usd", f"{budget:.8f}"
    )
    spent = json.loads((pytester.path / "out.json").read_text())["skills"][0]["summary"]
    assert spent["cost_usd"] <= budget * 1.01  # three workers, one budget
    assert spent["skipped"] >= 4 and spent["calls"] <= 8
    result.stdout.fnmatch_lines(["*cost budget*was reached*queries were skipped*"])


def test_spending_counted_from_elsewhere_keeps_the_estimate_an_average_call() -> None:
    """The controller adds the xdist workers' spending with its number of calls: the next
    call is then estimated at the average, not at everything the workers spent."""
    price = {"input": 3.0, "output": 15.0}
    guard = CostGuard(price, budget_usd=1.0)
    usage = Usage(input_tokens=100_000, output_tokens=0)  # $0.30 over ten calls
    guard.add(usage, calls=10)
    assert guard.reserve() == pytest.approx(cost_usd(usage, price) / 10)
    assert guard.calls == 10 and guard.usage == usage


@pytest.mark.parametrize(
    "args,message",
    [
        (["--trigger-prices", "missing.json"], "*missing.json: cannot read price table*"),
        (["--trigger-store", "/proc/no/store.sqlite"], "*cannot use as the result store*"),
        (["--trigger-timeout", "nan"], "*--trigger-timeout: must be positive*"),
        (["--trigger-budget-usd", "nan"], "*--trigger-budget-usd: must be a number >= 0*"),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    result = pytester.runpytest_subprocess(
        "--skill-path", str(folder), "--trigger-json", "out.json", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "out.json").exists()


def test_skill_warnings_show_in_the_warnings_summary(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    (folder / "SKILL.md").write_text(
        "---\nname: Other_Name\ndescription: Merge and split PDF documents.\n---\n"
    )
    result = pytester.runpytest_subprocess("--skill-path", str(folder), "-q")
    result.stdout.fnmatch_lines(["*PytestConfigWarning*", "*Other_Name*"])


def test_an_outage_never_makes_a_description_look_better(tmp_path: Path) -> None:
    from pytest_skilltrigger.engine.outcome import QueryResult
    from pytest_skilltrigger.optimizer.loop import Iteration, Optimization
    from pytest_skilltrigger.skills.catalog import load_targets

    folder = make_skill(tmp_path, [("merge these PDF documents", True), ("write a poem", False)])
    (target,) = load_targets([str(folder)])
    entries = list(target.eval_set.entries)

    def result(entry, status: str) -> QueryResult:
        outcome = RunOutcome(
            status,
            chosen=None if status == "error" else "text",  # type: ignore[arg-type]
            error="529 overloaded" if status == "error" else None,
        )
        return QueryResult(entry.query, entry.should_trigger, 1, 0.5, (outcome,))

    run = Optimization(target, 0.0, entries, [])
    # the start lost its positive to an outage; the candidate merely did not error
    run.iterations.append(
        Iteration(
            1,
            "start",
            "evaluated",
            train=[result(entries[0], "error"), result(entries[1], "not_triggered")],
        )
    )
    run.iterations.append(
        Iteration(
            2,
            "candidate",
            "evaluated",
            train=[result(entries[0], "triggered"), result(entries[1], "not_triggered")],
        )
    )
    assert run.best().iteration == 2
    assert run.improved is False


@pytest.mark.parametrize("written", ["yes", "On", "2024-01-01", "1.0", "true"])
def test_yaml_typed_scalars_read_as_the_text_written(tmp_path: Path, written: str) -> None:
    from pytest_skilltrigger.skills.skill import read_skill

    folder = tmp_path / "typed"
    folder.mkdir()
    (folder / "SKILL.md").write_text(f"---\nname: typed\ndescription: {written}\n---\nbody\n")
    assert read_skill(folder).description == written


@pytest.mark.parametrize("written", ["yes", "2024-01-01", "1.0"])
def test_typed_scalars_read_as_text_also_in_leniently_read_frontmatter(
    tmp_path: Path, written: str
) -> None:
    from pytest_skilltrigger.skills.skill import read_skill

    folder = tmp_path / "typed"
    folder.mkdir()
    broken = f"---\nname: {written}\nlicense: a: b\ndescription: {written}\n---\nbody\n"
    (folder / "SKILL.md").write_text(broken)
    skill = read_skill(folder)
    assert (skill.name, skill.description) == (written, written)
    assert any("read leniently" in w for w in skill.warnings)


def test_atomic_write_keeps_a_symlinked_file_a_symlink(tmp_path: Path) -> None:
    from pytest_skilltrigger.support.atomic import atomic_write_text

    real = tmp_path / "shared" / "SKILL.md"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "SKILL.md"
    link.symlink_to(real)
    atomic_write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["SKILL.md"]
