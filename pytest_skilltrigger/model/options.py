"""Every command-line option and ini key, declared once.

Each :class:`Option` says its flag, ini key, kind, default, help and check. The pytest layer
builds argparse options and ini keys from this table, :class:`~.settings.Settings` (and the
other settings objects) take their defaults and range checks from it, and the documentation's
options page is rendered from it (:func:`options_markdown`), so the four cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_skilltrigger.model.option_spec import (
    PERMISSION_MODES,
    Holder,
    Option,
    as_number,
    at_least,
    backend_name,
    crowd_problem,
    mode_problem,
    not_negative,
    positive,
    rate_limit_problem,
    within_unit,
)

GROUP_TITLE = "skill trigger tests"

# which context API runs send: the installed CLI's captured request, our builtin one, or the
# captured one when a claude binary is found
CONTEXTS = ("auto", "claude-code", "builtin")
# use: reuse stored runs and store new ones; refresh: only store; off: neither
CACHE_MODES = ("use", "refresh", "off")
ACCEPT_ON = ("all", "test")  # what the fresh acceptance race runs on
LINT_MODES = ("warn", "error", "off")  # what the eval sets' lint findings are
DRAFT_MISSING, DRAFT_ALSO = "missing", "also"

DEFAULT_MIN_RUNS = 3
DEFAULT_MAX_RUNS = 15
DEFAULT_THRESHOLD = 0.5
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MARGIN = 0.15
# the sequential test's bounds are calibrated exactly at every look, which takes about a
# second past this many runs
MOST_RUNS = 100


OPTIONS: tuple[Option, ...] = (
    # -- what to test ---------------------------------------------------------------------
    Option(
        "--skill-path",
        "append",
        None,
        "a skill folder (holding SKILL.md), a folder of skill folders, or a Claude Code "
        "plugin; repeatable",
        holder="run",
        ini=False,
    ),
    Option(
        "--eval-set",
        "path",
        None,
        "the eval set file",
        holder="run",
        default_text="found in the skill folder",
        ini=False,
    ),
    Option(
        "--skill-description",
        "str",
        None,
        "test this description instead of the one in SKILL.md",
        holder="run",
        ini=False,
    ),
    # -- the verdict rule -----------------------------------------------------------------
    Option(
        "--runs-per-query",
        "int",
        DEFAULT_MIN_RUNS,
        "the fewest runs of a query (with --trigger-confidence off: the runs)",
        field="min_runs",
        check=at_least(1),
    ),
    Option(
        "--max-runs-per-query",
        "int",
        DEFAULT_MAX_RUNS,
        "the most runs of a query before it is called borderline",
        field="max_runs",
        check=lambda v: None if as_number(v) <= MOST_RUNS else f"must be at most {MOST_RUNS}",
    ),
    Option(
        "--trigger-confidence",
        "str",
        DEFAULT_CONFIDENCE,
        "sample each query until its verdict is settled at this confidence (a sequential "
        "test); off: the reference rule, --runs-per-query runs against the threshold",
        field="confidence",
        check=lambda v: (
            None if 0.5 < as_number(v) < 1.0 else "must be above 0.5 and below 1 (or off)"
        ),
    ),
    Option(
        "--trigger-margin",
        "float",
        DEFAULT_MARGIN,
        "how near the threshold a true rate may be and still be settled (the sequential "
        "test's indifference zone: threshold ± margin)",
        field="margin",
        check=lambda v: None if 0.0 < as_number(v) < 0.5 else "must be above 0 and below 0.5",
    ),
    Option(
        "--trigger-threshold",
        "float",
        DEFAULT_THRESHOLD,
        "trigger rate that counts as triggered",
        field="threshold",
        check=within_unit,
    ),
    Option(
        "--no-early-stop",
        "bool",
        False,
        "the reference rule without early stopping: every one of --runs-per-query runs "
        "(implies --trigger-confidence off)",
        field="no_early_stop",
    ),
    # -- how runs are made ----------------------------------------------------------------
    Option(
        "--trigger-timeout",
        "float",
        30.0,
        "seconds a run may take, retries included (a CLI process for claude-code)",
        field="timeout",
        check=positive,
    ),
    Option(
        "--trigger-backend",
        "str",
        "auto",
        "anthropic (the Messages API), claude-code (the Claude Code CLI), auto (the API when "
        "credentials are set), or a backend a plugin or conftest adds through the "
        "pytest_skilltrigger_make_backend hook",
        field="backend",
        check=backend_name,
    ),
    Option(
        "--trigger-model",
        "str",
        None,
        "model id, or several comma-separated for a model matrix: every entry is one item per "
        "model",
        default_text="$SKILLTRIGGER_MODEL, else claude-opus-5-5 for the API",
    ),
    Option(
        "--trigger-models",
        "str",
        None,
        "the model matrix as an ini key or option: models separated by commas or spaces",
    ),
    Option(
        "--trigger-concurrency",
        "int",
        None,
        "runs in flight at once for the whole session, split across xdist workers",
        default_text=(
            "10 for the API; for claude-code the CPU count, growing while the CPU has room "
            "up to a cap, within what memory holds (the header says both)"
        ),
        field="concurrency",
        check=at_least(1),
    ),
    Option(
        "--trigger-rate-limit",
        "str",
        None,
        "keep to these limits a minute (requests, input tokens, output tokens) before the "
        "first response states them, and below what it states: RPM[,ITPM[,OTPM]]; off: no "
        "pacing",
        field="rate_limit",
        check=rate_limit_problem,
        default_text="what the responses' rate-limit headers state",
    ),
    Option(
        "--trigger-context",
        "choice",
        "auto",
        "what API runs send: the request the installed claude CLI sends (captured), or our "
        "builtin approximation; auto captures when claude is found",
        field="trigger_context",
        choices=CONTEXTS,
    ),
    Option(
        "--claude-bin",
        "path",
        None,
        "the claude CLI binary",
        default_text="claude on PATH",
        field="claude_bin",
    ),
    Option(
        "--trigger-extra-skills",
        "paths",
        None,
        "a folder of skills (your ~/.claude/skills, a team's plugin) listed beside the "
        "tested ones where Claude Code lists them, never tested; repeatable",
        holder="run",
    ),
    # -- the store and the cost ------------------------------------------------------------
    Option(
        "--trigger-cache",
        "choice",
        "use",
        "reuse stored runs, only store new ones, or neither",
        field="cache_mode",
        choices=CACHE_MODES,
    ),
    Option(
        "--trigger-store",
        "path",
        None,
        "SQLite result store",
        field="store_path",
        default_text="~/.cache/pytest-skilltrigger/results.sqlite",
    ),
    Option(
        "--trigger-budget-usd",
        "float",
        None,
        "never send a call whose estimated cost would take the session past this",
        field="budget_usd",
        check=not_negative,
    ),
    Option(
        "--trigger-prices",
        "path",
        None,
        "JSON file of model prices per million tokens, overriding the built-in table",
        field="prices_path",
    ),
    Option(
        "--trigger-batch",
        "bool",
        False,
        "run the items' queries as Message Batches (API backend): half the price, results "
        "in minutes to hours; for nightly and large runs",
        field="batch",
    ),
    Option(
        "--trigger-batch-timeout",
        "float",
        4 * 3600.0,
        "one deadline for all of the session's batches, in seconds from its first batch "
        "(the improvement rounds included): runs not back by then are errors",
        field="batch_timeout",
        check=positive,
    ),
    Option(
        "--trigger-batch-poll",
        "float",
        5.0,
        "seconds before the first poll of a batch; the pause doubles up to 60",
        field="batch_poll",
        check=positive,
    ),
    Option(
        "--trigger-controls",
        "choice",
        None,
        "before the first item of each model, check that the session can see a trigger: a "
        "positive and a negative control against a control skill, stopping the session "
        "before the items' spend when either fails; off skips them",
        field="controls",
        choices=("on", "off"),
        default_text="on ($SKILLTRIGGER_CONTROLS=off turns them off where the option is not given)",
    ),
    # -- the session the query is asked in ------------------------------------------------------
    Option(
        "--trigger-crowd",
        "str",
        None,
        "also ask every query with the skill among N other installed skills (the user's own "
        "from --trigger-extra-skills first, then the nearest of the plugin's rival catalog); "
        "several sizes comma-separated, each its own items ([crowd40] in the id)",
        field="crowd",
        check=crowd_problem,
        default_text="no crowd",
    ),
    Option(
        "--trigger-crowd-usage",
        "float",
        0.0,
        "how much the skill under test has been used (the CLI's usage score: uses, decayed by "
        "the weeks since the last); past the listing budget the most used skills keep their "
        "text, and a new skill has none",
        field="crowd_usage",
        check=at_least(0),
    ),
    Option(
        "--trigger-setup",
        "choice",
        None,
        "project: run every query under the project's own setup (its CLAUDE.md, its "
        ".claude/settings.json hooks and permission mode, its .mcp.json servers, from "
        "rootdir); the claude-code backend runs them in its isolated workspace",
        field="setup",
        choices=("none", "project"),
        default_text="none: a clean workspace",
    ),
    Option(
        "--trigger-permission-mode",
        "str",
        None,
        "the permission mode the session runs in, as Claude Code's --permission-mode: "
        f"{', '.join(PERMISSION_MODES)}; several comma-separated, as default,plan, ask every "
        "query in each, the modes after the first as items of their own ([plan] in the id)",
        field="permission_mode",
        check=mode_problem,
        default_text="the CLI's default",
    ),
    Option(
        "--trigger-cwd",
        "str",
        None,
        "a subfolder of the project: its skills (<folder>/.claude/skills) are tested in a "
        "session started there, listed at the start before the root's, instead of after "
        "the model reads a file there",
        field="cwd",
        default_text="the project root",
    ),
    # -- outputs --------------------------------------------------------------------------
    Option(
        "--trigger-json",
        "path",
        None,
        "write the results as JSON here",
        holder="outputs",
        field="json_path",
    ),
    Option(
        "--trigger-report",
        "path",
        None,
        "self-contained HTML report: the items' results and routing tables, or with "
        "--optimize-description the improvement rounds",
        holder="outputs",
        field="report_path",
    ),
    Option(
        "--trigger-results-dir",
        "path",
        None,
        "folder for a time-stamped results folder per run: the results JSON and page (and "
        "with --optimize-description each iteration's exchange with the improve model)",
        holder="outputs",
        field="results_dir",
    ),
    # -- CI gates -------------------------------------------------------------------------
    Option(
        "--trigger-min-accuracy",
        "float",
        None,
        "gate per skill: share of queries that must pass; single misses become xfail",
        holder="gates",
        field="min_accuracy",
        check=within_unit,
    ),
    Option(
        "--trigger-min-routing-accuracy",
        "float",
        None,
        "gate per folder of skills: share of routing items and should-trigger queries that "
        "must pass; single misses become xfail",
        holder="gates",
        field="min_routing_accuracy",
        check=within_unit,
    ),
    Option(
        "--trigger-lint",
        "choice",
        "warn",
        "check the eval sets at collection, with no call (a query naming the skill, near "
        "duplicates, a query on both sides, slash commands, a one-sided set, ...): warn, "
        "error (for CI: the session stops before any call) or off",
        holder="gates",
        field="lint",
        choices=LINT_MODES,
    ),
    Option(
        "--trigger-require-backend",
        "bool",
        False,
        "stop the session with an error instead of skipping when no trigger backend is available",
        holder="gates",
        field="require_backend",
    ),
    Option(
        "--trigger-baseline",
        "path",
        None,
        "an earlier --trigger-json: list what regressed and what improved",
        holder="gates",
        field="baseline_path",
    ),
    Option(
        "--trigger-fail-on-regression",
        "bool",
        False,
        "fail the session when a skill regressed against the baseline (a paired exact test "
        "on its changed queries, at the confidence)",
        holder="gates",
        field="fail_on_regression",
    ),
    # -- drafting and improving -----------------------------------------------------------
    Option(
        "--draft-eval-set",
        "optional",
        None,
        "draft a first trigger eval set with the improve model for each skill that has none, "
        "write it to evals/trigger-eval.json and run it; =also: draft more entries into "
        "evals/trigger-eval.drafted.json for skills that have one",
        holder="run",
    ),
    Option(
        "--export-plugin-eval",
        "path",
        None,
        "write the selected skills' trigger eval sets as `claude plugin eval` cases "
        "(case.yaml) into this folder, then exit without a call",
        holder="run",
        ini=False,
    ),
    Option(
        "--optimize-description",
        "bool",
        False,
        "after the tests, run improvement rounds and rewrite SKILL.md with the best description",
        holder="run",
    ),
    Option(
        "--holdout",
        "float",
        0.4,
        "share of the eval set held out as test",
        holder="optimizer",
        field="holdout",
        check=lambda v: None if 0.0 <= as_number(v) < 1.0 else "must be within 0..1 (below 1)",
    ),
    Option(
        "--accept-on",
        "choice",
        "all",
        "the queries of the fresh race that decides whether SKILL.md is written: every query "
        "(the held-out ones must not lose), or the held-out ones alone (the reference's rule)",
        holder="optimizer",
        field="accept_on",
        choices=ACCEPT_ON,
    ),
    Option(
        "--max-iterations",
        "int",
        5,
        "improvement iterations",
        holder="optimizer",
        field="max_iterations",
        check=at_least(1),
    ),
    Option(
        "--improve-model",
        "str",
        None,
        "model that proposes descriptions and drafts eval sets",
        default_text="the trigger model",
        holder="optimizer",
        field="improve_model",
    ),
    Option(
        "--split-seed",
        "int",
        42,
        "seed of the train/test split",
        holder="optimizer",
        field="seed",
    ),
    Option(
        "--candidates-per-round",
        "int",
        3,
        "different descriptions proposed each round, screened on train so that only the "
        "round's best races the best so far",
        holder="optimizer",
        field="candidates_per_round",
        check=at_least(1),
    ),
    Option(
        "--race-runs",
        "int",
        60,
        "the most runs a race between two descriptions may add where they differ or are "
        "unsettled, before it is called undecided",
        holder="optimizer",
        field="race_runs",
        check=at_least(0),
    ),
)

#: the ini key without a flag: skill folders collected with the normal test run
SKILL_PATHS_INI = "skill_paths"
SKILL_PATHS_HELP = "skill folders (or plugins) collected with the normal test run"

BY_FLAG: dict[str, Option] = {option.flag: option for option in OPTIONS}


def option(flag: str) -> Option:
    """The declaration of ``flag``."""
    return BY_FLAG[flag]


def of_holder(holder: Holder) -> Iterator[Option]:
    """The options that fill one settings object, with a field each."""
    return (o for o in OPTIONS if o.holder == holder and o.field is not None)


def default(flag: str) -> object:
    """The declared default of ``flag``."""
    return BY_FLAG[flag].default


def options_markdown() -> str:
    """The options page's table: every option with its ini key and default stacked in one
    narrow column (each kept on one line), and what it does beside them."""
    rows = ["| option | what it does |", "| --- | --- |"]
    for opt in OPTIONS:
        names = [f"`{opt.flag}`"]
        if opt.ini_key:
            names.append(f"ini `{opt.ini_key}`")
        shown = opt.shown_default()
        if shown:
            names.append(f"default `{shown}`")
        choices = " | ".join(opt.choices) + ": " if opt.choices else ""
        help_cell = (choices + opt.help).replace("|", "\\|")
        rows.append(f"| {'<br>'.join(names)} | {help_cell} |")
    rows.append(f"| ini `{SKILL_PATHS_INI}` | {SKILL_PATHS_HELP} |")
    return "\n".join(rows) + "\n"
