"""Edge cases found in review: the default store, per-session budgets under xdist, and bad
input that must be a one-line usage error (never an INTERNALERROR). (The sampler's own edge
cases are in ``tests/engine/test_sampler.py``.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_skilltrigger.engine.context import TriggerContext
from pytest_skilltrigger.engine.cost import CostGuard, cost_usd
from pytest_skilltrigger.engine.outcome import RunOutcome, Usage
from pytest_skilltrigger.skills.evalset import parse_eval_set
from pytest_skilltrigger.support.errors import InputError
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

CONTEXT = TriggerContext("pdf-tools", "Merge PDF files.")


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


def test_default_store_lives_in_the_user_cache_whatever_rootdir_and_cache_plugin(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_cache = pytester.path / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(user_cache))
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    first = pytester.runpytest_subprocess(f"--skill-path={folder}")
    first.assert_outcomes(passed=1)
    calls = fake_api.stats["calls"]
    assert calls >= 1
    store = user_cache / "pytest-skilltrigger" / "results.sqlite"
    assert store.is_file()
    assert not list((pytester.path / ".pytest_cache").rglob("*.sqlite"))
    first.stdout.fnmatch_lines([f"skilltrigger: *store {store}*"])
    # without pytest's cache plugin the store is the same one
    second = pytester.runpytest_subprocess(f"--skill-path={folder}", "-p", "no:cacheprovider")
    second.assert_outcomes(passed=1)
    assert fake_api.stats["calls"] == calls  # served from the default store


def test_budget_is_per_session_under_xdist(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    entries = [(f"merge PDF documents batch {i}", True) for i in range(12)]
    folder = make_skill(pytester.path, entries)
    common = plugin_args(
        folder, "--no-early-stop", "--trigger-concurrency", "1", "--trigger-json=out.json"
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


def test_spending_counted_from_elsewhere_counts_against_the_budget_by_phase() -> None:
    """The controller adds the xdist workers' spending with its number of calls: it counts
    against the one budget and under its phase, and an unknown model's cost is unknown."""
    price = {"input": 3.0, "output": 15.0}
    guard = CostGuard("m", {"m": price}, budget_usd=1.0)
    usage = Usage(input_tokens=100_000, output_tokens=0)  # $0.30 over ten calls
    guard.add(usage, 10, "items")
    assert not guard.reserve(0.75) and guard.reserve(0.65)
    assert guard.by_phase["items"].calls == 10 and guard.by_phase["items"].usage == usage
    assert guard.total().cost_usd == pytest.approx(cost_usd(usage, price))
    guard.add(Usage(10, 1), 1, "improve", model="not-a-listed-model")
    assert guard.by_phase["improve"].cost_usd is None and guard.total().cost_usd is None


@pytest.mark.parametrize(
    "args,message",
    [
        (["--trigger-prices=missing.json"], "*missing.json: cannot read price table*"),
        (["--trigger-store=/proc/no/store.sqlite"], "*cannot use as the result store*"),
        (["--trigger-timeout", "nan"], "*--trigger-timeout: must be positive*"),
        (["--trigger-budget-usd", "nan"], "*--trigger-budget-usd: must be a number >= 0*"),
    ],
)
def test_bad_options_are_usage_errors(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    result = pytester.runpytest_subprocess(
        f"--skill-path={folder}", "--trigger-json=out.json", *args
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "out.json").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runs-per-query=0"], "*--runs-per-query: must be at least 1, got 0*"),
        (["--trigger-backend=bogus"], "*--trigger-backend: must be one of auto, anthropic,*"),
        (["--trigger-cache=bogus"], "*--trigger-cache: must be one of use, refresh, off*"),
    ],
)
def test_a_bad_option_is_a_usage_error_also_without_skills(
    pytester: pytest.Pytester, args: list[str], message: str
) -> None:
    """The engine's settings are built lazily in a project without skills, but a given option
    is still checked at configure (a bad choice included, which argparse no longer checks)."""
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_skill_warnings_show_in_the_warnings_summary(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = make_skill(pytester.path, [("merge these PDF documents", True)])
    (folder / "SKILL.md").write_text(
        "---\nname: Other_Name\ndescription: Merge and split PDF documents.\n---\n"
    )
    result = pytester.runpytest_subprocess(f"--skill-path={folder}", "-q")
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


def test_an_unknown_model_stops_the_session(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    """A 404 for the model is fatal: the first answer stops the session instead of erroring
    every item after its own calls."""
    fake_api.known_models = {"claude-opus-5-5"}
    folder = make_skill(
        pytester.path,
        [(f"merge these PDF documents, part {i}", True) for i in range(12)],
    )
    result = pytester.runpytest_subprocess(
        *plugin_args(folder, "--trigger-model=claude-nonexistent-1", "--trigger-concurrency=1")
    )
    result.stdout.fnmatch_lines(["*stopping: 404 not_found_error*claude-nonexistent-1*"])
    assert fake_api.stats["calls"] == 1
    outcomes = result.parseoutcomes()
    assert outcomes.get("errors", outcomes.get("error")) == 1 and "passed" not in outcomes
