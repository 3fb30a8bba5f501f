"""mkdocs hooks: serve every result's artifacts (flame graphs, folded stacks, casts, logs)
at ``results/<host>/<path>`` in the built site, fail the build on an invalid result, write the
chart figures the macros drew next to their pages, keep measured data out of the search index,
fetch a data page's other hosts' tabs and large closed blocks when shown, leave the terminal
player's files to the pages with a recording (labkit/site/theme/main.html), and
under ``mkdocs serve`` rebuild when a lab writes a result (``local-results/`` and
``$PERF_CASEBOOK_RESULTS`` are watched too) and build with labkit's current code after an edit
(:func:`fresh_labkit`).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import re
import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound
from selectolax.lexbor import LexborHTMLParser

from labkit import results
from labkit.site import evidence, fast_tables, lesson
from labkit.site.macros import beside
from labkit.site.macros.build import page_dir
from labkit.view import charts, render

_PLAYER = re.compile(r"```asciinema-player\n(.*?)\n```", re.S)
# What mkdocs-asciinema-player's on_config adds to extra_css / extra_javascript, for every page.
_PLAYER_FILES = {"css": ("css/terminal-player.css", "css/asciinema-player.css"), "js": ("js/asciinema-player.min.js",)}


_LABKIT = Path(__file__).resolve().parents[1]   # labkit/: every module, not only the site's
_LOADED: tuple | None = None
"""The fingerprint (:func:`_fingerprint`) of labkit's sources when its modules were imported."""


def _fingerprint() -> tuple:
    """(path, mtime in ns, size) of every Python file of labkit, sorted."""
    out = []
    for p in sorted(_LABKIT.rglob("*.py")):
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


def fresh_labkit() -> bool:
    """Make the coming build use labkit's code as it is on disk. ``mkdocs serve`` rebuilds in one
    long-lived process, where mkdocs-macros imports ``labkit.site.macros`` once and this hook module
    is loaded once: after an edit of any labkit source, every ``labkit.*`` module is dropped from
    ``sys.modules`` (with the in-memory caches they hold) and this module's own references are
    imported again, so that the rebuild runs the edited code. True when it reloaded."""
    global _LOADED, charts, evidence, fast_tables, lesson, render, results, beside, page_dir
    now = _fingerprint()
    changed = _LOADED is not None and now != _LOADED
    _LOADED = now
    if not changed:
        return False
    for name in [n for n in sys.modules if n == "labkit" or n.startswith("labkit.")]:
        del sys.modules[name]
    charts, evidence, lesson, render, results = (importlib.import_module(f"labkit.{m}") for m in
                                                 ("view.charts", "site.evidence", "site.lesson", "view.render", "results"))
    beside = importlib.import_module("labkit.site.macros.beside")
    fast_tables = importlib.import_module("labkit.site.fast_tables")
    page_dir = importlib.import_module("labkit.site.macros.build").page_dir
    return True


@event_priority(100)  # before mkdocs-macros imports labkit.site.macros (fresh_labkit)
def on_config(config):
    """Build with labkit's current code (:func:`fresh_labkit`), then fill the nav's "Cases"
    section from the labs' manifests (``labs/<lab>/lab.toml``: title, order), one chapter
    ``cases/<lab>.md`` each, so that a new lab needs no edit of mkdocs.yml.

    Raises:
        PluginError: mkdocs.yml's nav has no "Cases" section, or a manifest is malformed.
    """
    fresh_labkit()
    from labkit import manifest
    try:
        labs = manifest.labs(results.ROOT)
    except manifest.ManifestError as exc:
        raise PluginError(str(exc)) from None
    fill = {"Cases": [{m["title"]: f"cases/{m['name']}.md"} for m in labs],
            "Evidence": [{m["title"]: evidence.page_src(m["name"])} for m in labs]}
    for entry in config["nav"] or []:
        if isinstance(entry, dict):
            for key in set(entry) & set(fill):
                entry[key] = fill.pop(key)
    if fill:
        raise PluginError(f'mkdocs.yml: the nav needs the sections {sorted(fill)} (filled from labs/*/lab.toml)')
    return config


_EVIDENCE_TITLES: dict[str, str] = {}
"""``{url: title}`` of the evidence pages (set by :func:`on_files`), for the search index."""


