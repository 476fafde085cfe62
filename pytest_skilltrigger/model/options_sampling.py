"""The options of what is tested and how it is sampled: the paths, the verdict rule, the
model and backend, the store and the budget, the session the query is asked in. Declared
once, here; :mod:`.options` gathers every option's declaration.
"""

from __future__ import annotations

from pytest_skilltrigger.model.option_spec import (
    PERMISSION_MODES,
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
# what a run is judged on (see model.turn and docs/explanation/verdicts.md): the rules, the
# default, and the most read-only calls a run goes through in ``turn``
WITHIN = ("first-call", "turn")
DEFAULT_WITHIN = "turn"
DEFAULT_BOUND = 4

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


SAMPLING_OPTIONS: tuple[Option, ...] = (
    # -- what to test ---------------------------------------------------------------------
    Option(
        "--trigger-skill-path",
        "append",
        None,
        "a skill folder (holding SKILL.md), a folder of skill folders, or a Claude Code "
        "plugin; repeatable",
        holder="run",
        ini=False,
        was="--skill-path",
        group="test",
    ),
    Option(
        "--trigger-eval-set",
        "path",
        None,
        "the eval set file",
        holder="run",
        default_text="found in the skill folder",
        ini=False,
        was="--eval-set",
        group="test",
    ),
    Option(
        "--trigger-description",
        "str",
        None,
        "test this description instead of the one in SKILL.md",
        holder="run",
        ini=False,
        was="--skill-description",
        group="test",
    ),
    Option(
        "--trigger-changed-since",
        "str",
        None,
        "run only the skills whose SKILL.md or eval set differ from this git revision (from "
        "where the branch left it), and the skills competing with them in the baseline; the "
        "others are deselected and reported as not re-run",
        holder="run",
        ini=False,
        group="test",
    ),
    # -- the verdict rule -----------------------------------------------------------------
    Option(
        "--trigger-runs",
        "int",
        DEFAULT_MIN_RUNS,
        "the fewest runs of a query (with --trigger-confidence off: the runs)",
        field="min_runs",
        check=at_least(1),
        was="--runs-per-query",
    ),
    Option(
        "--trigger-max-runs",
        "int",
        DEFAULT_MAX_RUNS,
        "the most runs of a query before it is called borderline",
        field="max_runs",
        check=lambda v: None if as_number(v) <= MOST_RUNS else f"must be at most {MOST_RUNS}",
        was="--max-runs-per-query",
    ),
    Option(
        "--trigger-confidence",
        "str",
        DEFAULT_CONFIDENCE,
        "sample each query until its verdict is settled at this confidence (a sequential "
        "test); off: the reference rule, --trigger-runs runs against the threshold",
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
        "--trigger-no-early-stop",
        "bool",
        False,
        "the reference rule without early stopping: every one of --trigger-runs runs "
        "(implies --trigger-confidence off)",
        field="no_early_stop",
        was="--no-early-stop",
    ),
    Option(
        "--trigger-within",
        "choice",
        DEFAULT_WITHIN,
        "what a run is judged on: first-call, the model's first tool call (a Read first is "
        "the choice, the reference scripts' rule); turn, the first call after any read-only "
        "looking around (reading, listing, searching the project's files), as a user sees it "
        "and claude plugin eval's tool_used grader reads it",
        field="within",
        choices=WITHIN,
        group="test",
    ),
    Option(
        "--trigger-within-bound",
        "int",
        DEFAULT_BOUND,
        "with --trigger-within=turn, the most rounds of read-only calls a run goes through (a "
        "request each, its calls answered together); a run still looking around then is its "
        "own outcome, reported",
        field="within_bound",
        check=at_least(1),
        group="test",
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
        was="--trigger-models",
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
        group="context",
    ),
    Option(
        "--trigger-claude-bin",
        "path",
        None,
        "the claude CLI binary",
        default_text="claude on PATH",
        field="claude_bin",
        was="--claude-bin",
    ),
    Option(
        "--trigger-extra-skills",
        "paths",
        None,
        "a folder of skills (your ~/.claude/skills, a team's plugin) listed beside the "
        "tested ones where Claude Code lists them, never tested; repeatable",
        holder="run",
        group="context",
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
        "several sizes comma-separated, each its own items ([crowd40] in the id); installed: "
        "ask every query in your own Claude Code install (your skills, commands and enabled "
        "plugins, with your usage, read from your home folder)",
        field="crowd",
        check=crowd_problem,
        default_text="no crowd",
        group="context",
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
        group="context",
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
        group="context",
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
        group="context",
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
        group="context",
    ),
)
