"""Every command-line option and ini key, declared once.

Each :class:`Option` says its flag, ini key, kind, default, help and check. The pytest layer
builds argparse options and ini keys from this table, :class:`~.settings.Settings` (and the
other settings objects) take their defaults and range checks from it, and the documentation's
options page is rendered from it (:func:`options_markdown`), so the four cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_skilltrigger.model.option_spec import Holder, Option
from pytest_skilltrigger.model.options_outputs import OUTPUT_OPTIONS
from pytest_skilltrigger.model.options_sampling import (
    ACCEPT_ON,
    CACHE_MODES,
    CONTEXTS,
    DEFAULT_CONFIDENCE,
    DEFAULT_MARGIN,
    DEFAULT_MAX_RUNS,
    DEFAULT_MIN_RUNS,
    DEFAULT_THRESHOLD,
    DRAFT_ALSO,
    DRAFT_MISSING,
    GROUP_TITLE,
    LINT_MODES,
    MOST_RUNS,
    SAMPLING_OPTIONS,
)

__all__ = [
    "ACCEPT_ON",
    "CACHE_MODES",
    "CONTEXTS",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_MARGIN",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_MIN_RUNS",
    "DEFAULT_THRESHOLD",
    "DRAFT_ALSO",
    "DRAFT_MISSING",
    "GROUPS",
    "GROUP_TITLE",
    "LINT_MODES",
    "MOST_RUNS",
    "OPTIONS",
]

OPTIONS: tuple[Option, ...] = (*SAMPLING_OPTIONS, *OUTPUT_OPTIONS)

# The groups of ``pytest --help``, in order: a key, a title, and the few options most runs
# need, named first in the group's description.
GROUPS: tuple[tuple[str, str, str], ...] = (
    ("test", "what to test", "most runs need only --trigger-skill-path"),
    ("sample", "how to sample", "most runs set --trigger-model and --trigger-budget-usd"),
    ("context", "the context the model sees", "default: a fresh Claude Code session"),
    ("ci", "outputs and CI", "--trigger-json, --trigger-min-accuracy, --trigger-baseline"),
    ("improve", "drafting and improving", "--trigger-draft, then --trigger-optimize"),
)


def in_group(key: str) -> list[Option]:
    """A group's options, those its description names first (in the order it names them)."""
    lead = next(lead for k, _, lead in GROUPS if k == key)
    members = [opt for opt in OPTIONS if opt.group == key]
    named = [opt.flag for opt in members if opt.flag in lead.replace(",", " ").split()]
    named.sort(key=lead.index)
    return sorted(members, key=lambda opt: named.index(opt.flag) if opt.flag in named else 99)


def group_heading(title: str, lead: str) -> str:
    """A group's heading in ``pytest --help``."""
    return f"{GROUP_TITLE}: {title} ({lead})"


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
    """The options page's sections, one per group of ``pytest --help`` and in its order: a
    table each, every option with its ini key, default and former name stacked in one narrow
    column (each kept on one line), and what it does beside them."""
    parts = []
    for key, title, lead in GROUPS:
        rows = [f"### {title[0].upper()}{title[1:]}", "", f"{lead[0].upper()}{lead[1:]}.", ""]
        rows += ["| option | what it does |", "| --- | --- |"]
        rows += [_markdown_row(opt) for opt in in_group(key)]
        if key == "test":
            rows.append(f"| ini `{SKILL_PATHS_INI}` | {SKILL_PATHS_HELP} |")
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"


def _markdown_row(opt: Option) -> str:
    names = [f"`{opt.flag}`"]
    if opt.ini_key:
        names.append(f"ini `{opt.ini_key}`")
    shown = opt.shown_default()
    if shown:
        names.append(f"default `{shown}`")
    if opt.was:
        names.append(f"was `{opt.was}`")
    choices = " | ".join(opt.choices) + ": " if opt.choices else ""
    help_cell = (choices + opt.help).replace("|", "\\|")
    return f"| {'<br>'.join(names)} | {help_cell} |"