def on_files(files, config):
    """Add each lab's evidence page (:func:`labkit.site.evidence.page_markdown`), ahead of the other
    pages, and each artifact file of each host to the site (``results/<label>/<artifact path>``).

    Raises:
        FileNotFoundError: a result names an artifact that is not on disk.
    """
    from labkit import manifest
    _EVIDENCE_TITLES.clear()
    for m in manifest.labs(results.ROOT):
        f = File.generated(config, evidence.page_src(m["name"]), content=evidence.page_markdown(m["name"], results.ROOT))
        files.append(f)
        _EVIDENCE_TITLES[f.url] = evidence.page_title(m)
    for host in results.load_hosts(results.ROOT):
        for result in host.results.values():
            for art in result["artifacts"]:
                src = host.dir / art["path"]
                if not src.is_file():
                    raise FileNotFoundError(f"{host.dir}/{result['lab']}.json names artifact {art['path']}, which is missing")
                files.append(File.generated(config, f"results/{host.label}/{art['path']}", abs_src_path=str(src)))
    # mkdocs renders pages' Markdown in the order of ``files``: evidence pages first, so that
    # their charts (most of the site's) are drawn beside the build while the chapters render
    # (labkit.site.macros.beside). The nav, and so every page's output, does not depend on it.
    evidence_first = [f for f in files if f.url in _EVIDENCE_TITLES]
    return Files([*evidence_first, *(f for f in files if f.url not in _EVIDENCE_TITLES)])


@event_priority(100)  # before mkdocs-asciinema-player, which drops a bad block silently
def on_page_markdown(markdown, page, config, files):
    """Fail the build on a hand-written asciinema-player block that is not valid JSON or
    whose ``file`` is missing (the player plugin would drop it from the page without an error)."""
    for block in _PLAYER.findall(markdown):
        try:
            conf = json.loads(block)
        except ValueError as exc:
            raise PluginError(f"{page.file.src_uri}: asciinema-player block is not JSON: {exc}") from None
        if "file" not in conf:
            raise PluginError(f"{page.file.src_uri}: asciinema-player block has no 'file'")
    return markdown


def on_env(env, config, files):
    """Keep the theme's compiled templates between builds: a Jinja bytecode cache in the build
    cache (``.cache/jinja``, :func:`labkit.model.cache_dir`). mkdocs makes a new theme environment
    for every build, which compiled mkdocs-material's 50 templates each time (about half a
    second); Jinja checks each entry against its template's source, so an edited or upgraded
    template compiles afresh. Nothing is kept when the build cache is off."""
    import jinja2
    from labkit import model
    folder = model.cache_dir("jinja")
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(folder))
        except OSError:
            pass   # a read-only checkout compiles every build
    return env


def on_pre_build(config):
    """Forget the figures, folds and tables of an earlier build (``mkdocs serve`` builds again in one process),
    draw the charts the cache lacks beside the build (:mod:`labkit.site.macros.beside`), and
    take the terminal player's files (:data:`_PLAYER_FILES`, ~200 KB, 65 KB compressed) out of
    every page: ``config.extra.pc_player`` (``{"css": [...], "js": [...]}``, site paths) keeps
    them for labkit/site/theme/main.html, which names them on a page with a recording only.

    Raises:
        PluginError: Pygments does not know the ``pcb-step`` lexer (labkit/site/lexer.py, registered by
            pyproject.toml's entry point when labkit is installed): pymdownx.highlight would
            quietly show every step output as plain text.
    """
    try:
        get_lexer_by_name("pcb-step")
    except ClassNotFound:
        raise PluginError("Pygments has no 'pcb-step' lexer: labkit is not installed in this Python "
                          "(make setup, or pip install --no-deps -e .)") from None
    charts.take()
    _FOLDS.clear()
    _ASIDE.clear()
    beside.start()
    fast_tables.start()
    player = {}
    for kind, key in (("css", "extra_css"), ("js", "extra_javascript")):
        player[kind] = [str(x) for x in config[key] if str(x) in _PLAYER_FILES[kind]]
        config[key] = [x for x in config[key] if str(x) not in _PLAYER_FILES[kind]]
    config["extra"]["pc_player"] = player


FOLD_MIN_CHARS = 4_000  # a closed block with more HTML than this (a table of a dozen rows) is fetched when opened
_FOLDS: dict[str, str] = {}  # site path -> HTML fragment, written by on_post_build
# Data pages: the evidence pages (labkit/site/evidence.py) hold every measurement of every host, 0.5-1.9
# MB of HTML and up to 59,000 elements; the host comparison, every lab's. Whole, fio_engines'
# evidence page took 4.3 s to load on the development VM (13 s with the CPU slowed 4x) and
# Lighthouse timed out on it; with other hosts' tabs and large closed blocks fetched when shown
# (lazy_tabs, lazy_folds) it has 27,500 elements. Chapters and the other pages are whole.
LAZY_PAGES = (f"{evidence.PREFIX}/", "compare.md")
TAB_MIN_CHARS = 500  # another host's tab longer than this (a table of a few rows) is fetched when shown

