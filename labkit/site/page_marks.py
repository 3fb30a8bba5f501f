"""A Markdown extension (mkdocs.yml ``markdown_extensions: labkit.site.page_marks``) that marks two
kinds of block in a page's element tree, after the block parsers made them and before the tree is
written as HTML:

- pymdownx.tabbed's tab sets: ``data-tabs`` becomes ``data-pc-tabs``. mkdocs-material's runtime
  mounts every ``[data-tabs]`` element (a ResizeObserver, an IntersectionObserver and layout
  reads per set); renamed, the sets switch by CSS alone (docs/assets/casebook.css) and
  docs/assets/casebook.js links them by tab title. DESIGN.md ("Pages in the browser") gives the
  measurement that keeps this.
- pymdownx.details' folds: ``data-search-exclude``, which mkdocs-material's search plugin honours,
  so that exercises' predictions and verdicts and long outputs stay out of the search index that
  every page downloads. A fold written as raw HTML (a claim's evidence in a table cell) is not
  in the tree; it sits in a measured-data block, which the search plugin never sees
  (``labkit.view.render.tabs``, ``labkit/site/mkdocs_hooks.py`` sets those blocks aside while
  the plugin parses a page).

It also spares the inline processor the table cells it would leave as they are: a cell whose
text no enabled inline pattern changes (:func:`plain`) becomes
an ``AtomicString``, which Python-Markdown's inline processor skips and its serializer writes
exactly as it writes a plain string. The evidence pages hold thousands of table rows of numbers
and case values, tens of thousands of cells on which the inline processor would try every
pattern. tests/test_page_marks.py builds cells both ways and requires the same HTML.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as etree

from markdown import Extension
from markdown.treeprocessors import Treeprocessor
from markdown.util import AtomicString

SEARCH_EXCLUDE = "data-search-exclude"

PLAIN = re.compile(r"(?:[^`\\*_\[\]!<>&{}\n]|(?<=\w)_(?=\w))*")
"""The characters of a text that no inline pattern of mkdocs.yml's extensions changes (matched
whole, with :data:`SHORTCODE` absent: :func:`plain`): none of backtick (code, inlinehilite),
backslash (escapes, the table's ``\\|``), ``*`` (emphasis), ``[ ] !`` (links, images, footnote
references), ``< > &`` (raw HTML, autolinks, entities), ``{ }`` (attr_list), and no line break;
``_`` only between two word characters (``end_fsync``: Python-Markdown's underscore emphasis
opens only after a non-word character and closes only before one). ``~ ^ = +`` are plain
because no enabled extension gives them a meaning (tests/test_page_marks.py renders them both
ways, so enabling one that does fails there)."""

SHORTCODE = re.compile(r":[+\-\w]+:")
"""pymdownx.emoji's shortcode (its ``RE_EMOJI``): a text with a colon is plain without one."""


def plain(text: str) -> bool:
    """Whether no inline pattern changes ``text`` (:data:`PLAIN`, :data:`SHORTCODE`)."""
    return PLAIN.fullmatch(text) is not None and SHORTCODE.search(text) is None


def _mark(root) -> None:
    for el in root.iter("div"):
        if "data-tabs" in el.attrib and "tabbed-set" in (el.get("class") or "").split():
            el.set("data-pc-tabs", el.attrib.pop("data-tabs"))
    for el in root.iter("details"):
        el.set(SEARCH_EXCLUDE, None)   # Python-Markdown writes a bare attribute for the value None


class _Marks(Treeprocessor):
    def run(self, root):
        _mark(root)
        # md_in_html keeps the element tree of a raw HTML block with Markdown inside
        # (``<div markdown>``) in the stash, written out after the treeprocessors
        for block in self.md.htmlStash.rawHtmlBlocks:
            if isinstance(block, etree.Element):
                _mark(block)
        return None


class PlainCells(Treeprocessor):
    """Table cells with :func:`plain` text and no child element: text made ``AtomicString``."""

    def run(self, root):
        """Mark the plain cells under ``root`` (an element tree), in place; returns None."""
        for tag in ("td", "th"):
            for el in root.iter(tag):
                text = el.text
                if text and len(el) == 0 and not isinstance(text, AtomicString) and plain(text):
                    el.text = AtomicString(text)
        return None


class PageMarks(Extension):
    def extendMarkdown(self, md):
        # priority 30: after the block parsers built the tables, before the inline processor (20)
        md.treeprocessors.register(PlainCells(md), "pc_plain_cells", 30)
        # priority 1: after every treeprocessor of the extensions in use (pymdownx.tabbed's
        # tab_slugs runs at 4, the toc at 20), before the tree is serialized
        md.treeprocessors.register(_Marks(md), "pc_page_marks", 1)


def makeExtension(**kwargs):
    return PageMarks(**kwargs)
