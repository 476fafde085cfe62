"""The table of our command-line options and ini keys: pure data, read by ``options``.

Kept apart from the readers so that the table (long, mostly help text) and the code that
turns it into settings each stay short; tests read it to check every option is documented.
"""

from __future__ import annotations

from typing import Any

# (option, ini key or None, type, default, help)
OPTIONS: list[tuple[str, str | None, str, Any, str]] = [
    (
        "--skill-path",
        None,
        "append",
        None,
        "a skill folder (holding SKILL.md) or a folder of skill folders; repeatable",
    ),
    ("--eval-set", None, "path", None, "the eval set file (default: found in the skill folder)"),
    (
        "--skill-description",
        None,
        "str",
        None,
        "test this description instead of the one in SKILL.md",
    ),
    (
        "--runs-per-query",
        "runs_per_query",
        "int",
        3,
        "the fewest runs of a query (with --trigger-confidence off: the runs) (default 3)",
    ),
    (
        "--max-runs-per-query",
        "max_runs_per_query",
        "int",
        15,
        "the most runs of a query before it is called borderline (default 15)",
    ),
    (
        "--trigger-confidence",
        "trigger_confidence",
        "str",
        "0.95",
        "sample each query until its verdict is settled at this confidence (a sequential test); "
        "off: the reference rule, --runs-per-query runs against the threshold (default 0.95)",
    ),
    (
        "--trigger-margin",
        "trigger_margin",
        "float",
        0.15,
        "how near the threshold a true rate may be and still be settled (the sequential "
        "test's indifference zone: threshold ± margin) (default 0.15)",
    ),
    (
        "--trigger-threshold",
        "trigger_threshold",
        "float",
        0.5,
        "trigger rate that counts as triggered (default 0.5)",
    ),
    (
        "--trigger-timeout",
        "trigger_timeout",
        "float",
        30.0,
        "seconds a run may take, retries included (a CLI process for claude-code) (default 30)",
    ),
    (
        "--trigger-backend",
        "trigger_backend",
        "choice",
        "auto",
        "auto | anthropic | claude-code (default auto)",
    ),
    (
        "--trigger-model",
        "trigger_model",
        "str",
        None,
        "model id, or several comma-separated for a model matrix: every entry is one item per "
        "model (default: $SKILLTRIGGER_MODEL, else claude-opus-5-5 for the API)",
    ),
    (
        "--trigger-models",
        "trigger_models",
        "str",
        None,
        "the model matrix as an ini key or option: models separated by commas or spaces",
    ),
    (
        "--trigger-concurrency",
        "trigger_concurrency",
        "int",
        None,
        "runs in flight at once for the whole session, split across xdist workers (default 10 "
        "for the API, CPU count for claude-code)",
    ),
    ("--trigger-json", "trigger_json", "path", None, "write the results as JSON here"),
    (
        "--no-early-stop",
        "no_early_stop",
        "bool",
        False,
        "the reference rule without early stopping: every one of --runs-per-query runs "
        "(implies --trigger-confidence off)",
    ),
    (
        "--trigger-cache",
        "trigger_cache",
        "choice",
        "use",
        "use | refresh | off: reuse stored runs, only store new ones, or neither",
    ),
    (
        "--trigger-store",
        "trigger_store",
        "path",
        None,
        "SQLite result store (default: ~/.cache/pytest-skilltrigger/results.sqlite)",
    ),
    (
        "--trigger-budget-usd",
        "trigger_budget_usd",
        "float",
        None,
        "never send a call whose estimated cost would take the session past this",
    ),
    (
        "--trigger-prices",
        "trigger_prices",
        "path",
        None,
        "JSON file of model prices per million tokens, overriding the built-in table",
    ),
    (
        "--trigger-batch",
        "trigger_batch",
        "bool",
        False,
        "run the items' queries as Message Batches (API backend): half the price, results in "
        "minutes to hours; for nightly and large runs",
    ),
    (
        "--trigger-batch-timeout",
        "trigger_batch_timeout",
        "float",
        4 * 3600.0,
        "one deadline for all of the session's batches, in seconds from its first batch "
        "(the improvement rounds included): runs not back by then are errors (default 14400)",
    ),
    (
        "--trigger-batch-poll",
        "trigger_batch_poll",
        "float",
        5.0,
        "seconds before the first poll of a batch; the pause doubles up to 60 (default 5)",
    ),
    ("--claude-bin", "claude_bin", "path", None, "the claude CLI binary (default: claude on PATH)"),
    (
        "--trigger-context",
        "trigger_context",
        "choice",
        "auto",
        "auto | claude-code | builtin: what API runs send: the request the installed claude CLI "
        "sends (captured), or our builtin approximation; auto captures when claude is found",
    ),
    (
        "--optimize-description",
        "optimize_description",
        "bool",
        False,
        "after the tests, run improvement rounds and rewrite SKILL.md with the best description",
    ),
    ("--holdout", "holdout", "float", 0.4, "share of the eval set held out as test (default 0.4)"),
    (
        "--accept-on",
        "accept_on",
        "str",
        "all",
        "the queries of the fresh race that decides whether SKILL.md is written: all (every "
        "query; the held-out ones must not lose) or test (the held-out ones alone, the "
        "reference's rule) (default all)",
    ),
    ("--max-iterations", "max_iterations", "int", 5, "improvement iterations (default 5)"),
    (
        "--improve-model",
        "improve_model",
        "str",
        None,
        "model that proposes descriptions (default: the trigger model)",
    ),
    ("--split-seed", "split_seed", "int", 42, "seed of the train/test split (default 42)"),
    (
        "--candidates-per-round",
        "candidates_per_round",
        "int",
        3,
        "different descriptions proposed each round, screened on train so that only the "
        "round's best races the best so far (default 3)",
    ),
    (
        "--race-runs",
        "race_runs",
        "int",
        60,
        "the most runs a race between two descriptions may add where they differ or are "
        "unsettled, before it is called undecided (default 60)",
    ),
    (
        "--trigger-report",
        "trigger_report",
        "path",
        None,
        "self-contained HTML report: the items' results and routing tables, or with "
        "--optimize-description the improvement rounds",
    ),
    (
        "--trigger-results-dir",
        "trigger_results_dir",
        "path",
        None,
        "folder for a time-stamped results folder per run: the results JSON and page (and with "
        "--optimize-description each iteration's exchange with the improve model)",
    ),
    (
        "--trigger-min-accuracy",
        "trigger_min_accuracy",
        "float",
        None,
        "gate per skill: share of queries that must pass; single misses become xfail",
    ),
    (
        "--trigger-min-routing-accuracy",
        "trigger_min_routing_accuracy",
        "float",
        None,
        "gate per folder of skills: share of routing items and should-trigger queries that must "
        "pass; single misses become xfail",
    ),
    (
        "--trigger-require-backend",
        "trigger_require_backend",
        "bool",
        False,
        "error instead of skipping when no trigger backend is available",
    ),
    (
        "--trigger-extra-skills",
        "trigger_extra_skills",
        "paths",
        None,
        "a folder of skills (your ~/.claude/skills, a team's plugin) listed beside the tested ones "
        "where Claude Code lists them (installed skills before the project's), never tested; "
        "repeatable",
    ),
    (
        "--draft-eval-set",
        "draft_eval_set",
        "optional",
        None,
        "draft a first trigger eval set with the improve model for each skill that has none, "
        "write it to evals/trigger-eval.json and run it; =also: draft more entries into "
        "evals/trigger-eval.drafted.json for skills that have one",
    ),
    (
        "--trigger-baseline",
        "trigger_baseline",
        "path",
        None,
        "an earlier --trigger-json: list what regressed and what improved",
    ),
    (
        "--trigger-fail-on-regression",
        "trigger_fail_on_regression",
        "bool",
        False,
        "fail the session when a skill regressed against the baseline (a paired exact test on "
        "its changed queries, at the confidence)",
    ),
]