# The page's HTML is parsed as a fragment in a <div> (the HTML Standard's fragment parsing, by
# lexbor through selectolax), changed in the tree and written back (selectolax's serializer: the
# markup of a data page comes out equivalent, not byte for byte the same, e.g. "&para;" as "¶").


def _annotated(nodes: list) -> bool:
    """Whether ``nodes`` (and what they hold) have what mkdocs-material turns into code
    annotations (content.code.annotate): a block of class ``annotate``, or a code block
    (``<div><pre>…</pre></div>``) followed by an ordered list, with only empty paragraphs
    between (material's findList). Material builds annotations once, at page load
    (mountContent), on the blocks in the page: a block fetched later would show its markers as
    literal "# (1)!" and its notes as a plain list, so such a block is never fetched."""
    for top in nodes:
        if not top.is_element_node:
            continue
        if top.css_matches(".annotate") or top.css_first(".annotate") is not None:
            return True
        for block in [top, *top.css("div")]:
            last = block.last_child
            while last is not None and last.is_text_node and not last.text_content.strip():
                last = last.prev
            if block.tag != "div" or last is None or last.tag != "pre":
                continue
            after = block.next
            while after is not None and (after.is_text_node and not after.text_content.strip()
                                         or after.tag == "p" and not after.attributes and not after.inner_html.strip()):
                after = after.next
            if after is not None and after.tag == "ol":
                return True
    return False


def _outermost(nodes: list, tag: str, cls: str | None = None) -> list:
    """The nodes that have no ancestor ``tag`` (of class ``cls``)."""
    def inside(n) -> bool:
        p = n.parent
        while p is not None:
            if p.tag == tag and (cls is None or cls in (p.attributes.get("class") or "").split()):
                return True
            p = p.parent
        return False
    return [n for n in nodes if not inside(n)]


def _children(node, tag: str, cls: str | None = None) -> list:
    """``node``'s child elements ``tag`` (of class ``cls``)."""
    out, child = [], node.child
    while child is not None:
        if child.tag == tag and (cls is None or cls in (child.attributes.get("class") or "").split()):
            out.append(child)
        child = child.next
    return out


def _fragment(inner: str, page_dir: str, store: dict[str, str]) -> str:
    """Keep ``inner`` as the fragment ``<page_dir>fold-<hash>.html`` in ``store`` and return the
    placeholder docs/assets/casebook.js replaces with it (without JavaScript, a link to it)."""
    name = f"fold-{hashlib.sha1(inner.encode()).hexdigest()[:12]}.html"
    store[page_dir + name] = inner
    return (f'\n<div class="pc-fold" data-pc-fold="{name}"><p>Loading… '
            f'(<a href="{name}">the folded content on its own</a>)</p></div>\n')


def _fold_closed_blocks(doc, page_dir: str, store: dict[str, str], min_chars: int) -> int:
    """:func:`lazy_folds` on the parsed page ``doc``; how many blocks it moved."""
    moved = 0
    for details in _outermost(doc.css("details:not([open])"), "details"):
        summary = next(iter(_children(details, "summary")), None)
        if summary is None:
            continue
        body = []
        node = summary.next
        while node is not None:
            body.append(node)
            node = node.next
        inner = "".join(n.html for n in body)
        if len(inner) < min_chars or _annotated(body):
            continue
        details.inner_html = summary.html + _fragment(inner, page_dir, store)
        moved += 1
    return moved


def _fold_later_tabs(doc, page_dir: str, store: dict[str, str], min_chars: int) -> int:
    """:func:`lazy_tabs` on the parsed page ``doc``; how many tabs it moved."""
    moved = 0
    for tab_set in _outermost(doc.css("div.tabbed-set[data-pc-tabs]"), "div", "tabbed-set"):
        blocks = [b for c in _children(tab_set, "div", "tabbed-content") for b in _children(c, "div", "tabbed-block")]
        for block in blocks[1:]:
            inner = block.inner_html
            if len(inner) < min_chars or _annotated(list(block.iter(include_text=True))):
                continue
            block.inner_html = _fragment(inner, page_dir, store)
            moved += 1
    return moved


def _parse(html: str):
    return LexborHTMLParser(html, is_fragment=True)


