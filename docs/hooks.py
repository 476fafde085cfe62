"""MkDocs hooks of this site (``hooks:`` in ``mkdocs.yml``).

The options page is not written by hand: the line ``<!-- skilltrigger:options -->`` is
replaced by the table the package itself makes of every command-line option and ini key, so
the page cannot drift from the code. There is no fallback: when the table cannot be made,
the build stops and says why.

The package's docstrings use Sphinx roles (``:class:`~x.Y```), which mkdocstrings leaves as
text; the API page shows them as the code they name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

MARKER = "<!-- skilltrigger:options -->"

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


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace the marker line, wherever a page has it, with the options table."""
    lines = markdown.split("\n")
    if MARKER not in (line.strip() for line in lines):
        return markdown
    table = options_table()
    return "\n".join(table if line.strip() == MARKER else line for line in lines)


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Drop Sphinx roles from rendered docstrings; ``~`` keeps the last name, as in Sphinx."""
    return ROLE.sub(_code_of_role, html)


def _code_of_role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"
