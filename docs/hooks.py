"""MkDocs hooks of this site (``hooks:`` in ``mkdocs.yml``).

The options page is not written by hand: what stands between the lines
``<!-- skilltrigger:options -->`` and ``<!-- /skilltrigger:options -->`` is replaced by the
tables the package itself makes of every command-line option and ini key, so the site cannot
drift from the code. The page keeps a copy for readers on GitHub; ``python docs/hooks.py``
rewrites it, and the test suite fails when it is stale. There is no fallback: when the
tables cannot be made, the build stops and says why.

The package's docstrings use Sphinx roles (``:class:`~x.Y```), which mkdocstrings leaves as
text; the API page shows them as the code they name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

MARKER = "<!-- skilltrigger:options -->"
END_MARKER = "<!-- /skilltrigger:options -->"
OPTIONS_PAGE = Path(__file__).parent / "reference" / "options.md"

# a Sphinx role before rendered code: ":meth:<code>~pkg.mod.Name.run</code>"
ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):<code>(~?)([^<]*)</code>")


def options_table() -> str:
    """The options table as Markdown, from the installed package (imported only when a page
    asks for it, so that pages without the marker build without the package)."""
    try:
        from pytest_skilltrigger.model.options import options_markdown
    except ImportError as error:
        raise PluginError(
            f"docs/hooks.py: cannot import pytest_skilltrigger.model.options.options_markdown "
            f"({error}). The options page is generated from it; install the package into the "
            f'environment that runs mkdocs (pip install -e ".[test]") and build again.'
        ) from error
    return str(options_markdown()).strip("\n")


def with_options(markdown: str) -> str:
    """The page with the options' tables between its markers (none: the page as it is)."""
    lines = markdown.split("\n")
    stripped = [line.strip() for line in lines]
    if MARKER not in stripped:
        return markdown
    start = stripped.index(MARKER)
    if END_MARKER not in stripped[start:]:
        raise PluginError(f"docs/hooks.py: {MARKER} has no {END_MARKER} after it")
    end = stripped.index(END_MARKER, start)
    return "\n".join([*lines[: start + 1], options_table(), *lines[end:]])


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Put the options' tables, as the installed code declares them, between the markers."""
    return with_options(markdown)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Drop Sphinx roles from rendered docstrings; ``~`` keeps the last name, as in Sphinx."""
    return ROLE.sub(_code_of_role, html)


def _code_of_role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


if __name__ == "__main__":
    OPTIONS_PAGE.write_text(with_options(OPTIONS_PAGE.read_text(encoding="utf-8")), "utf-8")
