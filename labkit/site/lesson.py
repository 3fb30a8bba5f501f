"""The chapter as a lesson: its prose length, reading time and first screen.

A chapter's reading time is computed from its built HTML (so it counts what a reader sees,
after the macros have run), over all the text visible in the first host tab: prose words /
:data:`WORDS_PER_MINUTE`, plus the words of tables and code blocks (commands, outputs, verdict
cells) / :data:`TECHNICAL_WORDS_PER_MINUTE`, plus :data:`MINUTES_PER_FIGURE` per figure (a
chart, a flame graph, a recording). Not counted: the second and later tabs of a host tab set
(another host's copy of the same block), the body of a folded block (``<details>`` without
``open``: its summary is counted), scripts, styles, SVG, the site's navigation and the
first-screen box itself. ``labkit/site/mkdocs_hooks.py`` puts the figure where :func:`lesson_start`
left :data:`READING_MARK`; the tests read the same numbers with :func:`measure`.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

WORDS_PER_MINUTE = 200
"""Reading speed of technical prose (words per minute), the figure issue-tracker style guides and
Medium's reading-time estimate use for English."""
TECHNICAL_WORDS_PER_MINUTE = 150
"""Reading speed of tables and code (words per minute): three quarters of the prose rate. A
word there is a number, a unit, a flag or a symbol that the reader matches to its column
header or to the command it belongs to (slower than prose), while a tool's output is skimmed
for the lines the text points to (faster). No study gives one figure for this mix; this is
our estimate, on the side of a longer stated time."""
MINUTES_PER_FIGURE = 0.5
MAX_MINUTES = 16
"""A chapter's reading time at most (a lesson a newcomer finishes in about 15 minutes, with
the lab running beside it; one minute over, so that a rerun whose generated tables are a few
words longer does not fail the build); reference material goes to the evidence page."""
READING_MARK = "PC-READING-TIME"
"""Placeholder :func:`lesson_start` writes; replaced in the page's HTML by :func:`fill`."""
MAX_WORDS = 3000
MAX_TABLES = 12

_SKIP = {"figure", "script", "style", "svg", "nav", "header", "footer"}
_TECHNICAL = {"pre", "code", "table"}
_WORD = re.compile(r"[^\W_][\w'’.-]*")


_VOID = {"br", "img", "input", "hr", "meta", "link", "source", "wbr", "col", "area", "base", "embed", "track"}


class _Frame:
    """An open element: whether its text is skipped or technical (a table's or code's), whether
    it is another host's copy of a block (the second and later tabs of a host tab set), and, for
    a ``tabbed-content``, how many tabs it has opened so far."""
    __slots__ = ("tag", "skip", "technical", "hidden", "tabs")

    def __init__(self, tag: str, skip: bool, technical: bool, hidden: bool, tabs: int | None):
        self.tag, self.skip, self.technical, self.hidden, self.tabs = tag, skip, technical, hidden, tabs


class _Prose(HTMLParser):
    """Counts an article's visible words (prose, and technical: tables and code), tables and
    figures; skips :data:`_SKIP` elements, the first-screen box, the emulation badges (labels)
    and the body of a closed ``<details>``. A host tab set counts once: only its first tab is
    read."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.words = 0
        self.technical = 0
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
        parent = self.stack[-1] if self.stack else None
        if parent is not None and parent.tag == "details" and parent.tabs == -1 and tag != "summary":
            hidden = True   # the body of a closed fold: only its summary shows
        if not hidden:
            if tag == "table":
                self.tables += 1
            if (tag == "figure" or (tag == "img" and "pc-chart" in classes and "pc-dark" not in classes)
                    or (tag == "object" and "pc-flamegraph" in classes)):
                self.figures += 1  # a chart's dark twin is the same figure; a recording sits in a <figure>
        if tag in _VOID:
            return
        skip = (tag in _SKIP or "pc-lesson-start" in classes or "tabbed-labels" in classes or "pc-emulated" in classes
                or hidden or (parent is not None and parent.skip))
        technical = tag in _TECHNICAL or (parent is not None and parent.technical)
        tabs = 0 if tag == "div" and "tabbed-content" in classes else -1 if tag == "details" and "open" not in a else None
        self.stack.append(_Frame(tag, skip, technical, hidden, tabs))

    def handle_endtag(self, tag):
        if not any(f.tag == tag for f in self.stack):
            return  # a stray end tag
        while self.stack and self.stack.pop().tag != tag:
            pass

    def handle_data(self, data):
        top = self.stack[-1] if self.stack else None
        if top is not None and top.skip:
            return
        n = len(_WORD.findall(data))
        if top is not None and top.technical:
            self.technical += n
        else:
            self.words += n


def article(page_html: str) -> str:
    """The page's article (material's ``md-content__inner``), or the whole text."""
    m = re.search(r'<article class="md-content__inner[^"]*">(.*?)</article>', page_html, re.S)
    return m.group(1) if m else page_html


def measure(page_html: str) -> dict:
    """``{"words", "technical", "tables", "figures", "minutes"}`` of a built page (or an article
    fragment): prose words, words of tables and code, ``<table>`` elements (a host tab set
    counts once), figures (charts, flame graphs, recordings) and the reading time in minutes
    (rounded up; module docstring)."""
    p = _Prose()
    p.feed(article(page_html))
    minutes = (p.words / WORDS_PER_MINUTE + p.technical / TECHNICAL_WORDS_PER_MINUTE
               + MINUTES_PER_FIGURE * p.figures)
    return {"words": p.words, "technical": p.technical, "tables": p.tables, "figures": p.figures,
            "minutes": int(-(-minutes // 1))}


def fill(page_html: str) -> str:
    """Replace :data:`READING_MARK` with the page's reading time ("12 min")."""
    if READING_MARK not in page_html:
        return page_html
    return page_html.replace(READING_MARK, f"{measure(page_html)['minutes']} min")


