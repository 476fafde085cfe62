"""A crowded install (``--trigger-crowd``): the rival catalog, the nearest rivals first, the
user's own before them, usage deciding who keeps its text past the listing budget, as the
pinned CLI decides it; items per crowd size, with the curve in the summary and the JSON."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skilltrigger.model.context import USER, ListedSkill, TriggerContext
from pytest_skilltrigger.model.listing_budget import BARE, FULL, fit_of, how_shown
from pytest_skilltrigger.model.option_spec import crowd_sizes
from pytest_skilltrigger.skills.rivals import crowd_context, nearest, rivals
from pytest_skilltrigger.support.errors import InputError
from tests.backends.test_claude_code_cli import claude_bin  # noqa: F401 (a fixture)
from tests.cli_session import cli_request, listing_lines
from tests.fake_messages_api import FakeMessagesAPI
from tests.helpers import plugin_args

# a description as long as many real ones (about 400 characters): past the budget it does not
# fit into what the skills in use leave
PDF = TriggerContext(
    "pdf",
    "Merge, split, rotate, compress and fill PDF files, extract their text and tables, add "
    "page numbers, watermarks and bookmarks, and turn scans into searchable PDFs. Use when the "
    "user has one or more PDF documents to combine, cut apart, shrink for email, sign, fill in "
    "or read, or asks for a PDF to be made from other files such as images or Word documents.",
)


def test_the_catalog_is_large_varied_and_its_own() -> None:
    catalog = rivals()
    assert len(catalog) >= 150
    assert len({domain for domain, _, _ in catalog}) >= 20
    assert len({name for _, name, _ in catalog}) == len(catalog)
    assert all(". Use when " in text for _, _, text in catalog)


def test_the_nearest_rivals_come_first() -> None:
    first = [name for name, _ in nearest(PDF.description)[:3]]
    assert "pdf-forms" in first


def test_the_users_own_skills_are_the_first_rivals() -> None:
    own = ListedSkill("my-invoices", "Sort my invoices.", group=USER)
    crowded = crowd_context(TriggerContext("pdf", PDF.description, installed=(own,)), 10)
    users = [s for s in crowded.installed if s.group == USER]
    assert len(users) == 10 and users[0].name == "my-invoices"
    assert all(s.usage > 0 for s in users) and crowded.usage == 0  # rivals in use; pdf new


def test_in_a_crowd_of_forty_a_new_skill_loses_its_text_on_haiku() -> None:
    crowded = crowd_context(PDF, 40)
    assert how_shown(crowded, "claude-haiku-4-5")[0] == BARE
    assert how_shown(crowded, "claude-opus-5-5")[0] == FULL  # a large window holds them all
    used = crowd_context(PDF, 40, usage=5.0)  # the most used skill keeps its text
    assert how_shown(used, "claude-haiku-4-5")[0] == FULL
    assert crowded.key() != used.key() != PDF.key()


def test_user_skills_come_first_in_the_listing() -> None:
    names = [s.name for s in crowd_context(PDF, 10).listing()]
    assert names.index("pdf") == 10  # after the ten user skills


@pytest.mark.parametrize("given", ["0", "ten", "-3", "10,,x", "", "\u00b2"])
def test_a_crowd_size_that_is_not_a_positive_number_is_one_line(given: str) -> None:
    with pytest.raises(InputError, match="--trigger-crowd"):
        crowd_sizes(given)


def test_a_crowd_larger_than_the_catalog_is_refused() -> None:
    with pytest.raises(InputError, match="more skills than"):
        crowd_context(PDF, 5000)


@pytest.mark.slow
@pytest.mark.parametrize("usage", [0, 5], ids=["new", "used"])
def test_who_keeps_the_text_is_what_the_pinned_cli_decides(
    fake_api: FakeMessagesAPI,
    claude_bin: str,  # noqa: F811 (the fixture)
    tmp_path: Path,
    usage: int,
) -> None:
    """Forty user skills in use and the project's skill on claude-haiku-4-5: the same skills
    are bare in the CLI's request as in the builtin listing, the new skill among them, the
    used one not."""
    crowded = crowd_context(PDF, 40, usage=float(usage))
    home, project = tmp_path / "home", tmp_path / "project"
    for skill in crowded.installed:
        folder = home / ".claude" / "skills" / skill.name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\ndescription: {skill.description}\n---\nx\n")
    folder = project / ".claude" / "skills" / "pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\ndescription: {PDF.description}\n---\nx\n")
    now = int(time.time() * 1000)
    uses = {s.name: {"usageCount": 1, "lastUsedAt": now} for s in crowded.installed}
    if usage:
        uses["pdf"] = {"usageCount": usage, "lastUsedAt": now}
    (home / ".claude.json").write_text(json.dumps({"skillUsage": uses}))
    body = cli_request(claude_bin, fake_api, project, home, model="claude-haiku-4-5")
    cli_bare = {line[2:] for line in listing_lines(body) if ": " not in line}
    fit = fit_of(crowded, "claude-haiku-4-5")
    ours = {name for name in fit.bare if name in {s.name for s in crowded.own_listing()}}
    assert ours == cli_bare - {"security-review", "init"}
    assert ("pdf" in cli_bare) == (usage == 0)


def test_crowd_sizes_are_items_of_their_own_with_a_curve(
    pytester: pytest.Pytester, fake_api: FakeMessagesAPI
) -> None:
    folder = pytester.path / "skills" / "pdf"
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: pdf\ndescription: {PDF.description}\n---\nx\n")
    rows = [
        {"query": "merge these pdf files into one", "should_trigger": True},
        {"query": "bake a loaf of bread", "should_trigger": False},
    ]
    fake_api.script(rows[0]["query"], ["skill:pdf"] * 20)
    fake_api.script(rows[1]["query"], ["text"] * 20)
    (folder / "evals" / "trigger-eval.json").write_text(json.dumps(rows))
    out = pytester.path / "out.json"
    page = pytester.path / "report.html"
    args = plugin_args(
        folder.parent,
        "-v",
        "--trigger-crowd=10,40",
        f"--trigger-json={out}",
        f"--trigger-report={page}",
    )
    result = pytester.runpytest_subprocess(*args)
    result.stdout.fnmatch_lines(["*pdf[[]00-merge-these-pdf-files-into-one-crowd40[]] PASSED*"])
    result.stdout.fnmatch_lines(
        ["*pdf in a crowd: alone: query recall *; 10 skills: *; 40 skills: *"]
    )
    report = json.loads(out.read_text())
    (curve,) = report["crowd_curves"]
    assert [p["crowd"] for p in curve["points"]] == [0, 10, 40]
    assert sorted(s.get("crowd") or 0 for s in report["skills"]) == [0, 10, 40]
    html = page.read_text()  # the curve as a chart: a point per size and measure, the listing
    chart = html[html.index('<section class="crowds">') :]
    chart = chart[: chart.index("</section>")]
    assert chart.count('<g class="recall">') == 3 and "40 skills" in chart
    assert all(f">{p['listed']}<" in chart for p in curve["points"])
