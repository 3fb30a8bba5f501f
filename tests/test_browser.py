"""The site of the committed results in headless Chromium (Debian's, driven by Playwright):
host tabs switch together and keep their place, the colour scheme follows the system, flame
graphs, tables, code and recordings load and stay legible on a phone, no console errors, and
no request leaves 127.0.0.1. No lab runs here (the pages of a real quick run:
test_browser_run.py), so these run beside the other slow tests. Screenshots go to
test-artifacts/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from bench import FRAMES_JS
from conftest import serve

# How long a wait on the page's own state (fetched folds, the player) may take: a wait, not a
# budget. Beside axe-core in the other xdist worker, opening every fold of nvme_swiotlb's
# evidence page took over 15 s.
STATE_WAIT_MS = 60_000

pytestmark = pytest.mark.browser   # the site of the committed results (a real run's pages: test_browser_run.py)


@pytest.fixture(scope="module")
def committed(committed_site):
    """The site built from the committed results alone (no lab run), served on 127.0.0.1."""
    server, url = serve(committed_site)
    yield url
    server.shutdown()


_PICKED_JS = """() => [...document.querySelectorAll('.tabbed-set')].map(set => {
    const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
    return set.querySelectorAll(':scope > .tabbed-labels > label')[i]?.textContent.trim() || '';
})"""


_NO_FETCH_PENDING_JS = "() => !document.querySelector('.pc-fold[data-pc-loading]')"


def test_host_pick_keeps_its_place_and_is_remembered(committed, watched):
    """Host tabs work without mkdocs-material's runtime (docs/assets/casebook.js): a pick in one
    set switches every set with a tab of that title, the set the reader clicked stays where it
    was on screen while the sets above it switch (on an evidence page, whose other hosts' tabs
    are fetched as they near the viewport) and after, when a block above it grows late, until
    the reader scrolls; and the pick is remembered: the chapter opens on the same host."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{url}/evidence/lat_tcp/", wait_until="networkidle")  # sets close together
    # as in Safari, which has no scroll anchoring: the place is kept by casebook.js alone
    page.add_style_tag(content="* { overflow-anchor: none !important; }")
    sets = page.locator(".tabbed-set[data-pc-tabs]:visible")   # not those in a closed block
    assert sets.count() > 3 and page.locator(".tabbed-set[data-tabs], .tabbed-control").count() == 0
    # a set with another set just above it, both on screen: the one above changes with the pick
    near = page.evaluate("""() => { const s = [...document.querySelectorAll('.tabbed-set[data-pc-tabs]')].filter(x => x.checkVisibility());
        const top = e => e.getBoundingClientRect().top + scrollY;
        return s.findIndex((x, i) => i > 0 && top(x) - top(s[i - 1]) < 450); }""")
    assert near > 0
    target = sets.nth(near)
    label = target.locator(":scope > .tabbed-labels > label").nth(1)
    other = label.text_content().strip()
    assert other and set(page.evaluate(_PICKED_JS)) != {other}
    # the set 200 px below the top of the screen, the one above it partly in view; scrolling
    # brings other sets' fetches and unrendered blocks near the viewport, and each that lands
    # above it moves it: scroll again until its place holds. The waits are on the page's state
    # and the clock, not on rendering frames, which a busy machine delays (bench.FRAMES_JS gives
    # up after 250 ms)
    top = None
    for _ in range(12):
        target.evaluate("e => { e.scrollIntoView({block: 'start'}); scrollBy(0, -200); }")
        page.wait_for_load_state("networkidle")
        page.wait_for_function(_NO_FETCH_PENDING_JS, polling=100, timeout=STATE_WAIT_MS)
        page.wait_for_timeout(300)
        now = target.evaluate("e => e.getBoundingClientRect().top")
        if top is not None and abs(now - top) <= 1:
            break
        top = now
    top = target.evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < 800 - 60, top   # the label is on screen: the click does not scroll to it
    label.click()
    page.wait_for_load_state("networkidle")   # the other host's tabs near the viewport, fetched
    page.wait_for_function(_NO_FETCH_PENDING_JS, polling=100, timeout=STATE_WAIT_MS)
    page.wait_for_timeout(300)
    assert abs(target.evaluate("e => e.getBoundingClientRect().top") - top) <= 2
    assert set(page.evaluate(_PICKED_JS)) == {other}
    # a block above it that grows late (a recording starting, a fetch on a busy machine) does not
    # move it either, however long after the pick; once the reader scrolls, the page is theirs
    page.wait_for_timeout(1000)
    late = "h => { const d = document.getElementById('pc-late') || document.createElement('div'); d.id = 'pc-late'; " \
           "d.style.height = h + 'px'; document.querySelector('article').prepend(d); }"
    page.evaluate(late, 150)
    page.wait_for_timeout(300)
    assert abs(target.evaluate("e => e.getBoundingClientRect().top") - top) <= 2
    page.mouse.wheel(0, 120)
    page.wait_for_timeout(500)
    scrolled = target.evaluate("e => e.getBoundingClientRect().top")
    assert scrolled < top - 60, (scrolled, top)
    page.evaluate(late, 300)
    page.wait_for_timeout(300)
    assert abs(target.evaluate("e => e.getBoundingClientRect().top") - (scrolled + 150)) <= 2
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
    assert set(page.evaluate(_PICKED_JS)) == {other}
    assert errors == [], errors


