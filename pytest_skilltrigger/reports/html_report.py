"""The HTML reports: the optimizer's rounds, one table per skill, and a plain run's results.

Why its own renderer rather than a template engine: the page must work offline (the reference
tool's report pulls web fonts and breaks without a network), must never run anything a query
or a description smuggles in (eval sets and proposed descriptions are untrusted text, and the
latter is written by a model), and is rewritten after every iteration while the loop runs.
So it is plain string building in which every user-supplied value goes through ``_e``, with
inline CSS only and no scripts (the shared pieces are in :mod:`.html_parts`). Engine module:
no pytest import.

Layout per skill: a header (name, path, exit reason, original vs best description), then a
table with one row per iteration (description, train score, test score) and one column per
query, train columns and test columns told apart, each cell a pass/fail mark with the trigger
rate and triggers/runs. A plain run's page (:func:`render_results_html`) has per skill its
summary and a table of its queries, failing ones first.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from pytest_skilltrigger.model.formatting import escape_html, format_chosen, format_ratio
from pytest_skilltrigger.model.prices import format_usd
from pytest_skilltrigger.reports.html_parts import expected_badge, html_page, result_cell, verdict

if TYPE_CHECKING:
    from pytest_skilltrigger.reports.session_report import SessionReport, SkillReport

__all__ = ["render_html", "render_results_html"]

#: How many characters of a query the column header shows (the full text is in ``title``).
QUERY_CHARS = 60
#: The label of a candidate refused for the folder (``refused_for_folder`` in the JSON).
REFUSED = "refused: takes more of its siblings' queries than it gains"

_e = escape_html  # short name: it wraps every user string in the templates below


def _score(passed: Any, total: Any) -> str:
    if isinstance(total, int) and total > 0:
        return f"{passed if isinstance(passed, int) else 0}/{total}"
    return "—"


def _counted(results: list[dict[str, Any]]) -> tuple[int, int]:
    """Passed/total from result rows, for entries that lack the summary numbers."""
    return sum(1 for r in results if r.get("pass") is True), len(results)


def _columns(history: list[dict[str, Any]], key: str) -> list[tuple[str, int, dict[str, Any]]]:
    """The queries of one set across all iterations, in first-seen order.

    Keyed by (query, occurrence) so a query listed twice keeps two columns and an iteration
    that lacks a query (interrupted mid-set) still lines up with the others.
    """
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for entry in history:
        for ident, row in _index(entry.get(key) or []).items():
            seen.setdefault(ident, row)
    return [(q, n, row) for (q, n), row in seen.items()]


def _index(results: Iterable[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for row in results:
        query = str(row.get("query", ""))
        nth = counts.get(query, 0)
        counts[query] = nth + 1
        out[(query, nth)] = row
    return out


def _query_header(query: str, row: dict[str, Any], split: str) -> str:
    positive = bool(row.get("should_trigger"))
    badge = expected_badge(positive)
    short = query if len(query) <= QUERY_CHARS else query[: QUERY_CHARS - 1] + "…"
    tip = [query, "should trigger" if positive else "should not trigger", f"set: {split}"]
    extra = row.get("extra")
    if isinstance(extra, dict):
        tip.extend(f"{k}: {v}" for k, v in extra.items())
    return (
        f'<th class="q {split}" title="{_e(chr(10).join(tip))}">{badge}'
        f'<span class="qt">{_e(short)}</span></th>'
    )


def _iteration_row(
    entry: dict[str, Any],
    best: Any,
    train_cols: list[tuple[str, int, dict[str, Any]]],
    test_cols: list[tuple[str, int, dict[str, Any]]],
    folder: bool = False,
    refused: Collection[Any] = (),
) -> str:
    """One iteration's row; ``refused`` are the iterations that did better on the skill's own
    queries than the best but lose the folder (the JSON's ``refused_for_folder``): marked, so
    that a row with more test passes than the highlighted one says why it is not the best."""
    train = entry.get("train_results") or []
    test = entry.get("test_results") or []
    number = entry.get("iteration")
    status = entry.get("status")
    is_best = best is not None and number == best
    is_refused = number is not None and number in refused
    marks = ("best" if is_best else "", "refused" if is_refused else "", str(status or ""))
    classes = [c for c in marks if c]
    tp, tt = entry.get("train_passed"), entry.get("train_total")
    if not isinstance(tt, int):
        tp, tt = _counted(train)
    sp, st = entry.get("test_passed"), entry.get("test_total")
    if not isinstance(st, int):
        sp, st = _counted(test)
    labels = '<span class="badge best">best</span><br>' if is_best else ""
    if status and status != "evaluated":
        labels += f'<span class="badge status">{_e(status)}</span><br>'
    note = f'<span class="note">{_e(entry.get("note"))}</span>' if entry.get("note") else ""
    refusal = f'<span class="badge refused">{_e(REFUSED)}</span><br>' if is_refused else ""
    train_index, test_index = _index(train), _index(test)
    cells = [
        f'<td class="num">{labels}{_e(number)}</td>',
        f'<td class="desc-cell">{refusal}{_e(entry.get("description", ""))}{note}</td>',
        f'<td class="score">{_score(tp, tt)}</td>',
        f'<td class="score">{_score(sp, st)}</td>',
    ]
    if folder:
        cells.append(_folder_cell(entry))
    cells += [result_cell(train_index.get((q, n)), "train") for q, n, _ in train_cols]
    cells += [result_cell(test_index.get((q, n)), "test") for q, n, _ in test_cols]
    class_attr = f' class="{_e(" ".join(classes))}"' if classes else ""
    return f"<tr{class_attr}>{''.join(cells)}</tr>"


def _folder_cell(entry: dict[str, Any]) -> str:
    """The folder's score under this candidate, each skill's below it, and the siblings'
    requests it takes."""
    if "folder_score" not in entry:
        return '<td class="score">—</td>'
    scores = "<br>".join(
        f"{_e(name)} {_e(score)}" for name, score in (entry.get("skill_scores") or {}).items()
    )
    taken = "".join(f"<li>{_e(line)}</li>" for line in entry.get("folder_taken") or [])
    taken = f'<ul class="note">{taken}</ul>' if taken else ""
    return (
        f'<td class="score">{_e(entry["folder_score"])}'
        f'<span class="note">{scores}</span>{taken}</td>'
    )


def _in_folder(history: Iterable[Any]) -> bool:
    """Whether the rounds measured the skill with its siblings (a folder of several skills):
    only then are there folder scores, and can a candidate lose the folder."""
    return any(isinstance(h, dict) and "folder_score" in h for h in history)


def _refused(skill: dict[str, Any]) -> list[Any]:
    refused = skill.get("refused_for_folder")
    return list(refused) if isinstance(refused, list) else []


def _folder_lines(skill: dict[str, Any]) -> str:
    """The lines at the top of a skill's section when the folder kept a candidate from being
    the best, or the winner from being written: without them a row with more test passes
    than the highlighted best, or an unchanged SKILL.md after a winning round, is a puzzle."""
    name = _e(skill.get("skill_name") or "the skill")
    lines = []
    refused = _refused(skill)
    if refused:
        numbers = ", ".join(_e(n) for n in refused)
        one = len(refused) == 1
        lines.append(
            f"Iteration {numbers} did better on {name}'s own queries than the best but "
            f"{'was' if one else 'were'} refused: {'it takes' if one else 'each takes'} more "
            "of its siblings' queries than it gains (the folder passes fewer of its queries "
            "than with the starting description)."
        )
    confirmation = skill.get("confirmation")
    if (
        isinstance(confirmation, dict)
        and confirmation.get("folder_holds") is False
        and confirmation.get("complete") is not False  # an error is no miss: not judged
        and _in_folder(skill.get("history") or [])
    ):
        lead = (
            ", though its lead on its own queries held: it takes more of its siblings' queries "
            "than it gains"
            if confirmation.get("lead_holds")
            else ""
        )
        lines.append(
            f"Not written: measured again on fresh runs, the best (iteration "
            f"{_e(confirmation.get('best_iteration'))}) passes fewer of the folder's queries "
            f"than the start ({_e(confirmation.get('folder_best_score'))} with it, "
            f"{_e(confirmation.get('folder_start_score'))} with the start){lead}."
        )
    return "".join(f'<p class="folder-warning">{line}</p>' for line in lines)


def _table(skill: dict[str, Any]) -> str:
    history = [h for h in skill.get("history") or [] if isinstance(h, dict)]
    if not history:
        return '<p class="empty">No iteration has finished yet.</p>'
    train_cols = _columns(history, "train_results")
    test_cols = _columns(history, "test_results")
    best = skill.get("best_iteration")
    group = ['<th rowspan="2">Iter.</th>', '<th rowspan="2">Description</th>']
    group += ['<th rowspan="2">Train</th>', '<th rowspan="2">Test</th>']
    if _in_folder(history):
        group.append('<th rowspan="2" title="its own queries and its siblings\'">Folder</th>')
    if train_cols:
        group.append(
            f'<th class="group-train" colspan="{len(train_cols)}">'
            f"Train queries ({len(train_cols)})</th>"
        )
    if test_cols:
        group.append(
            f'<th class="group-test" colspan="{len(test_cols)}">'
            f"Test queries ({len(test_cols)}, never shown to the improver)</th>"
        )
    queries = [_query_header(q, row, "train") for q, _, row in train_cols]
    queries += [_query_header(q, row, "test") for q, _, row in test_cols]
    folder = _in_folder(history)
    refused = _refused(skill)
    rows = [_iteration_row(h, best, train_cols, test_cols, folder, refused) for h in history]
    head = f"<tr>{''.join(group)}</tr><tr>{''.join(queries)}</tr>"
    if not queries:
        head = f"<tr>{''.join(group)}</tr>"  # a lone empty <tr> would be invalid HTML
    return (
        '<div class="scroll"><table class="iters">'
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _best_scores(skill: dict[str, Any]) -> str:
    best = skill.get("best_iteration")
    for entry in skill.get("history") or []:
        if isinstance(entry, dict) and best is not None and entry.get("iteration") == best:
            train = _score(entry.get("train_passed"), entry.get("train_total"))
            test = _score(entry.get("test_passed"), entry.get("test_total"))
            return f"iteration {_e(best)} (train {train}, test {test})"
    return "—" if best is None else f"iteration {_e(best)}"


def _skill_section(skill: dict[str, Any]) -> str:
    name = skill.get("skill_name") or "(unnamed skill)"
    holdout = skill.get("holdout")
    sizes = f"train {_e(skill.get('train_size', '—'))}, test {_e(skill.get('test_size', '—'))}"
    if holdout is not None:
        sizes += f" (holdout {_e(holdout)})"
    if not skill.get("test_size") and holdout is not None and not holdout:
        sizes += " — no test set: scores are on the queries the improver saw"
    exit_reason = skill.get("exit_reason") or ("interrupted" if skill.get("interrupted") else "—")
    meta = [
        ("Path", _e(skill.get("skill_path", ""))),
        ("Exit reason", _e(exit_reason)),
        ("Best", _best_scores(skill)),
        ("Queries", sizes),
    ]
    if skill.get("listed_as"):  # the exact line the model saw for the skill
        meta.append(("Listed as", f"<code>{_e(skill['listed_as'])}</code>"))
    confirmation = skill.get("confirmation")
    if isinstance(confirmation, dict):
        meta.append((
            "Measured again",
            f"on fresh runs ({_e(confirmation.get('on'))}): {_e(confirmation.get('verdict'))}",
        ))  # fmt: skip
    if skill.get("interrupted"):
        meta.append(("Interrupted", "yes: the run stopped before it finished"))
    original = skill.get("original_description", "")
    best_desc = skill.get("best_description")
    same = best_desc is None or best_desc == original
    descs = (
        '<div class="descs"><div><h3>Original description</h3>'
        f'<p class="desc">{_e(original)}</p></div>'
        f"<div><h3>Best description{' (unchanged)' if same else ''}</h3>"
        f'<p class="desc">{_e(original if best_desc is None else best_desc)}</p></div></div>'
    )
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta)
    return (
        f'<section class="skill"><h2>{_e(name)}</h2>{_folder_lines(skill)}'
        f'<dl class="meta">{dl}</dl>'
        f"{descs}{_table(skill)}</section>"
    )


LEGEND = (
    '<p class="legend">Cells: <b>✓</b> pass, <b>✗</b> fail, <b>!</b> a run errored (no verdict;'
    " never counted as a miss), <b>–</b> skipped, <b>·</b> not run; then the trigger rate and"
    " triggers/runs. Blue columns are train queries (the improver sees them), purple columns"
    " test queries (held out). The best iteration (most test passes among candidates that"
    " do not lose the folder; on train when there is no test set) is highlighted. In a folder"
    " of skills, a candidate that did better on its own queries than the best but passes"
    " fewer of the folder's queries than the start is marked <b>refused</b>: it takes more of"
    " its siblings' queries than it gains.</p>"
)


def routing_section(table: dict[str, Any]) -> str:
    """A folder's routing table (a ``routing`` entry of the JSON report) as escaped HTML:
    rows are whose queries, columns what the model chose first; the clashes below."""
    from pytest_skilltrigger.reports.routing_table import choice_label

    columns = table["columns"]
    skills = table.get("folder_skills") or table.get("skills")
    head = "".join(f"<th>{_e(choice_label(c, skills))}</th>" for c in columns)
    rows = []
    for row in table["rows"]:
        kind = "should trigger" if row["should_trigger"] else "should not"
        cells = "".join(f"<td>{_e(row['chosen'].get(c, 0))}</td>" for c in columns)
        rows.append(
            f"<tr><th>{_e(row['skill'])}</th><td>{kind}</td>{cells}"
            f"<td>{_e(row['errors'])}</td></tr>"
        )
    clashes = "".join(f"<li>{_e(c['text'])}</li>" for c in table["clashes"])
    return (
        f'<h3 class="skilltrigger-routing">Routing in {_e(table["folder"])}</h3>'
        f"<table><tr><th>queries of</th><th>kind</th>{head}<th>errors</th></tr>"
        f"{''.join(rows)}</table><ul>{clashes}</ul>"
    )


def render_html(
    skills: list[dict[str, Any]], *, running: bool, title: str = "Skill trigger report",
    routing: list[dict[str, Any]] | None = None,
) -> str:  # fmt: skip
    """The whole report page as one string (write it atomically).

    ``running`` adds a 5-second meta refresh so a browser left open follows the loop; the
    final page has none, so it stops reloading once the run is over. ``routing`` are the
    session's routing tables (how each folder's queries were routed by the items' runs).
    """
    banner = (
        '<div class="banner running">Running: this page reloads every 5 seconds.</div>'
        if running
        else '<div class="banner done">Finished.</div>'
    )
    sections = "".join(_skill_section(s) for s in skills if isinstance(s, dict))
    if not sections:
        sections = '<p class="empty">No skill has been evaluated yet.</p>'
    sections += _routing_part(routing or [])
    return html_page(title, f"{banner}\n{LEGEND}\n{sections}", refresh=running)


def _routing_part(routing: list[dict[str, Any]]) -> str:
    """Every folder's routing table (``RoutingTable.to_dict`` entries), under one heading."""
    if not routing:
        return ""
    tables = "".join(routing_section(t) for t in routing)
    return f'<section class="routing"><h2>Routing, as the tests ran</h2>{tables}</section>'


RESULTS_LEGEND = (
    '<p class="legend">One table per skill, its failing queries first (marked in red: a'
    " miss; yellow: a run errored, never counted as a miss; grey: skipped), then the ones that"
    " passed; # is the query's place in the eval set. Result: <b>✓</b> pass, <b>✗</b> fail,"
    " <b>!</b> error, <b>–</b> skipped, with the trigger rate and triggers/runs.</p>"
)


def render_results_html(report: SessionReport, title: str = "Skill trigger results") -> str:
    """The page of a plain run (``--trigger-report`` without ``--optimize-description``):
    each skill's summary and queries, failing ones first, then every folder's routing table.

    The same self-contained style as the rounds' page, and the same escaping: queries come
    from eval files anyone can contribute to, and the page is opened in a browser."""
    total = report.total()
    run = [
        ("Backend", _e(report.backend or "—")),
        ("Model", _e(report.model or "—")),
        ("Runs per query", _e(report.runs_per_query)),
        ("Threshold", _e(report.threshold)),
    ]
    if report.spending:  # every call of the session, the fixture's checks included
        run.append(("Session", f"{_e(total.calls)} calls, cost {_e(format_usd(total.cost_usd))}"))
    meta = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in run)
    sections = "".join(_results_section(skill) for skill in report.skills)
    if not report.has_results:
        sections = '<p class="empty">No skill was tested.</p>'
    sections += _routing_part([table.to_dict() for table in report.routing])
    return html_page(title, f'<dl class="meta">{meta}</dl>\n{RESULTS_LEGEND}\n{sections}')