def lazy_folds(html: str, page_dir: str, store: dict[str, str], min_chars: int = FOLD_MIN_CHARS) -> str:
    """Move the contents of each large closed ``<details>`` that no other ``<details>`` holds (a
    source listing, a long output: more than ``min_chars`` characters of HTML after its
    ``<summary>``) into a fragment file ``<page_dir>fold-<hash>.html`` (kept in ``store``, site
    path → HTML) and leave a placeholder that docs/assets/casebook.js replaces with the fragment
    when the reader opens the block; without JavaScript the placeholder links to the fragment.
    The page's DOM stays small: mkdocs-material's start-up and the browser's layout cost grow
    with every element, folded or not. A block with code annotations stays in the page
    (:func:`_annotated`). ``html`` comes back as it was when no block moved."""
    doc = _parse(html)
    return doc.html if _fold_closed_blocks(doc, page_dir, store, min_chars) else html


def lazy_tabs(html: str, page_dir: str, store: dict[str, str], min_chars: int = TAB_MIN_CHARS) -> str:
    """Move the contents of every tab but the first of each host tab set (``data-pc-tabs``,
    :mod:`labkit.site.page_marks`) that no other tab set holds into a fragment file, as
    :func:`lazy_folds` does for closed blocks, when they are longer than ``min_chars``
    characters of HTML and hold no code annotations (:func:`_annotated`). Only the first host's
    tables are in the page at load; docs/assets/casebook.js fetches another host's when its tab
    is shown.

    A hidden tab is not drawn, but its HTML is downloaded and parsed, and mkdocs-material's
    start-up walks it, at load: on fio_engines' evidence page, the other host's measurement
    tables are half of its 59,000 elements."""
    doc = _parse(html)
    return doc.html if _fold_later_tabs(doc, page_dir, store, min_chars) else html


def lazy_parts(html: str, page_dir: str, store: dict[str, str]) -> str:
    """:func:`lazy_folds`, then :func:`lazy_tabs`, on one parse of ``html``."""
    doc = _parse(html)
    moved = _fold_closed_blocks(doc, page_dir, store, FOLD_MIN_CHARS)
    moved += _fold_later_tabs(doc, page_dir, store, TAB_MIN_CHARS)
    return doc.html if moved else html


def on_page_content(html, page, config, files):
    """Fill in the chapter's reading time (:func:`labkit.site.lesson.fill`), and keep measured data
    (the blocks :func:`labkit.view.render.tabs` marks with the comments :data:`labkit.view.render.DATA_OPEN`
    and :data:`labkit.view.render.DATA_CLOSE`) out of the search index that every page downloads
    (each block is set aside while the search plugin parses the page: :func:`set_aside`), the
    prose staying searchable. Folds (``<details>``) carry material's ``data-search-exclude``
    mark from :mod:`labkit.site.page_marks`."""
    return set_aside(lesson.fill(fast_tables.fill(html)), page)


_DATA_MARK = re.compile(f"{re.escape(render.DATA_OPEN)}|{re.escape(render.DATA_CLOSE)}")
_HEADING = re.compile(r"<h[1-6][\s>]")
_ASIDE_MARK = re.compile(r"<!--pc-aside:(\d+)-->")
_SEARCH_ATTR = re.compile(r"\s?data-search-\w+=\"[^\"]+\"")   # what material's search plugin strips after indexing
_ASIDE: dict[str, list[str]] = {}
"""Site page path → the data blocks :func:`set_aside` took out of its HTML until :func:`put_back`."""


def _data_divs(html: str) -> str:
    """``html`` with each data block's comments (:data:`labkit.view.render.DATA_OPEN`,
    :data:`labkit.view.render.DATA_CLOSE`) as the ``<div class="pc-data" data-search-exclude>`` that
    material's search plugin honours, and its end."""
    return html.replace(render.DATA_OPEN, '<div class="pc-data" data-search-exclude>').replace(render.DATA_CLOSE, "</div>")


def set_aside(html: str, page) -> str:
    """``html`` with each outermost data block (from a :data:`labkit.view.render.DATA_OPEN` comment to
    its matching :data:`labkit.view.render.DATA_CLOSE`) replaced by a comment that names it, the
    blocks kept for :func:`put_back`, and every other block's comments as their ``<div>``
    (:func:`_data_divs`). material's search plugin honours ``data-search-exclude`` only up to the
    block's first nested ``</div>`` (its parser compares elements by tag), so it indexed the rest of
    a block; set aside, no block is parsed at all, and the plugin's parse takes half the time. A
    block that holds a heading, which starts a section of the index, stays for the plugin.
    ``page``: the mkdocs page, whose ``file.url`` keys the blocks until :func:`put_back`."""
    blocks: list[str] = []
    out: list[str] = []
    depth = start = pos = 0
    for m in _DATA_MARK.finditer(html):
        if m.group() == render.DATA_OPEN:
            if depth == 0:
                start = m.start()
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0 and not _HEADING.search(html, start, m.end()):
                out += [html[pos:start], f"<!--pc-aside:{len(blocks)}-->"]
                blocks.append(html[start:m.end()])
                pos = m.end()
    out.append(html[pos:])
    _ASIDE[page.file.url] = blocks
    return _data_divs("".join(out))


