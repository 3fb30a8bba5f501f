"""labkit.site.fast_tables: during a build a table of plain cells is written as HTML at once and
put where its token's paragraph is; the page must be the HTML Python-Markdown makes of the pipe
table, with every extension mkdocs.yml enables, at the top of a page, in host tabs and in a
folded block. Outside a build, or with a cell Markdown would change, the table is a pipe table.
The cells are drawing inputs, not measurements."""

from __future__ import annotations

from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

from labkit.site import fast_tables
from labkit.view import render

ROOT = Path(__file__).resolve().parent.parent

HEADER = ["experiment", "median (MiB/s)", "engine", "end_fsync", "min – max (MiB/s)", "samples"]
ROWS = [["original", "77.73", "libaio", "0", "69.53 – 83.70", "8"],
        ["sparse", "1,204", "io_uring", "1", "1,100 – 1,300", "5"],
        ["empty cells", "", "", "", "", "3"],
        ["vm: kvm; container: docker", "", "", "", "", ""]]


@pytest.fixture(scope="module")
def convert():
    cfg = load_config(str(ROOT / "mkdocs.yml"))
    return lambda text: markdown.Markdown(extensions=cfg["markdown_extensions"],
                                          extension_configs=cfg["mdx_configs"]).convert(text)


@pytest.fixture
def building():
    fast_tables.start()
    yield
    assert fast_tables.finish() == []


def _page(table) -> str:
    """A page that holds a table at the top, in the second of two host tabs, and folded: each
    one ``table()``."""
    return (f"# T\n\nSome text.\n\n{table()}\n\n"
            + render.tabs([("host-a", "A note."), ("host-b", f"Before.\n\n{table()}\n\nAfter.")])
            + "\n\n" + render.admonition("note", "All of it", table(), folded=True) + "\n")


@pytest.mark.parametrize("align", ["auto", None, ["left", "right", "left", "right", "right", "right"]])
def test_a_plain_table_is_the_html_markdown_makes_of_it(convert, building, align):
    slow = convert(_page(lambda: render.markdown_table(HEADER, ROWS, align)))
    page = _page(lambda: fast_tables.table(HEADER, ROWS, align))
    assert page.count("pcbtable") == 3 and "|" not in page
    filled = fast_tables.fill(convert(page))
    assert filled == slow
    assert not fast_tables.left(filled)


def test_a_cell_markdown_would_change_keeps_the_pipe_table(building):
    for cell in ("`code`", "_em_", "a & b", "<span>x</span>", ":smile:", "a\\_b"):
        rows = [["1", cell]]
        assert fast_tables.table(["a", "b"], rows) == render.markdown_table(["a", "b"], rows)


def test_outside_a_build_every_table_is_a_pipe_table():
    assert fast_tables.table(HEADER, ROWS) == render.markdown_table(HEADER, ROWS)


def test_a_row_or_alignment_of_another_length_keeps_the_pipe_table(building):
    """Python-Markdown pads a short row and cuts a long one, and an auto alignment of ragged rows
    is short: such a table stays what it was."""
    for rows, align in (([["a", "1"], ["b"]], "auto"), ([["a", "1"], ["b", "2", "3"]], None), ([["a", "1"]], ["left"])):
        assert fast_tables.table(["x", "y"], rows, align) == render.markdown_table(["x", "y"], rows, align)


def test_a_token_not_alone_in_its_paragraph_is_left_and_fails_the_build(convert):
    fast_tables.start()
    token = fast_tables.table(["a"], [["1"]])
    html = fast_tables.fill(convert(f"A caption on the line before\n{token}\n"))
    assert fast_tables.left(html)
    assert fast_tables.finish() == [token]           # the build's end names the lost table
    with pytest.raises(ValueError, match="belongs to no table of this build"):
        fast_tables.fill(f"<p>{token}</p>")
