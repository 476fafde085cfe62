"""A Markdown summary per skill, for ``$GITHUB_STEP_SUMMARY`` in GitHub Actions."""

from __future__ import annotations

from typing import Any

from pytest_skilltrigger.engine.context import one_line
from pytest_skilltrigger.engine.cost import format_usd
from pytest_skilltrigger.reports.formatting import format_chosen, format_ratio
from pytest_skilltrigger.reports.routing import choice_label


def _cell(text: Any) -> str:
    """Table-safe text: no line breaks, pipes escaped, HTML-significant characters escaped."""
    value = one_line(str(text))
    for char, repl in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        value = value.replace(char, repl)
    return value


def render_markdown(report: dict[str, Any], min_accuracy: float | None = None) -> str:
    """One section per skill: the share of queries passed (what the gate compares), run
    accuracy, precision, recall, cost and the failing queries."""
    lines = ["## Skill trigger results", ""]
    lines.append(
        "| skill | passed | failed | errors | queries passed | run accuracy | precision | "
        "recall | cost |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for skill in report.get("skills", []):
        s = skill["summary"]
        cost = format_usd(s["cost_usd"]) if "cost_usd" in s else "n/a"
        lines.append(
            f"| {_cell(skill['skill_name'])} | {s['passed']} | {s['failed']} | {s['errors']} | "
            f"{format_ratio(s.get('query_pass_rate'))} | "
            f"{format_ratio(s['accuracy'])} | {format_ratio(s['precision'])} | "
            f"{format_ratio(s['recall'])} | "
            f"{cost} |"
        )
    if min_accuracy is not None:
        lines += [
            "",
            f"Required share of queries passed per skill (--trigger-min-accuracy): "
            f"{min_accuracy:g}",
        ]
    for table in report.get("routing") or []:
        lines += ["", f"### Routing in {_cell(table['folder'])}", ""]
        columns = table["columns"]
        lines.append(
            "| queries of | kind | "
            + " | ".join(_cell(choice_label(c)) for c in columns)
            + " | errors |"
        )
        lines.append("|---|---|" + "---|" * (len(columns) + 1))
        for row in table["rows"]:
            kind = "should trigger" if row["should_trigger"] else "should not"
            cells = " | ".join(str(row["chosen"].get(c, 0)) for c in columns)
            lines.append(f"| {_cell(row['skill'])} | {kind} | {cells} | {row['errors']} |")
        for clash in table["clashes"]:
            lines.append(f"- {_cell(clash['text'])}")
    for skill in report.get("skills", []):
        failing = [r for r in skill["results"] if r.get("pass") is not True]
        if not failing:
            continue
        lines += ["", f"### {_cell(skill['skill_name'])}: failing queries", ""]
        lines += ["| query | expected | triggers/runs | chosen |", "|---|---|---|---|"]
        for row in failing:
            expected = "trigger" if row["should_trigger"] else "no trigger"
            if row.get("error"):
                observed = "error: " + str(row["error"])
            else:
                observed = f"{row['triggers']}/{row['runs']}"
            chosen = format_chosen(row.get("chosen"))
            lines.append(
                f"| {_cell(row['query'])} | {expected} | {_cell(observed)} | {_cell(chosen)} |"
            )
    return "\n".join(lines) + "\n"