def put_back(html: str, page) -> str:
    """``html`` with the data blocks :func:`set_aside` took out back in place, as ``<div>`` blocks
    (:func:`_data_divs`) whose attributes are as the search plugin leaves a page's (:data:`_SEARCH_ATTR`
    removed).

    Raises:
        PluginError: a block's comment is missing or repeated (another hook changed it).
    """
    blocks = _ASIDE.pop(page.file.url, [])
    seen: list[int] = []

    def back(m: re.Match) -> str:
        seen.append(int(m.group(1)))
        return _SEARCH_ATTR.sub("", _data_divs(blocks[int(m.group(1))]))
    html = _ASIDE_MARK.sub(back, html)
    if sorted(seen) != list(range(len(blocks))):
        raise PluginError(f"{page.file.src_uri}: {len(blocks)} data blocks set aside, {len(seen)} put back")
    return html


def on_page_context(context, page, config, nav):
    """On a data page (:data:`LAZY_PAGES`), fetch large closed blocks and other hosts' tabs on
    demand (:func:`lazy_parts`), once the search plugin has indexed the page
    (it runs on this event before us: both are excluded from it anyway), and put the page in a
    ``<div class="pc-lazy-page">``, whose blocks far from the viewport skip rendering
    (docs/assets/casebook.css). Charts drawn beside the build get their file names and sizes
    here first (:func:`labkit.site.macros.beside.fill`): every page's Markdown has been rendered by
    now, so every chart has been submitted.

    Raises:
        PluginError: a chart of the page could not be drawn.
    """
    try:
        page.content = beside.fill(put_back(page.content, page))
    except ValueError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None
    if page.file.src_uri.startswith(LAZY_PAGES):
        folder = page_dir(page)
        body = lazy_parts(page.content, folder, _FOLDS)
        page.content = f'<div class="pc-lazy-page">\n{body}\n</div>'
    return context


@event_priority(-100)  # after the search plugin has written its index
def on_post_build(config):
    """Write the chart figures the macros drew (:func:`labkit.view.charts.store`) and the folded
    blocks' fragments (:func:`lazy_folds`) into the site, each next to its page, and add the
    evidence pages' titles to the search index, which skipped their text
    (:func:`labkit.site.evidence.index_titles`)."""
    beside.finish()
    lost = fast_tables.finish()
    if lost:
        raise PluginError(f"{len(lost)} data tables were never put on a page: {', '.join(lost[:5])}")
    site = Path(config["site_dir"])
    evidence.index_titles(site, _EVIDENCE_TITLES)
    for rel, text in [*charts.take().items(), *_FOLDS.items()]:
        dst = site / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)
    _FOLDS.clear()


def on_post_page(output, page, config):
    """Fail the build on a page that still holds a chart placeholder
    (:func:`labkit.site.macros.beside.left`): its figure would be a broken image.

    Raises:
        PluginError: naming the page.
    """
    if beside.left(output):
        raise PluginError(f"{page.file.src_uri}: a chart's placeholder was never filled in")
    if fast_tables.left(output):
        raise PluginError(f"{page.file.src_uri}: a data table's token is not alone in its paragraph "
                          "(labkit.site.fast_tables): the table needs a block of its own")
    return output


def on_build_error(error):
    """Stop the chart workers of a failed build (:func:`labkit.site.macros.beside.finish`) and
    forget its tables (:func:`labkit.site.fast_tables.finish`)."""
    beside.finish(cancel=True)
    fast_tables.finish()


def on_serve(server, config, builder):
    """Under ``mkdocs serve``, also rebuild when results arrive outside the docs: the reader's
    own ``local-results/`` (created if missing, so a first lab run is seen) and every folder in
    ``$PERF_CASEBOOK_RESULTS``."""
    local = results.ROOT / "local-results"
    if os.environ.get("PERF_CASEBOOK_LOCAL", "1") != "0":
        local.mkdir(exist_ok=True)
        server.watch(str(local))
    for extra in filter(None, os.environ.get("PERF_CASEBOOK_RESULTS", "").split(":")):
        if Path(extra).is_dir():
            server.watch(extra)
    return server
