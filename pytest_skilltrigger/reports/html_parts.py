"""What both HTML pages are built from: the stylesheet, the page shell and a result's cell.

The rounds' page (one table per skill of the improvement rounds) and a plain run's page (each
skill's queries) look alike and must be equally safe: inline CSS only, no scripts, nothing
fetched, and every user-supplied value escaped (``_e``). Engine module: no pytest import.
"""

from __future__ import annotations

from typing import Any

from pytest_skilltrigger.model.formatting import escape_html, format_chosen, format_ratio

_e = escape_html  # short name: it wraps every user string in the templates below

CSS = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
  margin: 1.5em; color: #1f2328; background: #fff; font-size: 14px; }
h1 { font-size: 1.5em; margin: 0 0 .4em; }
h2 { font-size: 1.25em; margin: 0 0 .3em; }
.banner { padding: .5em .8em; border-radius: 4px; margin-bottom: 1em; }
.banner.running { background: #fff8c5; border: 1px solid #d4a72c; }
.banner.done { background: #eef6ee; border: 1px solid #8fc79a; }
section.skill { border: 1px solid #d0d7de; border-radius: 6px; padding: 1em;
  margin-bottom: 2em; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .2em 1em; margin: .5em 0; }
dl.meta dt { font-weight: 600; color: #57606a; }
dl.meta dd { margin: 0; }
.desc { white-space: pre-wrap; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas,
  monospace; font-size: 12px; background: #f6f8fa; border: 1px solid #d0d7de;
  border-radius: 4px; padding: .4em .6em; margin: 0; }
.descs { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; margin: .5em 0 1em; }
.descs h3 { font-size: 1em; margin: 0 0 .3em; }
.scroll { overflow-x: auto; }
table.iters { border-collapse: collapse; font-size: 12px; }
table.iters th, table.iters td { border: 1px solid #d0d7de; padding: 3px 5px;
  vertical-align: top; }
table.iters td.desc-cell { min-width: 22em; max-width: 36em; white-space: pre-wrap; }
table.iters td.num, table.iters td.score { text-align: center; white-space: nowrap; }
th.group-train, th.q.train { background: #ddf4ff; }
th.group-test, th.q.test { background: #fbefff; }
th.q { width: 7.5em; min-width: 7.5em; max-width: 7.5em; font-weight: normal;
  text-align: left; }
th.q .qt { display: block; max-height: 7.5em; overflow: hidden; overflow-wrap: anywhere; }
td.cell.train { border-bottom: 3px solid #54aeff; }
td.cell.test { border-bottom: 3px solid #c297ff; }
.badge { display: inline-block; font-size: 11px; font-weight: 600; padding: 0 .4em;
  border-radius: 3px; margin-bottom: .2em; white-space: nowrap; }
.badge.pos { background: #1a7f37; color: #fff; }
.badge.neg { background: #6e7781; color: #fff; }
.badge.best { background: #bf8700; color: #fff; }
.badge.status { background: #cf222e; color: #fff; }
.badge.refused { background: #bc4c00; color: #fff; white-space: normal; }
td.cell { text-align: center; white-space: nowrap; min-width: 4.5em; }
td.cell .mark { font-size: 15px; font-weight: 700; display: block; }
td.cell .rate { display: block; }
td.cell .runs { display: block; color: #57606a; }
td.pass { background: #dafbe1; }
td.pass .mark { color: #1a7f37; }
td.fail { background: #ffebe9; }
td.fail .mark { color: #cf222e; }
td.error { background: #fff1c2; }
td.error .mark { color: #9a6700; }
td.skipped { background: #eaeef2; }
td.skipped .mark { color: #57606a; }
td.none { background: #fff; color: #8c959f; }
tr.best > td.num, tr.best > td.desc-cell, tr.best > td.score { background: #fff8c5; }
tr.best > td { border-top: 2px solid #bf8700; border-bottom: 2px solid #bf8700; }
tr.invalid > td.desc-cell, tr.interrupted > td.desc-cell { color: #57606a; }
tr.refused > td.num, tr.refused > td.desc-cell, tr.refused > td.score { background: #fff1e5; }
.folder-warning { background: #fff1e5; border: 1px solid #bc4c00; border-radius: 4px;
  padding: .4em .7em; margin: .4em 0; }
.note { color: #57606a; font-style: italic; display: block; margin-top: .3em; }
.legend { font-size: 12px; color: #57606a; margin: .5em 0; }
.empty { color: #57606a; font-style: italic; }
table.results, section.routing table { border-collapse: collapse; font-size: 12px; }
table.results th, table.results td, section.routing th, section.routing td {
  border: 1px solid #d0d7de; padding: 3px 6px; vertical-align: top; }
table.results td.query { min-width: 20em; max-width: 40em; overflow-wrap: anywhere; }
table.results tr.failing > td.num { border-left: 4px solid #cf222e; }
tr.failing.fail > td { background: #ffebe9; }
tr.failing.error > td { background: #fff1c2; }
tr.failing.skipped > td, tr.failing.none > td { background: #eaeef2; }
"""


def html_page(title: str, body: str, *, refresh: bool = False) -> str:
    """A whole page: inline CSS only, no scripts, nothing fetched (it must work offline and
    never run what a query smuggles in); ``refresh`` reloads it every 5 seconds."""
    meta = '<meta http-equiv="refresh" content="5">\n' if refresh else ""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{meta}<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
        f"<h1>{_e(title)}</h1>\n{body}\n</body>\n</html>\n"
    )


def expected_badge(positive: bool) -> str:
    """What a query should do, as a coloured badge: read at a glance beside its outcome."""
    if positive:
        return '<span class="badge pos">✓ should trigger</span>'
    return '<span class="badge neg">✗ should not</span>'


def verdict(row: dict[str, Any]) -> tuple[str, str, str, str | None]:
    """A result row's (kind, mark, label, detail): a skip or an error before the verdict, as
    neither is a miss; the detail says why (the skip's reason, the error's message)."""
    if row.get("skipped"):
        return "skipped", "–", "skipped", f"skipped: {row.get('skipped')}"
    if row.get("errors") or row.get("error"):
        error = row.get("error") or "unknown error"
        return "error", "!", "error", f"errors: {row.get('errors') or 0}; {error}"
    if row.get("pass") is True:
        return "pass", "✓", "pass", None
    if row.get("pass") is False:
        return "fail", "✗", "fail", None
    return "none", "?", "no verdict", None


def result_cell(row: dict[str, Any] | None, split: str) -> str:
    """One query's outcome (a result row of the JSON, or None when it did not run): its mark,
    trigger rate and triggers/runs, with what was chosen and why there is no verdict in the
    tooltip. ``split`` is a class (``train``, ``test``) that colours the cell's set."""
    if row is None:
        return f'<td class="cell {split} none" title="not run">·</td>'
    runs = row.get("runs") or 0
    triggers = row.get("triggers") or 0
    rate = row.get("trigger_rate")
    rate_text = format_ratio(rate, "—")
    tip = [f"trigger rate {rate_text} ({triggers}/{runs} runs)"]
    tip.append(f"chose: {format_chosen(row.get('chosen'))}")
    kind, mark, label, detail = verdict(row)
    if detail:
        tip.append(detail)
    return (
        f'<td class="cell {split} {kind}" title="{_e(label + chr(10) + chr(10).join(tip))}">'
        f'<span class="mark">{mark}</span><span class="rate">{rate_text}</span>'
        f'<span class="runs">{_e(triggers)}/{_e(runs)}</span></td>'
    )