def _results_section(skill: SkillReport) -> str:
    """One skill: what Claude Code lists for it, its summary, and its queries."""
    target, s = skill.target, skill.summary
    skipped = f", {s.skipped} skipped" if s.skipped else ""
    counts = f"{s.failed} failed, {s.errors} errors{skipped}"
    u = s.usage
    meta = [
        ("Path", _e(target.skill.path)),
        ("Listed as", f"<code>{_e(skill.listed_line)}</code>" if skill.listed_line
         else "not listed (disable-model-invocation: true): it can never trigger"),
        ("Queries passed",
         f"{s.passed}/{s.counted} ({format_ratio(s.query_pass_rate)}); {counts}"),
        ("Precision", format_ratio(s.precision)),
        ("Recall", format_ratio(s.recall)),
        ("Run accuracy", format_ratio(s.accuracy)),
        ("Calls", f"{s.calls} (tokens in {u.input_tokens:,}, out {u.output_tokens:,}, "
                  f"cache write {u.cache_creation_input_tokens:,}, "
                  f"read {u.cache_read_input_tokens:,})"),
        ("Cost", _e(format_usd(s.cost_usd)) if s.priced else "n/a (no model priced)"),
    ]  # fmt: skip
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in meta)
    rows = skill.results.indexed_rows()
    for index, row in rows:  # a skill the model is never shown passes without a run: say why
        row["unlisted"] = skill.results.rows[index].unlisted
    # failing first (a miss, an error, a skip), each group in eval-file order
    rows.sort(key=lambda ir: ir[1].get("pass") is True)
    body = "".join(_result_row(index, row) for index, row in rows)
    table = (
        '<div class="scroll"><table class="results"><thead><tr><th>#</th><th>Query</th>'
        "<th>Expected</th><th>Result</th><th>Verdict</th><th>Chosen</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
        if rows
        else '<p class="empty">No query of this skill ran.</p>'
    )
    return (
        f'<section class="skill"><h2>{_e(target.name)}</h2><dl class="meta">{dl}</dl>'
        f"{table}</section>"
    )


def _result_row(index: int, row: dict[str, Any]) -> str:
    """One query of a plain run: a failing one is marked (its class colours the row)."""
    kind, _mark, label, detail = verdict(row)
    if row.get("unlisted"):
        detail = f"not listed: {row['unlisted']}"
    extra = row.get("extra")
    tip = [f"{k}: {v}" for k, v in extra.items()] if isinstance(extra, dict) else []
    title = f' title="{_e(chr(10).join(tip))}"' if tip else ""
    failing = kind != "pass"
    badge = f'<span class="badge status">{_e(label)}</span>' if failing else _e(label)
    note = f'<span class="note">{_e(detail)}</span>' if detail else ""
    return (
        f'<tr class="{"failing " if failing else ""}{kind}"><td class="num">{index + 1}</td>'
        f'<td class="query"{title}>{_e(row.get("query", ""))}</td>'
        f"<td>{expected_badge(bool(row.get('should_trigger')))}</td>"
        f"{result_cell(row, 'result')}<td>{badge}{note}</td>"
        f'<td>{_e(format_chosen(row.get("chosen")))}</td></tr>'
    )
