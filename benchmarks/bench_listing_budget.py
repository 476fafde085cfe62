"""The listing budget of each model, measured on the installed Claude Code CLI.

Why: the budget table in the README and ``model/listing_budget.py`` says when Claude Code
lists a skill by its name alone; this prints the figures it was built from. For each model,
project skills of known lengths are written into a fresh workspace, the CLI is run once per
probe against the project's own request recorder (``backends.capture.record_cli_request``:
loopback only, no API), and the listing it sent is read. A bisection on the listing's size
finds the largest listing that keeps every text: the budget, as the CLI counts it. Then it
checks the rule against the CLI on the edges the tests pin (ten ~300-character skills on a
200k-token model: which are bare).

    .venv/bin/python benchmarks/bench_listing_budget.py [--models m1 m2 ...] [--quick]
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from _common import bench_parser  # noqa: E402

CLI = ROOT / ".tools" / "claude-code" / "node_modules" / ".bin" / "claude"
MODELS = (
    "claude-haiku-4-5",
    "claude-sonnet-4-6",
    "claude-opus-4-5",
    "claude-opus-4-6",
    "claude-opus-4-7",
    "claude-opus-4-8",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
    "claude-sonnet-4-6[1m]",
    "a-model-the-cli-does-not-know",
)
LINE = re.compile(r"^- ([\w.:-]+)(: .*)?$")


def text_of(length: int) -> str:
    return ("Use it for widgets " * 200)[: length - 1] + "."


def listing(model: str, sizes: list[int]) -> tuple[int, list[str]]:
    """The skills part of the listing the CLI sends for project skills of these sizes: its
    length and the names shown bare."""
    from pytest_skilltrigger.backends.capture import record_cli_request
    from pytest_skilltrigger.backends.claude_code.process import CliCall

    with tempfile.TemporaryDirectory() as tmp:
        project, config = Path(tmp, "project"), Path(tmp, "config")
        for i, size in enumerate(sizes):
            folder = project / ".claude" / "skills" / f"skill-{i:03d}"
            folder.mkdir(parents=True)
            (folder / "SKILL.md").write_text(
                f"---\nname: skill-{i:03d}\ndescription: {json.dumps(text_of(size))}\n---\n"
            )
        config.mkdir()
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(Path(tmp, "home")),
            "CLAUDE_CONFIG_DIR": str(config),
            "ANTHROPIC_API_KEY": "sk-bench",
            "ANTHROPIC_MODEL": model,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        command = [str(CLI), "-p", "--output-format", "json", "--max-turns", "1"]
        captured = record_cli_request(CliCall(command, project, env, 120), "", str(project))
    texts = [
        b.get("text", "")
        for m in captured.body["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
    ]
    block = next(t for t in texts if "- skill-000" in t)
    part = block[block.index("- skill-000") :]
    part = re.split(r"\n\s*\n|\n</system-reminder>", part)[0]
    bare = [m.group(1) for m in map(LINE.match, part.split("\n")) if m and not m.group(2)]
    return len(part), bare


def budget(model: str) -> int:
    """The largest listing (its skills part, in Python's characters) the CLI sent with no
    bare name, bisecting on the project skills' total length."""

    def probe(total: int) -> tuple[int, bool]:
        sizes, left = [], total - 6225  # the listing of one 1-character skill
        while left > 0:
            sizes.append(min(1500, left))
            left -= sizes[-1] + 14
        size, bare = listing(model, [max(s, 1) for s in sizes] or [1])
        return size, not bare

    low, high, kept = 6300, 60_000, 0
    while high - low > 1:
        middle = (low + high) // 2
        size, whole = probe(middle)
        if whole:
            low, kept = middle, max(kept, size)
        else:
            high = middle
    return kept


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=None)
    args = parser.parse_args()
    if not CLI.exists():
        print(f"no pinned CLI at {CLI}: run .ci/install_claude_code.sh")
        return 0
    import subprocess

    from pytest_skilltrigger.model.context import ListedSkill, TriggerContext
    from pytest_skilltrigger.model.listing_budget import fit_of, listing_budget

    version = subprocess.run([str(CLI), "--version"], capture_output=True, text=True).stdout
    print(f"Claude Code CLI {version.strip()}")
    models = args.models or (MODELS[:2] if args.quick else MODELS)
    print("model | listing kept whole up to (measured) | our rule's budget")
    for model in models:
        print(f"{model} | {budget(model):,} | {listing_budget(model, {}):,}", flush=True)
    # the rule against the CLI on ten ~300-character skills, as the tests pin it
    for model in (models[0],):
        _size, bare = listing(model, [300] * 10)
        skills = [ListedSkill(f"skill-{i:03d}", text_of(300)) for i in range(10)]
        context = TriggerContext(skills[0].name, skills[0].description, tuple(skills[1:]))
        ours = sorted(n for n in fit_of(context, model, {}).bare if n.startswith("skill-"))
        print(
            f"ten skills of 300 characters on {model}: the CLI lists {len(bare)} bare "
            f"({', '.join(bare)}); the rule says {', '.join(ours) or 'none'}"
        )
    for model, sizes in (
        ("claude-haiku-4-5", [882, 882]),
        ("claude-haiku-4-5", [883, 882]),
        ("claude-opus-5-5", [382] * 60),
        ("claude-opus-5-5", [780] * 30),
    ):
        size, bare = listing(model, sizes)
        print(
            f"{len(sizes)} skills of {sizes[0]} characters on {model}: listing {size:,} "
            f"characters, bare: {', '.join(bare) or 'none'}"
        )
    size, _ = listing("claude-haiku-4-5", [1])
    print(f"the built-in skills' lines with one 1-character project skill: {size:,} characters")
    print(
        "(the measured figure is in Python's characters: the CLI counts two fewer in its "
        "own built-in lines, so 8,002 measured is its 8,000)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
