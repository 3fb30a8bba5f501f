"""Data tables that skip Markdown during a site build.

The evidence pages hold thousands of table rows (3,255 on fio's); Python-Markdown's table
parser, tree walks and serializer spent about 1.1 of the 1.4 s that page took to convert. A
table whose every cell is plain text (:func:`labkit.site.page_marks.plain`: nothing an inline
pattern would change) needs none of that: during a build (:func:`start`, from
``labkit/site/mkdocs_hooks.py``'s ``on_pre_build``) :func:`table` writes its HTML at once, as
Python-Markdown's ``tables`` extension writes it (:func:`html_table`), keeps it, and puts a token
paragraph in the Markdown instead; :func:`fill` (``on_page_content``) puts the table where the
token's paragraph is. A table with any other cell, and every table outside a build (a test
calling a macro), is a pipe table (:func:`labkit.view.render.markdown_table`). A token that is
not alone in its paragraph is never filled in, and the build fails (:func:`left`):
tests/test_fast_tables.py builds tables both ways, in tabs and folds, and requires the same HTML.
"""

from __future__ import annotations

import itertools
import re

from ..view import render
from .page_marks import plain

_active = False
_tokens = itertools.count(1)
_kept: dict[str, str] = {}            # token -> the table's HTML, until a page takes it
_TOKEN = re.compile(r"<p>(pcbtable\d+x)</p>")
_ANY_TOKEN = re.compile(r"pcbtable\d+x")


def start() -> None:
    """Write plain tables as HTML from now on (a build starts), forgetting an earlier build's."""
    global _active
    _active = True
    _kept.clear()


def finish() -> list[str]:
    """Stop (the build ends) and return the tokens no page took (each one a table lost)."""
    global _active
    _active = False
    lost = sorted(_kept)
    _kept.clear()
    return lost


def _text(cell) -> str:
    """A cell's text as the pipe table gives it to Python-Markdown (line breaks as spaces), stripped."""
    return str(cell).replace("\n", " ").strip()


def html_table(header: list[str], rows: list[list[str]], align: list[str] | None) -> str:
    """The HTML Python-Markdown's ``tables`` extension writes for this table (rows as long as the
    header, cells of plain text only): ``style="text-align: right;"`` on each cell of a "right"
    column, a newline after each element."""
    styles = ['' if a != "right" else ' style="text-align: right;"' for a in (align or ["left"] * len(header))]
    out = ["<table>", "<thead>", "<tr>"]
    out += [f"<th{s}>{_text(h)}</th>" for h, s in zip(header, styles)]
    out += ["</tr>", "</thead>", "<tbody>"]
    for row in rows:
        out += ["<tr>", *(f"<td{s}>{_text(c)}</td>" for c, s in zip(row, styles)), "</tr>"]
    out += ["</tbody>", "</table>"]
    return "\n".join(out)


def table(header: list[str], rows: list[list[str]], align: list[str] | str | None = "auto") -> str:
    """Markdown for a table: during a build, when every header and cell is plain text and every
    row (and ``align``) as long as the header, a token paragraph that :func:`fill` replaces by
    :func:`html_table`; else :func:`labkit.view.render.markdown_table` of the same arguments
    (``align`` as it takes it).
    The caller puts it in a block of its own, as a pipe table needs."""
    if align == "auto":
        align = render.table_align(rows)
    if (not _active or any(len(r) != len(header) for r in rows) or (align and len(align) != len(header))
            or not all(plain(_text(c)) for c in itertools.chain(header, *rows))):
        return render.markdown_table(header, rows, align)
    token = f"pcbtable{next(_tokens)}x"
    _kept[token] = html_table(header, rows, align)
    return token


def fill(html: str) -> str:
    """``html`` with each token paragraph of :func:`table` replaced by its table.

    Raises:
        ValueError: a token of no table of this build (a page rendered twice, or an old one)."""
    def put(m: re.Match) -> str:
        if m.group(1) not in _kept:
            raise ValueError(f"table {m.group(1)} belongs to no table of this build")
        return _kept.pop(m.group(1))
    return _TOKEN.sub(put, html)


def left(html: str) -> bool:
    """Whether ``html`` still holds a table's token (one not alone in its paragraph)."""
    return _ANY_TOKEN.search(html) is not None
