"""How values read for people, the same in every report."""

from __future__ import annotations

import os

from pytest_skilltrigger.model.formatting import (
    describe_chosen,
    display_path,
    escape_html,
    format_ratio,
)


def test_rates_have_two_decimals_and_undefined_ones_say_so() -> None:
    assert format_ratio(0.6666) == "0.67"
    assert format_ratio(1) == "1.00"
    assert format_ratio(None) == "n/a"
    assert format_ratio("x", missing="—") == "—"


def test_what_was_chosen_most_first() -> None:
    assert describe_chosen({"text": 1, "skill:pdf": 2}) == "skill 'pdf' x2, a plain answer x1"
    assert describe_chosen({}) == "nothing"
    assert describe_chosen({"text": 1, "skill:pdf": 2, "tool:Bash": 2}) == (
        "skill 'pdf' x2, tool Bash x2, a plain answer x1"
    )
    assert describe_chosen({"skill:pdf": 3}, exclude="skill:pdf") == "nothing else"


def test_html_escapes_text_and_attributes() -> None:
    assert escape_html('<a href="x">\'&') == "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;"
    assert escape_html(None) == ""


def test_a_folder_reads_relative_to_where_pytest_started(tmp_path) -> None:
    inner = os.path.join(str(tmp_path), "skills", "pdf")
    assert display_path(inner, str(tmp_path)) == os.path.join("skills", "pdf")
    assert display_path(str(tmp_path), str(tmp_path)) == str(tmp_path)  # "." says little
    outside = os.path.dirname(str(tmp_path))
    assert display_path(outside, str(tmp_path)) == outside
