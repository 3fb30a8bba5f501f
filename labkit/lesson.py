"""The chapter as a lesson: its prose length, reading time and first screen.

A chapter's core reading time is computed from its built HTML (so it counts what a reader
reads, after the macros have run): prose words / :data:`WORDS_PER_MINUTE` plus
:data:`MINUTES_PER_FIGURE` per figure (a chart, a flame graph, a recording). Prose is the text
of the page's article outside code blocks, tables, figures, folded blocks (``<details>``),
scripts and the first-screen box itself. ``labkit/mkdocs_hooks.py`` puts the figure where
:func:`lesson_start` left :data:`READING_MARK`; the tests read the same numbers with
:func:`measure`.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

WORDS_PER_MINUTE = 200
"""Reading speed of technical prose (words per minute), the figure issue-tracker style guides and
Medium's reading-time estimate use for English."""
MINUTES_PER_FIGURE = 0.5
READING_MARK = "PC-READING-TIME"
"""Placeholder :func:`lesson_start` writes; replaced in the page's HTML by :func:`fill`."""
MAX_WORDS = 3000
MAX_TABLES = 12

_SKIP = {"pre", "code", "table", "figure", "details", "script", "style", "svg", "nav", "header", "footer"}
_WORD = re.compile(r"[^\W_][\w'’.-]*")


_VOID = {"br", "img", "input", "hr", "meta", "link", "source", "wbr", "col", "area", "base", "embed", "track"}


class _Frame:
    """An open element: whether its text is prose, whether it is another host's copy of a
    block (the second and later tabs of a host tab set), and, for a ``tabbed-content``, how many
    tabs it has opened so far."""
    __slots__ = ("tag", "skip", "hidden", "tabs")

    def __init__(self, tag: str, skip: bool, hidden: bool, tabs: int | None):
        self.tag, self.skip, self.hidden, self.tabs = tag, skip, hidden, tabs


class _Prose(HTMLParser):
    """Counts an article's prose words (outside :data:`_SKIP` elements, the first-screen box
    and the emulation badges, which are labels), tables and figures. A host tab set counts
    once: only its first tab is read."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.words = 0
        self.tables = 0
        self.figures = 0
        self.stack: list[_Frame] = []

    def _hidden(self) -> bool:
        return bool(self.stack) and self.stack[-1].hidden

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        hidden = self._hidden()
        if tag == "div" and "tabbed-block" in classes:
            owner = next((f for f in reversed(self.stack) if f.tabs is not None), None)
            if owner is not None:
                owner.tabs += 1
                hidden = hidden or owner.tabs > 1
        if not hidden:
            if tag == "table":
                self.tables += 1
            if (tag == "figure" or (tag == "img" and "pc-chart" in classes and "pc-dark" not in classes)
                    or (tag == "object" and "pc-flamegraph" in classes)):
                self.figures += 1  # a chart's dark twin is the same figure; a recording sits in a <figure>
        if tag in _VOID:
            return
        skip = (tag in _SKIP or "pc-lesson-start" in classes or "tabbed-labels" in classes or "pc-emulated" in classes
                or hidden
                or (bool(self.stack) and self.stack[-1].skip))
        self.stack.append(_Frame(tag, skip, hidden, 0 if tag == "div" and "tabbed-content" in classes else None))

    def handle_endtag(self, tag):
        if not any(f.tag == tag for f in self.stack):
            return  # a stray end tag
        while self.stack and self.stack.pop().tag != tag:
            pass

    def handle_data(self, data):
        if not (self.stack and self.stack[-1].skip):
            self.words += len(_WORD.findall(data))


def _article(page_html: str) -> str:
    """The page's article (material's ``md-content__inner``), or the whole text."""
    m = re.search(r'<article class="md-content__inner[^"]*">(.*?)</article>', page_html, re.S)
    return m.group(1) if m else page_html


def measure(page_html: str) -> dict:
    """``{"words", "tables", "figures", "minutes"}`` of a built page (or an article fragment):
    prose words, ``<table>`` elements in the HTML (a host tab set that fetches its other tabs on
    demand counts once), figures (charts, flame graphs, recordings: every host's), and the core reading time in minutes (rounded up)."""
    p = _Prose()
    p.feed(_article(page_html))
    minutes = p.words / WORDS_PER_MINUTE + MINUTES_PER_FIGURE * p.figures
    return {"words": p.words, "tables": p.tables, "figures": p.figures, "minutes": int(-(-minutes // 1))}


def fill(page_html: str) -> str:
    """Replace :data:`READING_MARK` with the page's reading time ("12 min")."""
    if READING_MARK not in page_html:
        return page_html
    return page_html.replace(READING_MARK, f"{measure(page_html)['minutes']} min")


def lesson_start(lab: str) -> str:
    """Markdown: the chapter's first-screen box: core reading time (:data:`READING_MARK`, filled
    in from the built page by :func:`fill`), how long the lab ran on each host with a result
    (:func:`labkit.macros.lab_time`), what the reader needs (``needs`` in ``labs/<lab>/lab.toml``)
    and the command that starts the lab in quick mode.

    Raises:
        MacroError: the manifest has no ``needs``, or no host has a result of ``lab``.
    """
    from . import macros, manifest, render
    m = manifest.load(macros.ROOT / "labs" / lab)
    if not m.get("needs"):
        raise macros.MacroError(f"lesson_start: labs/{lab}/lab.toml has no `needs` (what a reader needs to run the lab)")
    needs = "; ".join(m["needs"])
    return (f'<div class="pc-lesson-start" markdown>\n\n'
            f"**Reading:** about {READING_MARK} · **You need:** {needs}\n\n"
            f"**Start the lab now** (quick mode, budgeted at {render.esc(macros._duration(m['quick_budget_s']))}"
            f" on 2 cores), and read on while it runs:\n\n"
            f"```bash\nsudo labs/{lab}/run.sh --quick\n```\n\n"
            f"Our runs took {macros.lab_time(lab)}.\n\n</div>\n")
