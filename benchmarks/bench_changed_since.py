"""A pull request that changes one skill of a folder of ten: calls and cost with and without
``--trigger-changed-since``, and what each way misses.

The stand-in answers with its keyword model (``tests/fake_messages_api.decide``: the listed
skill whose description shares the most words with the query), so a description that
changes can take a sibling's queries, as a real one can. A git repository holds ten skills;
the base commit's full run is the baseline. The PR rewrites ``invoice-writer``'s
description so that it also speaks of reconciling payments. Then, on the PR's head:

- every skill (what a run without the option does: the listing changed, so nothing stored
  matches),
- ``--trigger-changed-since=<base>`` alone (the changed skill),
- with ``--trigger-baseline`` too (and the skills that competed with it in the baseline).

Per way: skills run, calls the server saw, cost (the JSON's), and the verdicts the full run
changed against the baseline that the way did not re-run (a regression it cannot see).

    .venv/bin/python benchmarks/bench_changed_since.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from _common import bench_parser, fake_api, run_pytest, temp_dir

SKILLS: dict[str, tuple[str, list[tuple[str, bool]]]] = {
    "csv-tidy": (
        "Clean CSV exports: fix delimiters, encodings and duplicated rows.",
        [
            ("fix the delimiters of this csv export", True),
            ("remove the duplicated rows from the orders csv", True),
            ("what is the weather like in lima", False),
        ],
    ),
    "invoice-writer": (
        "Draft invoices for clients with line items, taxes and totals.",
        [
            ("draft an invoice for the acme client with three line items", True),
            ("add the taxes to the invoice totals for this client", True),
            ("check the invoice payments against the bank ledger", False),
        ],
    ),
    "ledger-reconciler": (
        "Reconcile bank ledgers against payments: match each payment, flag the unmatched.",
        [
            ("reconcile the bank ledger for march", True),
            ("reconcile these invoice payments", True),
            ("match each payment in the ledger export", True),
            ("write a limerick about tax season", False),
        ],
    ),
    "meeting-notes": (
        "Summarise meeting transcripts into notes and action items.",
        [
            ("summarise this meeting transcript", True),
            ("turn the transcript into action items", True),
            ("plan a trip to kyoto", False),
        ],
    ),
    "pdf-forms": (
        "Fill in PDF forms and extract the fields of a form.",
        [
            ("fill in this pdf form with my address", True),
            ("extract the form fields from the application pdf", True),
            ("how tall is mount everest", False),
        ],
    ),
    "pdf-merge": (
        "Merge, split and rotate PDF documents and their pages.",
        [
            ("merge these two pdf documents", True),
            ("rotate the third page of the scan pdf", True),
            ("translate hello into french", False),
        ],
    ),
    "regex-helper": (
        "Write and test regular expressions that match text patterns.",
        [
            ("write a regular expression for uk postcodes", True),
            ("test this regular expression against these lines", True),
            ("recommend a good novel", False),
        ],
    ),
    "sheet-charts": (
        "Draw charts from spreadsheet columns: bars, lines, pies.",
        [
            ("draw a bar chart of the spreadsheet columns", True),
            ("make a pie chart from this spreadsheet", True),
            ("what year did the berlin wall fall", False),
        ],
    ),
    "slide-deck": (
        "Turn notes into slide decks for talks and lectures.",
        [
            ("turn my talk notes into slide decks", True),
            ("make slides for a lecture on volcanoes", True),
            ("suggest a name for my cat", False),
        ],
    ),
    "sql-helper": (
        "Write and explain SQL queries over database tables.",
        [
            ("write a sql query joining the orders and customers tables", True),
            ("explain this sql query over the sales database", True),
            ("how do i boil an egg", False),
        ],
    ),
}
CHANGED = "invoice-writer"
NEW_DESCRIPTION = (
    "Draft invoices for clients with line items, taxes and totals, and reconcile invoice "
    "payments against the bank."
)


def write(root: Path, description_of_changed: str) -> None:
    for name, (description, entries) in SKILLS.items():
        folder = root / "skills" / name
        (folder / "evals").mkdir(parents=True, exist_ok=True)
        text = description_of_changed if name == CHANGED else description
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {text}\n---\n")
        data = [{"query": q, "should_trigger": s} for q, s in entries]
        (folder / "evals" / "trigger-eval.json").write_text(json.dumps(data))


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def verdicts(path: Path) -> dict[tuple[str, str], Any]:
    data = json.loads(path.read_text())
    return {
        (skill["skill_name"], row["query"]): row["pass"]
        for skill in data["skills"]
        for row in skill["results"]
    }


def main() -> int:
    bench_parser(__doc__).parse_args()  # (--quick changes nothing: the run is small)
    base_args = [
        "--trigger-skill-path=skills",
        "--trigger-cache=off",
        "-p",
        "no:randomly",
        "--trigger-model=claude-haiku-4-5",
    ]
    with temp_dir() as tmp, fake_api(awkward=False) as api:
        write(tmp, SKILLS[CHANGED][0])
        git(tmp, "init", "-q")
        git(tmp, "add", "-A")
        git(tmp, "commit", "-qm", "base")
        base_rev = git(tmp, "rev-parse", "HEAD")
        base = tmp / "base.json"
        run_pytest([*base_args, f"--trigger-json={base}"], tmp, api)
        write(tmp, NEW_DESCRIPTION)
        git(tmp, "commit", "-qam", "invoice-writer also reconciles")
        ways = {
            "every skill": [],
            "--trigger-changed-since": [f"--trigger-changed-since={base_rev}"],
            "  and --trigger-baseline": [
                f"--trigger-changed-since={base_rev}",
                f"--trigger-baseline={base}",
            ],
        }
        before = verdicts(base)
        rows = []
        full_changes: set[tuple[str, str]] = set()
        for way, extra in ways.items():
            out = tmp / f"{len(rows)}.json"
            result = run_pytest([*base_args, f"--trigger-json={out}", *extra], tmp, api)
            now = verdicts(out)
            report = json.loads(out.read_text())
            if not extra:
                full_changes = {k for k, v in now.items() if before.get(k) != v}
            missed = {k for k in full_changes if k not in now}
            rows.append(
                (
                    way,
                    len(report["skills"]),
                    result.calls,
                    report["totals"]["cost_usd"],
                    len(missed),
                    sorted({skill for skill, _ in missed}),
                )
            )
    print(
        f"ten skills, the PR changes {CHANGED}'s description; the full run changed "
        f"{len(full_changes)} verdicts against the base: "
        + ", ".join(f"{s}: {q!r}" for s, q in sorted(full_changes))
    )
    print(f"{'way':28} {'skills':>6} {'calls':>6} {'cost':>9}  verdict changes not re-run")
    full_calls, full_cost = rows[0][2], rows[0][3]
    for way, skills, calls, cost, missed, where in rows:
        ratio = f"({calls / full_calls:.2f}x calls, {cost / full_cost:.2f}x cost)"
        said = f"{missed} {where}" if missed else "0"
        print(f"{way:28} {skills:>6} {calls:>6} ${cost:>8.4f}  {said}  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