def _wrap(command: str, width: int = 40) -> str:
    """``command`` broken before its ``--options`` into lines of at most ``width`` characters
    (a longer option stays whole), continued with `` \\`` and indented by four spaces, so that a
    phone shows it without scrolling sideways."""
    parts = [p.strip() for p in re.split(r" (?=--)", command.strip())]
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 1 + len(part) <= width:
            lines[-1] += " " + part
        else:
            lines.append(part)
    return " \\\n    ".join(lines)


def _boot_time(lab: str, where: dict) -> str:
    """"2.8 s on HOST" per host whose result of ``lab`` has ``boot_time`` measurements matching
    ``where`` (their median; "2.8 s, emulated, on HOST" where the CPU was emulated:
    :func:`labkit.stats.claims.emulated`), joined by "; ".

    Raises:
        MacroError: no host has such a measurement.
    """
    import statistics

    from .. import model
    from ..stats import claims
    from ..view import render
    from . import macros
    from .macros.numbers import number
    out = []
    for host, r in macros.build.for_lab(lab):
        ms = model.select(r, "boot_time", where)
        xs = [x for m in ms for x in m["samples"]]
        if xs:
            emu = ", emulated," if claims.emulated(r, ms) else ""   # TCG, not a KVM guest
            out.append(f"{render.esc(number(statistics.median(xs)))} s{emu} on {render.host_label(r['host'], host.title)}")
    if not out:
        raise macros.MacroError(f"lesson_start({lab!r}): no host has boot_time measurements where {where}")
    return "; ".join(out)


def _left_out(m: dict) -> str:
    """The sentence under the quick command naming the groups a quick run leaves out (lab.toml
    ``quick_leaves_out``), or nothing."""
    gone = list(m.get("quick_leaves_out") or {})
    if not gone:
        return ""
    names = ", ".join(f"`{g}`" for g in gone)
    return (f"A quick run leaves out {'the group' if len(gone) == 1 else 'the groups'} {names}; a full run "
            f"(without `--quick`) measures everything, and `--quick --only {gone[0]}` runs one group alone.\n\n")


def lesson_start(lab: str, shell: str | None = None, boot: dict | None = None) -> str:
    """Markdown: the chapter's first-screen box: core reading time (:data:`READING_MARK`, filled
    in from the built page by :func:`fill`), the command that starts the lab in quick mode, then
    ``shell`` when given (a command that opens the case's machine in a shell, without root; with
    ``boot``, a selector of the lab's ``boot_time`` measurements, how long those boots took), then
    what the reader needs (``needs`` in ``labs/<lab>/lab.toml``) and how long the lab ran on each
    host with a result (:func:`labkit.site.macros.lab_time`).

    Raises:
        MacroError: the manifest has no ``needs``, no host has a result of ``lab``, ``shell`` is
        not one line, or ``boot`` selects no measurement.
    """
    from .. import manifest
    from ..view import render
    from . import macros
    m = manifest.load(macros.build.ROOT / "labs" / lab)
    if not m.get("needs"):
        raise macros.MacroError(f"lesson_start: labs/{lab}/lab.toml has no `needs` (what a reader needs to run the lab)")
    needs = "; ".join(m["needs"])
    if shell is not None and (not shell.strip() or "\n" in shell.strip() or "```" in shell):
        raise macros.MacroError(f"lesson_start({lab!r}): `shell` must be one command line, got {shell!r}")
    # The commands come before the list of needs, so that they are on a phone's first screen.
    took = "" if boot is None else f"; boots in {_boot_time(lab, boot)}"
    also = ("" if shell is None else
            f"**Or open the machine in a shell** (no root{took}):\n\n```bash\n{_wrap(shell)}\n```\n\n")
    return (f'<div class="pc-lesson-start" markdown>\n\n'
            f"**Reading:** about {READING_MARK} · **Start the lab now** (quick mode, budgeted at "
            f"{render.esc(macros.runs.duration_text(m['quick_budget_s']))} on 2 cores), and read on while it runs:\n\n"
            f"```bash\nsudo labs/{lab}/run.sh --quick\n```\n\n"
            f"{_left_out(m)}"
            f"{also}"
            f"**You need:** {needs}. Our runs took {macros.lab_time(lab)}.\n\n</div>\n")