@pytest.mark.parametrize("system", ["light", "dark"])
def test_scheme_follows_the_system_and_the_toggle(committed, browser, system):
    """The palette's options carry media queries (mkdocs.yml): a first visit opens in the
    system's scheme (prefers-color-scheme, applied before the first paint by
    labkit/site/theme/partials/javascripts/palette.html); the toggle, without mkdocs-material's
    palette runtime (labkit/site/theme/partials/palette.html, docs/assets/casebook.js), goes to light,
    to dark, and back to the system's (which it follows when the system changes), by click or
    by Enter; a pick holds on the next page."""
    url = committed
    ctx = browser.new_context(color_scheme=system)
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
    scheme = lambda: page.evaluate("document.body.getAttribute('data-md-color-scheme')")

    def becomes(want: str) -> str:
        """The scheme once the page has switched to ``want`` (or what it still is after 2 s)."""
        try:
            page.wait_for_function("w => document.body.getAttribute('data-md-color-scheme') === w", arg=want,
                                   timeout=2000)
        except PlaywrightTimeout:
            pass
        return scheme()

    own = {"light": "default", "dark": "slate"}[system]
    assert scheme() == own
    assert page.locator('[data-md-component="palette"]').count() == 0
    toggle = page.locator("form[data-pc-palette] label:visible")
    for want in ("default", "slate", own):
        assert toggle.count() == 1
        toggle.click()
        assert becomes(want) == want, want
    # back on the system's scheme: the page follows when the system changes it
    other = "light" if system == "dark" else "dark"
    page.emulate_media(color_scheme=other)
    assert becomes({"light": "default", "dark": "slate"}[other]) == {"light": "default", "dark": "slate"}[other]
    toggle.click()   # light
    assert becomes("default") == "default"
    page.goto(f"{url}/method/", wait_until="networkidle")
    assert scheme() == "default"
    # the current option's input (each option's label, the one shown, switches to the next)
    page.evaluate("""() => document.querySelector('form[data-pc-palette] label:not([hidden])')
        .previousElementSibling.focus()""")
    page.keyboard.press("Enter")
    assert becomes("slate") == "slate"
    assert errors == [], errors
    ctx.close()


