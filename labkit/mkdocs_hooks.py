"""mkdocs hooks: serve every result's artifacts (flame graphs, folded stacks, casts, logs)
at ``results/<host>/<path>`` in the built site, fail the build on an invalid result, write the
chart figures the macros drew next to their pages, keep measured data out of the search index,
fetch a data page's other hosts' tabs and large closed blocks when shown, leave the terminal
player's files to the pages with a recording (labkit/theme/main.html), and
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

from labkit import charts, evidence, lesson, render, results
from labkit.macros import beside
from labkit.macros.hosts import page_dir

_PLAYER = re.compile(r"```asciinema-player\n(.*?)\n```", re.S)
# What mkdocs-asciinema-player's on_config adds to extra_css / extra_javascript, for every page.
_PLAYER_FILES = {"css": ("css/terminal-player.css", "css/asciinema-player.css"), "js": ("js/asciinema-player.min.js",)}


_LABKIT = Path(__file__).resolve().parent
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
    long-lived process, where mkdocs-macros imports ``labkit.macros`` once and this hook module
    is loaded once: after an edit of any labkit source, every ``labkit.*`` module is dropped from
    ``sys.modules`` (with the in-memory caches they hold) and this module's own references are
    imported again, so that the rebuild runs the edited code. True when it reloaded."""
    global _LOADED, charts, evidence, lesson, render, results, beside, page_dir
    now = _fingerprint()
    changed = _LOADED is not None and now != _LOADED
    _LOADED = now
    if not changed:
        return False
    for name in [n for n in sys.modules if n == "labkit" or n.startswith("labkit.")]:
        del sys.modules[name]
    charts, evidence, lesson, render, results = (importlib.import_module(f"labkit.{m}") for m in
                                                 ("charts", "evidence", "lesson", "render", "results"))
    beside = importlib.import_module("labkit.macros.beside")
    page_dir = importlib.import_module("labkit.macros.hosts").page_dir
    return True


