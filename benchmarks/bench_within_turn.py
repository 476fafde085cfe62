"""``--trigger-within=turn`` against ``first-call``: how often the two rules disagree, which
agrees with what a user sees, and what looking around costs.

A small project holds four skills and the files their queries name (two PDFs, a CSV export,
meeting notes, a SQL file). The eval set: 24 queries, 16 of them naming a file. The stand-in is
the graded model (``tests/graded_model.py``: trigger rates spread over 0..1, known exactly, a
fresh draw per request) with ``looks_first``: on a query that names a file, the model reads it
first with that chance, then decides on the query as it would have at once. A user sees the
skill load whenever it is loaded within the turn, so the truth for each query is its rate
``p`` against the threshold (0.5); ``first-call`` sees only the runs that did not read first.

For each chance of reading first and each seed, both rules run the same eval set (sequential
rule, default confidence, no store): verdicts that differ between the rules, verdicts that
disagree with the truth (each share with its 95% interval), the verdicts one rule gets wrong
where the other is right with the exact one-sided sign test on those pairs, calls the server
saw, cost (the JSON's) and wall time.

    .venv/bin/python benchmarks/bench_within_turn.py [--quick]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, bench_parser, fake_api, run_pytest, temp_dir

from pytest_skilltrigger.model.stats import sign_test, wilson

SKILLS: dict[str, str] = {
    "pdf-merge": "Merge, split and rotate PDF documents and their pages.",
    "csv-tidy": "Clean CSV exports: fix delimiters, encodings and duplicated rows.",
    "meeting-notes": "Summarise meeting transcripts and notes into action items.",
    "sql-helper": "Write, explain and fix SQL queries over database tables.",
}
FILES: dict[str, str] = {
    "contracts/contract_a.pdf": "%PDF-1.4 contract a\n",
    "contracts/contract_b.pdf": "%PDF-1.4 contract b\n",
    "exports/orders.csv": "id;name;total\n1;acme;12\n1;acme;12\n",
    "notes/standup.md": "# Standup\n\n- Ana: finish the export\n- Ben: review the schema\n",
    "queries/report.sql": "select name, sum(total) from orders group by name\n",
    "README.md": "# Office tools\n",
}
# (skill, query, should it trigger)
QUERIES: list[tuple[str, str, bool]] = [
    ("pdf-merge", "merge contracts/contract_a.pdf and contracts/contract_b.pdf", True),
    ("pdf-merge", "rotate the pages of contracts/contract_b.pdf", True),
    ("pdf-merge", "split contracts/contract_a.pdf into pages", True),
    ("pdf-merge", "merge these two pdf documents into one", True),
    ("pdf-merge", "what does contracts/contract_a.pdf say about payment terms", False),
    ("pdf-merge", "translate hello into french", False),
    ("csv-tidy", "fix the delimiters of exports/orders.csv", True),
    ("csv-tidy", "remove the duplicated rows from exports/orders.csv", True),
    ("csv-tidy", "clean the encodings of this csv export", True),
    ("csv-tidy", "how many orders are in exports/orders.csv", False),
    ("csv-tidy", "fix the typo in README.md", False),
    ("csv-tidy", "how tall is mount everest", False),
    ("meeting-notes", "summarise notes/standup.md into action items", True),
    ("meeting-notes", "turn the meeting notes in notes/standup.md into action items", True),
    ("meeting-notes", "summarise this meeting transcript", True),
    ("meeting-notes", "who wrote notes/standup.md", False),
    ("meeting-notes", "plan a trip to kyoto", False),
    ("meeting-notes", "add a title to notes/standup.md", False),
    ("sql-helper", "explain the sql query in queries/report.sql", True),
    ("sql-helper", "fix the sql query in queries/report.sql", True),
    ("sql-helper", "write a sql query joining the orders and customers tables", True),
    ("sql-helper", "rename queries/report.sql", False),
    ("sql-helper", "recommend a good novel", False),
    ("sql-helper", "what is in README.md", False),
]


def write(root: Path) -> None:
    (root / ".git").mkdir(parents=True)
    for relative, text in FILES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    for name, description in SKILLS.items():
        folder = root / ".claude" / "skills" / name
        (folder / "evals").mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n")
        entries = [{"query": q, "should_trigger": s} for n, q, s in QUERIES if n == name]
        (folder / "evals" / "trigger-eval.json").write_text(json.dumps(entries))


def truth(root: Path, model: Any) -> dict[tuple[str, str], bool]:
    """Whether each query's verdict should pass: its skill's rate as a user sees it (loaded
    within the turn) against 0.5."""
    sys.path.insert(0, str(ROOT))
    from pytest_skilltrigger.backends.api.request import build_request
    from pytest_skilltrigger.skills.catalog import load_targets
    from tests.fake_messages_api import parse_listing

    out = {}
    for target in load_targets([str(root / ".claude" / "skills")]):
        for entry in target.eval_set.entries:
            listing = parse_listing(build_request(target.context(), entry.query, "claude-bench"))
            rate = model.first_choice_rates(entry.query, listing).get(target.name, 0.0)
            out[(target.name, entry.query)] = (rate >= 0.5) == entry.should_trigger
    return out


def verdicts(path: Path) -> dict[tuple[str, str], bool]:
    data = json.loads(path.read_text())
    return {
        (skill["skill_name"], row["query"]): bool(row["pass"])
        for skill in data["skills"]
        for row in skill["results"]
    }


def measure(root: Path, within: str, looks: float, seed: int) -> dict[str, Any]:
    from tests.graded_model import GradedModel

    with fake_api(awkward=False) as api:
        api.graded = model = GradedModel(seed=seed)
        api.looks_first = looks
        out = root / f"{within}-{looks}-{seed}.json"
        start = time.perf_counter()
        result = run_pytest(
            [
                "--trigger-skill-path=.claude/skills",
                "--trigger-cache=off",
                "-p",
                "no:randomly",
                f"--trigger-within={within}",
                f"--trigger-json={out}",
            ],
            root,
            api,
        )
        wall = time.perf_counter() - start
        right = truth(root, model)
    report = json.loads(out.read_text())
    return {
        "verdicts": verdicts(out),
        "right": right,
        "calls": result.calls,
        "cost": report["totals"]["cost_usd"],
        "wall": wall,
    }


def share(count: int, total: int) -> str:
    """``18/72 (25%, 95% interval 16%–36%)``."""
    low, high = wilson(count, total)
    return f"{count}/{total} ({count / total:.0%}, 95% interval {low:.0%}–{high:.0%})"


def main() -> int:
    quick = bench_parser(__doc__).parse_args().quick
    chances = [0.5] if quick else [0.25, 0.5, 0.75]
    seeds = [3] if quick else [3, 11, 29]
    files = sum(1 for _, q, _ in QUERIES if any(f in q for f in FILES))
    print(
        f"{len(QUERIES)} queries of {len(SKILLS)} skills, {files} naming a file; graded "
        f"stand-in, seeds {seeds}; truth: the rate of loading within the turn against 0.5"
    )
    print(
        "reads first | rules disagree | wrong: first-call | wrong: turn | first-call wrong "
        "where turn is right, and the reverse (paired sign test) | calls turn/first "
        "| cost turn/first | wall turn/first"
    )
    for looks in chances:
        totals = {"differ": 0, "first_wrong": 0, "turn_wrong": 0, "only_first": 0, "only_turn": 0}
        sums = {k: [0.0, 0.0] for k in ("calls", "cost", "wall")}
        for seed in seeds:
            with temp_dir() as tmp:
                write(tmp)
                first = measure(tmp, "first-call", looks, seed)
                turn = measure(tmp, "turn", looks, seed)
            keys = first["verdicts"].keys() & turn["verdicts"].keys()
            totals["differ"] += sum(first["verdicts"][k] != turn["verdicts"][k] for k in keys)
            totals["first_wrong"] += sum(first["verdicts"][k] != first["right"][k] for k in keys)
            totals["turn_wrong"] += sum(turn["verdicts"][k] != turn["right"][k] for k in keys)
            first_ok = {k: first["verdicts"][k] == first["right"][k] for k in keys}
            turn_ok = {k: turn["verdicts"][k] == turn["right"][k] for k in keys}
            totals["only_first"] += sum(not first_ok[k] and turn_ok[k] for k in keys)
            totals["only_turn"] += sum(first_ok[k] and not turn_ok[k] for k in keys)
            for k in sums:
                sums[k][0] += turn[k]
                sums[k][1] += first[k]
        n = len(QUERIES) * len(seeds)
        ratios = " | ".join(f"{t / f:.2f}x" if f else "-" for t, f in sums.values())
        worse, better = totals["only_first"], totals["only_turn"]
        shares = " | ".join(share(totals[k], n) for k in ("differ", "first_wrong", "turn_wrong"))
        print(
            f"{looks:.2f} | {shares} | {worse} against {better} "
            f"(p = {sign_test(worse, better):.4f}) | {ratios}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