def test_flame_graph_zooms_and_searches(committed, watched, artifacts_dir):
    """A flame graph on the page stays interactive: a click on a frame zooms (inferno's
    unzoom button appears), and search highlights matching frames."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
    fg = page.locator("object.pc-flamegraph:visible").first
    fg.scroll_into_view_if_needed()
    page.wait_for_function("""() => { const o = [...document.querySelectorAll('object.pc-flamegraph')].find(x => x.offsetParent);
        return o && o.contentDocument && o.contentDocument.querySelectorAll('#frames > g').length > 10; }""", timeout=10000)
    box = fg.bounding_box()
    assert box["width"] >= 900 * 0.99, box  # legible scale on a phone: the figure scrolls sideways
    state = page.evaluate("""() => {
        const o = [...document.querySelectorAll('object.pc-flamegraph')].find(x => x.offsetParent);
        const d = o.contentDocument, w = d.defaultView;
        const frames = [...d.querySelectorAll('#frames > g')];
        const deep = frames.find(g => (g.querySelector('title')||{}).textContent && g.querySelector('rect').getAttribute('width') !== '100%');
        deep.dispatchEvent(new w.MouseEvent('click', {bubbles: true}));
        const zoomed = !d.getElementById('unzoom').classList.contains('hide');
        w.search(deep.querySelector('title').textContent.split(' (')[0]);
        return {zoomed, matched: d.getElementById('matched').textContent};
    }""")
    assert state["zoomed"], state
    assert "Matched" in state["matched"], state
    page.screenshot(path=str(artifacts_dir / "lat_tcp-flamegraph-390.png"))
    assert errors == [], errors


_BOXES_JS = """() => [...document.querySelectorAll('.md-typeset__scrollwrap, .pc-flamegraph-wrap')].filter(w => w.checkVisibility())
    .map(w => ({scrolls: w.scrollWidth > w.clientWidth + 1, tabindex: w.getAttribute('tabindex'),
                label: w.getAttribute('aria-label'), role: w.getAttribute('role'),
                table: w.classList.contains('md-typeset__scrollwrap')}))"""


def _focusable_iff_scrolls(boxes: list[dict]) -> None:
    for b in boxes:
        what = "Table" if b["table"] else "Flame graph"
        want = ("0", "region", f"{what} (scrolls sideways)") if b["scrolls"] else (None, None, None)
        assert (b["tabindex"], b["role"], b["label"]) == want, b


_SCROLL_THROUGH = """async () => {
    const frames = %s;
    for (let y = 0; y < document.documentElement.scrollHeight; y += 600) { scrollTo(0, y); await frames(); }
}""" % FRAMES_JS


# What the scroll-through passed before the page drew a frame (a busy machine delays frames;
# FRAMES_JS gives up after 250 ms) is not done yet: bring each such element into view and wait,
# on the clock, until it is. Returns those still not done after 10 s each.
_FINISH_JS = """async () => {
    const pending = %s;
    const left = [];
    for (const w of [...document.querySelectorAll('%s')].filter(pending)) {
        w.scrollIntoView({block: 'center'});
        for (let t = 0; t < 100 && pending(w); t++) await new Promise(r => setTimeout(r, 100));
        if (pending(w)) left.push(w.outerHTML.slice(0, 120));
    }
    return left;
}"""
# a box not measured yet: it still has the label it was given before measuring
_MEASURE_THE_REST = _FINISH_JS % ("w => w.checkVisibility() && w.getAttribute('aria-label') === w.getAttribute('data-pc-scrollbox')",
                                  ".md-typeset__scrollwrap, .pc-flamegraph-wrap")
# another host's tab shown and not fetched yet (a fetched placeholder leaves the page)
_FETCH_THE_REST = _FINISH_JS % ("w => w.isConnected && w.checkVisibility()", ".tabbed-block > .pc-fold")


@pytest.mark.parametrize("width", [390, 1280])
def test_boxes_that_scroll_sideways_and_only_they_can_be_focused(committed, watched, width):
    """docs/assets/casebook.js measures each table and flame graph as it nears the viewport (on a
    data page, blocks far away are not laid out until then) and leaves it focusable, as a named
    region, only if it scrolls sideways (axe: scrollable-region-focusable); a box not yet
    measured is focusable. Another host's tab, fetched when shown, is measured too."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{url}/evidence/lat_tcp/", wait_until="networkidle")
    # inferno's own script throws on a mouseover before its onload has run: keep the pointer
    # off the flame graphs that load as the page scrolls under it
    page.mouse.move(0, 0)
    before = page.evaluate(_BOXES_JS)
    assert before and all(b["tabindex"] == "0" for b in before if b["scrolls"])
    assert any(b["label"] in ("Table", "Flame graph") for b in before)  # far below: not measured yet, focusable
    page.evaluate(_SCROLL_THROUGH)
    page.wait_for_timeout(300)
    assert page.evaluate(_MEASURE_THE_REST) == []
    boxes = page.evaluate(_BOXES_JS)
    assert any(not b["scrolls"] for b in boxes), boxes
    if width == 390:
        assert any(b["scrolls"] and b["table"] for b in boxes) and any(b["scrolls"] and not b["table"] for b in boxes), boxes
    _focusable_iff_scrolls(boxes)
    # every set shows its second host: fetched when near, then measured
    page.locator(".tabbed-set[data-pc-tabs] > .tabbed-labels > label:nth-child(2)").first.click()
    page.mouse.move(0, 0)
    page.evaluate(_SCROLL_THROUGH)
    page.wait_for_load_state("networkidle")
    page.evaluate(_SCROLL_THROUGH)
    page.wait_for_timeout(300)
    assert page.evaluate(_FETCH_THE_REST) == []
    assert page.locator(".tabbed-block:visible > .pc-fold").count() == 0
    assert page.evaluate(_MEASURE_THE_REST) == []
    _focusable_iff_scrolls(page.evaluate(_BOXES_JS))
    assert errors == [], errors


