"""The options of what becomes of the results: the files written, the CI gates, the
baseline, drafting eval sets and improving descriptions. Declared once, here;
:mod:`.options` gathers every option's declaration.
"""

from __future__ import annotations

from pytest_skilltrigger.model.option_spec import (
    Option,
    as_number,
    at_least,
    shard_problem,
    within_unit,
)
from pytest_skilltrigger.model.options_sampling import ACCEPT_ON, LINT_MODES

OUTPUT_OPTIONS: tuple[Option, ...] = (
    # -- outputs --------------------------------------------------------------------------
    Option(
        "--trigger-json",
        "path",
        None,
        "write the results as JSON here",
        holder="outputs",
        field="json_path",
        group="ci",
    ),
    Option(
        "--trigger-report",
        "path",
        None,
        "self-contained HTML report: the items' results and routing tables, or with "
        "--trigger-optimize the improvement rounds",
        holder="outputs",
        field="report_path",
        group="ci",
    ),
    Option(
        "--trigger-results-dir",
        "path",
        None,
        "folder for a time-stamped results folder per run: the results JSON and page (and "
        "with --trigger-optimize each iteration's exchange with the improve model)",
        holder="outputs",
        field="results_dir",
        group="ci",
    ),
    Option(
        "--trigger-pr-comment",
        "path",
        None,
        "write Markdown for a pull request here: the run against --trigger-baseline per "
        "skill, the flipped queries with their paired test, the cost, what was not re-run and "
        "the gate; its first line is the marker a workflow updates one comment by",
        holder="outputs",
        field="pr_comment_path",
        group="ci",
    ),
    Option(
        "--trigger-shard",
        "str",
        None,
        "run part K of N of the trigger and routing items (K/N: the same items on every "
        "machine, parts of even size); its --trigger-json carries the items for "
        "--trigger-merge",
        holder="run",
        ini=False,
        check=shard_problem,
        group="ci",
    ),
    Option(
        "--trigger-merge",
        "str",
        None,
        "merge the --trigger-json files of every shard (a glob) into one run's report, gate, "
        "page and comment, with no call",
        holder="run",
        ini=False,
        group="ci",
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
        group="ci",
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
        group="ci",
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
        group="ci",
    ),
    Option(
        "--trigger-require-backend",
        "bool",
        False,
        "stop the session with an error instead of skipping when no trigger backend is available",
        holder="gates",
        field="require_backend",
        group="ci",
    ),
    Option(
        "--trigger-baseline",
        "path",
        None,
        "an earlier --trigger-json: list what regressed and what improved",
        holder="gates",
        field="baseline_path",
        group="ci",
    ),
    Option(
        "--trigger-fail-on-regression",
        "bool",
        False,
        "fail the session when a skill regressed against the baseline (a paired exact test "
        "on its changed queries, at the confidence)",
        holder="gates",
        field="fail_on_regression",
        group="ci",
    ),
    # -- drafting and improving -----------------------------------------------------------
    Option(
        "--trigger-draft",
        "optional",
        None,
        "draft a first trigger eval set with the improve model for each skill that has none, "
        "write it to evals/trigger-eval.json and run it; =also: draft more entries into "
        "evals/trigger-eval.drafted.json for skills that have one",
        holder="run",
        was="--draft-eval-set",
        group="improve",
    ),
    Option(
        "--trigger-export-plugin-eval",
        "path",
        None,
        "write the selected skills' trigger eval sets as `claude plugin eval` cases "
        "(case.yaml) into this folder, then exit without a call",
        holder="run",
        ini=False,
        was="--export-plugin-eval",
        group="ci",
    ),
    Option(
        "--trigger-harvest",
        "path",
        None,
        "read your own Claude Code sessions of this project (~/.claude/projects) and write "
        "the selected skills' observed triggers, likely misses and likely false alarms to "
        "this file as eval entries, then exit without a call; nothing leaves the machine",
        holder="run",
        ini=False,
        group="improve",
    ),
    Option(
        "--trigger-harvest-scope",
        "choice",
        "project",
        "with --trigger-harvest: the sessions of this project (and its subfolders), or all "
        "of your projects' sessions",
        holder="run",
        choices=("project", "all"),
        group="improve",
    ),
    Option(
        "--trigger-harvest-merge",
        "bool",
        False,
        "with --trigger-harvest: also add the harvested entries to each skill's own eval set "
        "(only those it does not hold; never twice)",
        holder="run",
        ini=False,
        group="improve",
    ),
    Option(
        "--trigger-optimize",
        "bool",
        False,
        "after the tests, run improvement rounds and rewrite SKILL.md with the best description",
        holder="run",
        was="--optimize-description",
        group="improve",
    ),
    Option(
        "--trigger-holdout",
        "float",
        0.4,
        "share of the eval set held out as test",
        holder="optimizer",
        field="holdout",
        check=lambda v: None if 0.0 <= as_number(v) < 1.0 else "must be within 0..1 (below 1)",
        was="--holdout",
        group="improve",
    ),
    Option(
        "--trigger-accept-on",
        "choice",
        "all",
        "the queries of the fresh race that decides whether SKILL.md is written: every query "
        "(the held-out ones must not lose), or the held-out ones alone (the reference's rule)",
        holder="optimizer",
        field="accept_on",
        choices=ACCEPT_ON,
        was="--accept-on",
        group="improve",
    ),
    Option(
        "--trigger-max-iterations",
        "int",
        5,
        "improvement iterations",
        holder="optimizer",
        field="max_iterations",
        check=at_least(1),
        was="--max-iterations",
        group="improve",
    ),
    Option(
        "--trigger-improve-model",
        "str",
        None,
        "model that proposes descriptions and drafts eval sets",
        default_text="the trigger model",
        holder="optimizer",
        field="improve_model",
        was="--improve-model",
        group="improve",
    ),
    Option(
        "--trigger-split-seed",
        "int",
        42,
        "seed of the train/test split",
        holder="optimizer",
        field="seed",
        was="--split-seed",
        group="improve",
    ),
    Option(
        "--trigger-candidates",
        "int",
        3,
        "different descriptions proposed each round, screened on train so that only the "
        "round's best races the best so far",
        holder="optimizer",
        field="candidates_per_round",
        check=at_least(1),
        was="--candidates-per-round",
        group="improve",
    ),
    Option(
        "--trigger-race-runs",
        "int",
        60,
        "the most runs a race between two descriptions may add where they differ or are "
        "unsettled, before it is called undecided",
        holder="optimizer",
        field="race_runs",
        check=at_least(0),
        was="--race-runs",
        group="improve",
    ),
)