@event_priority(100)  # before mkdocs-macros imports labkit.macros (fresh_labkit)
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
    """Add each lab's evidence page (:func:`labkit.evidence.page_markdown`), ahead of the other
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
    # (labkit.macros.beside). The nav, and so every page's output, does not depend on it.
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


def on_pre_build(config):
    """Forget the figures and folds of an earlier build (``mkdocs serve`` builds again in one process),
    draw the charts the cache lacks beside the build (:mod:`labkit.macros.beside`), and
    take the terminal player's files (:data:`_PLAYER_FILES`, ~200 KB, 65 KB compressed) out of
    every page: ``config.extra.pc_player`` (``{"css": [...], "js": [...]}``, site paths) keeps
    them for labkit/theme/main.html, which names them on a page with a recording only.

    Raises:
        PluginError: Pygments does not know the ``pcb-step`` lexer (labkit/lexer.py, registered by
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
    beside.start()
    player = {}
    for kind, key in (("css", "extra_css"), ("js", "extra_javascript")):
        player[kind] = [str(x) for x in config[key] if str(x) in _PLAYER_FILES[kind]]
        config[key] = [x for x in config[key] if str(x) not in _PLAYER_FILES[kind]]
    config["extra"]["pc_player"] = player


_DETAILS_TAG = re.compile(r"<details\b[^>]*>|</details>")
FOLD_MIN_CHARS = 4_000  # a closed block with more HTML than this (a table of a dozen rows) is fetched when opened
_FOLDS: dict[str, str] = {}  # site path -> HTML fragment, written by on_post_build
# Data pages: the evidence pages (labkit/evidence.py) hold every measurement of every host, 0.5-1.9
# MB of HTML and up to 59,000 elements; the host comparison, every lab's. Whole, fio_engines'
# evidence page took 4.3 s to load on the development VM (13 s with the CPU slowed 4x) and
# Lighthouse timed out on it; with other hosts' tabs and large closed blocks fetched when shown
# (lazy_tabs, lazy_folds) it has 27,500 elements. Chapters and the other pages are whole.
LAZY_PAGES = (f"{evidence.PREFIX}/", "compare.md")
# What mkdocs-material turns into code annotations (content.code.annotate): a code block followed
# by an ordered list (its findList: the list may come after empty paragraphs), or a block of class
# "annotate". Material builds them once, at page load, on the blocks in the page (mountContent):
# a block fetched later would show its markers as literal "# (1)!" and its notes as a plain list.
# So such a block is never folded or fetched.
_ANNOTATED = re.compile(r'</code></pre></div>\s*(?:<p>\s*</p>\s*)*<ol\b|class="(?:[^"]*\s)?annotate[\s"]')


def lazy_folds(html: str, page_dir: str, store: dict[str, str], min_chars: int = FOLD_MIN_CHARS) -> str:
    """Move the contents of each large closed ``<details>`` (a source listing, a long output:
    more than ``min_chars`` characters of HTML) into a fragment file ``<page_dir>fold-<hash>.html``
    (kept in ``store``, site path → HTML) and leave a placeholder that docs/assets/casebook.js
    replaces with the fragment when the reader opens the block; without JavaScript the
    placeholder links to the fragment. The page's DOM stays small: mkdocs-material's start-up
    and the browser's layout cost grow with every element, folded or not. A block with code
    annotations stays in the page (see ``_ANNOTATED``)."""
    out, last, depth, start = [], 0, 0, None
    for m in _DETAILS_TAG.finditer(html):
        if m.group(0) != "</details>":
            if depth == 0:
                start = m
            depth += 1
            continue
        depth -= 1
        if depth or start is None:
            continue
        head = start.group(0)
        body_at = html.find("</summary>", start.end(), m.start())
        if " open" in head or body_at < 0:
            continue
        body_at += len("</summary>")
        inner = html[body_at:m.start()]
        if len(inner) < min_chars or _ANNOTATED.search(inner):
            continue
        out.append(html[last:body_at])
        out.append(_fragment(inner, page_dir, store))
        last = m.start()
    out.append(html[last:])
    return "".join(out)


_DIV_TAG = re.compile(r"<div\b[^>]*>|</div>")
_TAB_CONTENT = '<div class="tabbed-content">'


def _fragment(inner: str, page_dir: str, store: dict[str, str]) -> str:
    """Keep ``inner`` as the fragment ``<page_dir>fold-<hash>.html`` in ``store`` and return the
    placeholder docs/assets/casebook.js replaces with it (without JavaScript, a link to it)."""
    name = f"fold-{hashlib.sha1(inner.encode()).hexdigest()[:12]}.html"
    store[page_dir + name] = inner
    return (f'\n<div class="pc-fold" data-pc-fold="{name}"><p>Loading… '
            f'(<a href="{name}">the folded content on its own</a>)</p></div>\n')


TAB_MIN_CHARS = 500  # another host's tab longer than this (a table of a few rows) is fetched when shown


def lazy_tabs(html: str, page_dir: str, store: dict[str, str], min_chars: int = TAB_MIN_CHARS) -> str:
    """Move the contents of every tab but the first of each host tab set (``data-pc-tabs``,
    see ``_TABS``) into a fragment file, as :func:`lazy_folds` does for closed blocks, when
    they are longer than ``min_chars`` characters of HTML and hold no code annotations (see
    ``_ANNOTATED``). Only the first host's tables are in the page at load;
    docs/assets/casebook.js fetches another host's when its tab is shown.

    A hidden tab is not drawn, but its HTML is downloaded and parsed, and mkdocs-material's
    start-up walks it, at load: on fio_engines' evidence page, the other host's measurement
    tables are half of its 59,000 elements."""
    out, last, pos = [], 0, 0
    while True:
        start = html.find('<div class="tabbed-set tabbed-alternate" data-pc-tabs=', pos)
        if start < 0:
            break
        content = html.find(_TAB_CONTENT, start)
        pos = content + len(_TAB_CONTENT) if content >= 0 else len(html)
        depth, block, index = 0, None, 0
        for m in _DIV_TAG.finditer(html, pos):
            if m.group(0) != "</div>":
                if depth == 0:
                    block = m
                depth += 1
                continue
            if depth == 0:  # the end of tabbed-content
                pos = m.end()
                break
            depth -= 1
            if depth:
                continue
            index += 1
            inner = html[block.end():m.start()]
            if index > 1 and len(inner) >= min_chars and not _ANNOTATED.search(inner):
                out.append(html[last:block.end()])
                out.append(_fragment(inner, page_dir, store))
                last = m.start()
    out.append(html[last:])
    return "".join(out)


# pymdownx.tabbed marks each tab set with data-tabs, which mkdocs-material's runtime mounts: per
# set a ResizeObserver, an IntersectionObserver and offset reads between style writes. On the
# lat_tcp chapter (7 sets) that was 140 ms of Lighthouse's total blocking time, its mobile score
# 94 with it, 98 without (median of 5); on an evidence page of 80 sets, Lighthouse timed out.
# Renamed, the sets work by CSS alone (radio inputs), and docs/assets/casebook.js links them.
_TABS = ('<div class="tabbed-set tabbed-alternate" data-tabs="', '<div class="tabbed-set tabbed-alternate" data-pc-tabs="')


def on_page_content(html, page, config, files):
    """Fill in the chapter's reading time (:func:`labkit.lesson.fill`); keep measured data (the
    blocks :func:`labkit.render.tabs` marks) and folded blocks (``<details>``: exercises'
    predictions and verdicts, long outputs) out of the search index that every page downloads
    (material's search plugin skips elements marked ``data-search-exclude``; pymdownx.details
    has no attribute syntax), the prose staying searchable; and leave tab sets to CSS and
    docs/assets/casebook.js (:data:`_TABS`)."""
    html = lesson.fill(html)
    html = html.replace(render.DATA_OPEN, '<div class="pc-data" data-search-exclude>')
    html = html.replace(render.DATA_CLOSE, "</div>")
    html = html.replace(*_TABS)
    return html.replace("<details", "<details data-search-exclude")


def on_page_context(context, page, config, nav):
    """On a data page (:data:`LAZY_PAGES`), fetch large closed blocks and other hosts' tabs on
    demand (:func:`lazy_folds`, :func:`lazy_tabs`), once the search plugin has indexed the page
    (it runs on this event before us: both are excluded from it anyway), and put the page in a
    ``<div class="pc-lazy-page">``, whose blocks far from the viewport skip rendering
    (docs/assets/casebook.css). Charts drawn beside the build get their file names and sizes
    here first (:func:`labkit.macros.beside.fill`): every page's Markdown has been rendered by
    now, so every chart has been submitted.

    Raises:
        PluginError: a chart of the page could not be drawn.
    """
    try:
        page.content = beside.fill(page.content)
    except ValueError as exc:
        raise PluginError(f"{page.file.src_uri}: {exc}") from None
    if page.file.src_uri.startswith(LAZY_PAGES):
        folder = page_dir(page)
        body = lazy_tabs(lazy_folds(page.content, folder, _FOLDS), folder, _FOLDS)
        page.content = f'<div class="pc-lazy-page">\n{body}\n</div>'
    return context


@event_priority(-100)  # after the search plugin has written its index
def on_post_build(config):
    """Write the chart figures the macros drew (:func:`labkit.charts.store`) and the folded
    blocks' fragments (:func:`lazy_folds`) into the site, each next to its page, and add the
    evidence pages' titles to the search index, which skipped their text
    (:func:`labkit.evidence.index_titles`)."""
    beside.finish()
    site = Path(config["site_dir"])
    evidence.index_titles(site, _EVIDENCE_TITLES)
    for rel, text in [*charts.take().items(), *_FOLDS.items()]:
        dst = site / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)
    _FOLDS.clear()


def on_post_page(output, page, config):
    """Fail the build on a page that still holds a chart placeholder
    (:func:`labkit.macros.beside.left`): its figure would be a broken image.

    Raises:
        PluginError: naming the page.
    """
    if beside.left(output):
        raise PluginError(f"{page.file.src_uri}: a chart's placeholder was never filled in")
    return output


def on_build_error(error):
    """Stop the chart workers of a failed build (:func:`labkit.macros.beside.finish`)."""
    beside.finish(cancel=True)


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