_CHAPTERS = [f"/cases/{md.stem}/" for md in sorted((Path(__file__).resolve().parent.parent / "docs" / "cases").glob("*.md"))]


@pytest.mark.parametrize("path", _CHAPTERS + ["/evidence/lat_tcp/", "/evidence/nvme_swiotlb/", "/tools/strace/", "/compare/"])
def test_phone_shows_each_tables_figure_and_each_tab_title(committed, watched, path):
    """At 390 px, every data table (``.pc-data``, every host's, folded ones too) shows its
    first two columns without scrolling sideways: the first case column and the median or
    the first metric (labkit.view.render.figure_first; docs/assets/casebook.css compacts the
    columns); every host tab's title is whole, not clipped by the tab strip; and nothing on
    the page, a hidden code-annotation tooltip included, makes it scroll sideways."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(url + path, wait_until="networkidle")
    # every host's tab shown, every block laid out (a data page leaves far blocks unrendered)
    page.add_style_tag(content=".tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }"
                               " * { content-visibility: visible !important; }")
    # an opened block of a data page fetches its content (docs/assets/casebook.js), and a tab
    # fetched meanwhile brings closed blocks of its own: open every block on each poll, until no
    # block holds anything left to fetch
    page.wait_for_function("""() => {
        document.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });
        return !document.querySelector('details .pc-fold');
    }""", timeout=STATE_WAIT_MS)
    page.evaluate(FRAMES_JS)
    got = page.evaluate("""() => {
        const tables = [...document.querySelectorAll('.pc-data table')].filter(t => !t.closest('.pc-stack')).map(t => {
            const wrap = t.closest('.md-typeset__scrollwrap'), ths = [...t.querySelectorAll('thead th')];
            const th = ths[Math.min(1, ths.length - 1)];
            return {head: ths.map(x => x.textContent.trim()).join(' | '), width: wrap.clientWidth,
                    right: th.getBoundingClientRect().right - wrap.getBoundingClientRect().left};
        });
        const tabs = [...document.querySelectorAll('.tabbed-labels')].map(l => ({
            strip: l.scrollWidth - l.clientWidth, titles: [...l.children].map(x => x.textContent.trim()),
            cut: [...l.children].filter(x => x.scrollWidth > x.clientWidth + 1).length}));
        return {tables, tabs, page: document.documentElement.scrollWidth};
    }""")
    assert got["tables"] or got["tabs"], path
    assert got["page"] <= 390, got["page"]
    hidden = [t for t in got["tables"] if t["right"] > t["width"] + 1]
    assert hidden == [], hidden
    clipped = [t for t in got["tabs"] if t["strip"] > 1 or t["cut"]]
    assert clipped == [], clipped
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_original_vs_here_is_a_card_per_row_on_a_phone(committed, watched, width):
    """labkit.site.macros.tables.stacked_table on a chapter: at 390 px each row is a card that fits the screen
    (no sideways scroll), the header row is hidden from sight but not from screen readers, and
    each cell shows its column's header, the emulated host's badge included; at 1280 px it is a
    table whose cells show no such label."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{url}/evidence/optane_kyber/", wait_until="networkidle")
    box = page.locator(".pc-stack").first
    box.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    got = box.evaluate("""b => {
        const t = b.querySelector('table'), head = t.querySelector('thead');
        const labels = [...t.querySelectorAll('tbody .pc-stack-label')];
        return {fits: t.scrollWidth <= b.clientWidth + 1, row: getComputedStyle(t.querySelector('tbody tr')).display,
                head: head.getBoundingClientRect().height, headers: head.querySelectorAll('th').length,
                shown: labels.filter(l => l.checkVisibility()).length, labels: labels.length,
                badges: [...t.querySelectorAll('tbody .pc-stack-label .pc-emulated')].filter(e => e.checkVisibility()).length,
                hidden: labels.every(l => l.getAttribute('aria-hidden') === 'true')}}""")
    assert got["labels"] and got["hidden"] and got["headers"] > 2, got
    if width == 390:
        assert got["fits"] and got["row"] == "block" and got["head"] <= 1, got
        assert got["shown"] == got["labels"] and got["badges"] > 0, got
    else:
        assert got["row"] == "table-row" and got["head"] > 1 and got["shown"] == got["badges"] == 0, got
    assert errors == [], errors


