"""Small helpers shared by the plugin's tests."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

# Proxy settings a developer's shell may carry; tests clear them (everything is on 127.0.0.1).
PROXY_VARIABLES = (
    *("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"),
    *("http_proxy", "https_proxy", "all_proxy"),
)

# Plugins the inner pytest runs never use. Hypothesis's plugin alone costs more than a second
# of CPU at every start of a pytest process (and at its end: it imports Hypothesis to print its
# statistics); blocked there, the suite runs minutes faster on two cores and an interrupted
# run ends without waiting for it. pytest-randomly shuffles this suite's own order (so no test
# leans on what ran before it); an inner run keeps pytest's order, which its test reads.
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:anyio", "-p", "no:randomly")
# an inner pytest run in a subprocess of its own
PYTEST = (sys.executable, "-m", "pytest", *UNUSED_PLUGINS)


def interruptible() -> None:
    """``preexec_fn`` of a child the test interrupts: Ctrl-C reaches it as at a terminal, also
    when this suite itself runs in the background. A shell starts background jobs with SIGINT
    ignored, an ignored signal stays ignored across exec, and Python then installs no
    handler: the child would never see the test's SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def plugin_args(folder: Path, *more: str) -> list[str]:
    """Arguments of a trigger run on one skill folder without pytest's cache, and without the
    default store unless the test names a store or a cache mode (no runs carried over between
    runs of one test), under the reference rule unless the test names another (see
    :func:`reference_rule`)."""
    return [
        f"--trigger-skill-path={folder}",
        "-p",
        "no:cacheprovider",
        *no_store(more),
        *reference_rule(more),
        *more,
    ]


def reference_rule(args: tuple[str, ...] | list[str]) -> list[str]:
    """``--trigger-confidence off`` unless ``args`` name a rule: the tests written for the
    reference scripts' rule pin its exact runs (two of three settle a clear query); the
    sequential rule, the default, has tests of its own (``test_sequential_items.py``, the
    sampler's and the batch waves')."""
    named = any(
        str(a).startswith(("--trigger-confidence", "--trigger-no-early-stop")) for a in args
    )
    return [] if named else ["--trigger-confidence=off"]


def no_store(args: tuple[str, ...] | list[str]) -> list[str]:
    """``--trigger-cache off`` unless ``args`` already say which store or cache mode to use."""
    named = any(a.startswith(("--trigger-store", "--trigger-cache")) for a in args)
    return [] if named else ["--trigger-cache", "off"]


def make_skill(root: Path, entries: list[tuple[str, bool]]) -> Path:
    """A ``pdf-tools`` skill under ``root/skills`` whose eval set holds ``entries``."""
    folder = root / "skills" / "pdf-tools"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Merge and split PDF documents and pages.\n---\n"
    )
    data = [{"query": q, "should_trigger": s} for q, s in entries]
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))
    return folder