def test_the_page_keeps_its_length_and_annotations_are_not_clipped(committed, watched):
    """Every block is laid out at load, so the page's length (and its scrollbar) stays put as the
    reader scrolls through a chapter (no ``content-visibility: auto`` placeholders); and a code
    annotation's tooltip lies within the viewport, painted over the text below rather than cut
    at its block's edge."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{url}/cases/fio_engines/", wait_until="networkidle")
    skipping = page.evaluate("""() => [...document.querySelectorAll('.md-typeset *')]
        .filter(b => getComputedStyle(b).contentVisibility !== 'visible').length""")
    assert skipping == 0, skipping
    length = page.evaluate("document.documentElement.scrollHeight")
    y = 0
    while y < length:
        page.evaluate(f"window.scrollTo(0, {y})")
        page.evaluate(FRAMES_JS)
        assert abs(page.evaluate("document.documentElement.scrollHeight") - length) <= 2, y   # subpixel rounding
        y += 700
    page.goto(f"{url}/tools/perf/", wait_until="networkidle")
    marker = page.locator(".md-annotation__index").nth(2)
    marker.scroll_into_view_if_needed()
    marker.click(force=True)   # the marker pulses, so it is never "stable" for a normal click
    tip = page.locator(".md-annotation .md-tooltip--active").first
    expect(tip).to_be_visible()
    box = tip.bounding_box()
    # the point just above the tooltip's bottom edge is the tooltip, not the text under it
    hit = page.evaluate("([x, y]) => !!document.elementFromPoint(x, y).closest('.md-tooltip')",
                        [box["x"] + box["width"] / 2, box["y"] + box["height"] - 4])
    assert hit, box
    assert errors == [], errors


def _annotations_of_shown_tabs(page) -> list[dict]:
    """For each tab set holding an annotated output (labkit.site.macros.annotated_output), the tab
    shown: its title, the code annotations mkdocs-material built in it, the ``(n)!`` markers left
    as text in its code, and whether its list of notes is still shown as a list."""
    return page.evaluate("""() => [...document.querySelectorAll('.tabbed-set[data-pc-tabs]')]
        .filter(set => set.querySelector('.pc-annotated')).map(set => {
            const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
            const block = set.querySelectorAll(':scope > .tabbed-content > .tabbed-block')[i];
            const code = [...block.querySelectorAll('.highlight code')];
            return {title: set.querySelectorAll(':scope > .tabbed-labels > label')[i].textContent.trim(),
                    code: code.length,
                    live: block.querySelectorAll('.md-annotation').length,
                    literal: code.filter(c => /\\(\\d+\\)!/.test(c.textContent)).length,
                    lists: [...block.querySelectorAll('.highlight + ol')].filter(l => l.checkVisibility()).length};
        })""")


def test_code_annotations_work_in_every_host_tab(committed, watched):
    """A tool card's annotated output has mkdocs-material's annotation markers, not literal
    ``# (1)!`` lines and a plain list, in the second host's tab as in the first (material builds
    annotations at page load, in every tab). The pick of host is remembered, so the next card
    opens on that host: its annotations work too."""
    url = committed
    page, errors, _ = watched
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/tools/strace/", wait_until="networkidle")
    first = _annotations_of_shown_tabs(page)
    assert first and all(t["live"] and not t["literal"] and not t["lists"] for t in first), first
    block = page.locator(".tabbed-set[data-pc-tabs]:has(.pc-annotated)").first
    label = block.locator(":scope > .tabbed-labels > label").nth(1)
    second = label.inner_text().strip()
    label.click()
    for card in ("strace", "perf"):
        if card != "strace":
            page.goto(f"{url}/tools/{card}/", wait_until="networkidle")
        # until every annotated set shows the picked host and material has built annotations in
        # each shown block with code (the test fails when that never comes)
        page.wait_for_function("""want => [...document.querySelectorAll('.tabbed-set[data-pc-tabs]')]
            .filter(set => set.querySelector('.pc-annotated')).every(set => {
                const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
                const block = set.querySelectorAll(':scope > .tabbed-content > .tabbed-block')[i];
                return i >= 0 && set.querySelectorAll(':scope > .tabbed-labels > label')[i].textContent.trim() === want
                    && (!block.querySelector('.highlight code') || block.querySelector('.md-annotation'));
            })""", arg=second, polling=100, timeout=STATE_WAIT_MS)
        shown = _annotations_of_shown_tabs(page)
        assert shown and {t["title"] for t in shown} == {second}, (card, shown)
        with_code = [t for t in shown if t["code"]]
        assert with_code, (card, shown)
        assert all(t["live"] and not t["literal"] and not t["lists"] for t in with_code), (card, shown)
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_code_blocks_never_wrap(committed, watched, width):
    """Text diagrams keep their columns at any width: every code block on a tool card (commands,
    strace -c's table, perf's call graphs) holds one screen line per line of text, and a block
    wider than the column scrolls sideways."""
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{committed}/tools/strace/", wait_until="networkidle")
    got = page.evaluate("""() => [...document.querySelectorAll('article pre > code')].filter(c => c.checkVisibility()).map(c => {
        const cs = getComputedStyle(c), line = parseFloat(cs.lineHeight);
        const inner = c.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom);
        return {lines: c.textContent.replace(/\\n$/, '').split('\\n').length, shown: inner / line,
                scrolls: c.scrollWidth > c.clientWidth + 1, text: c.textContent.slice(0, 60)}})""")
    assert got, got
    for c in got:
        assert abs(c["shown"] - c["lines"]) < 0.5, c
    if width == 390:
        assert any(c["scrolls"] for c in got), got
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_figures_fit_the_column_or_stay_legible(committed, watched, width):
    """Flame graphs and heat maps (docs/assets/casebook.css): in a 1280 px window each fits the
    column it stands in (the article's, or a fold's inside it), no sideways scroll; on a phone each is drawn at three quarters of its own
    size or more, so inferno's 12 px text stays 9 px or more (labkit.site.macros.flamegraph's
    ``--pc-w``), and scrolls sideways."""
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    got = []
    for path in ("/cases/optane_kyber/", "/evidence/optane_kyber/"):
        page.goto(f"{committed}{path}", wait_until="networkidle")
        got += page.evaluate("""() => [...document.querySelectorAll('object.pc-flamegraph')].filter(o => o.offsetParent)
            .map(o => ({src: o.dataset.pcSrc, own: +o.getAttribute('width'), shown: o.getBoundingClientRect().width,
                        column: (o.closest('.pc-flamegraph-wrap') || o.closest('.md-typeset')).clientWidth}))""")
    assert len(got) >= 4 and any(g["own"] == 1200 for g in got), got
    for g in got:
        if width == 1280:
            assert abs(g["shown"] - g["column"]) <= 1, g
        else:
            assert g["shown"] >= 0.75 * g["own"] - 1 and g["shown"] >= g["column"] - 1, g
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_terminal_recordings_are_legible_on_a_phone(committed, watched, width):
    """docs/assets/casebook.js createPlayer: a recording whose fitted text would be under 10 px
    (110 columns in a phone's 358 px) keeps 10 px text and scrolls sideways, focusable and
    named so; where it fits legibly (1280 px) it fills the column and does not scroll."""
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{committed}/evidence/optane_kyber/", wait_until="networkidle")
    cast = page.locator(".pc-cast").first
    cast.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('.pc-cast .ap-term')", timeout=STATE_WAIT_MS)
    got = cast.evaluate("""d => ({font: parseFloat(getComputedStyle(d.querySelector('.ap-term')).fontSize),
        scrolls: d.scrollWidth > d.clientWidth + 1, tabindex: d.getAttribute('tabindex'),
        label: d.getAttribute('aria-label')})""")
    assert got["font"] >= 10, got
    if width == 390:
        assert got["scrolls"] and got["tabindex"] == "0" and got["label"].endswith("(scrolls sideways)"), got
    else:
        assert not got["scrolls"] and got["tabindex"] is None, got
    assert errors == [], errors
