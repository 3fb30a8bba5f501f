"""The lat_tcp chapter in headless Chromium (Debian's, driven by Playwright): tables show the
result's medians, host tabs switch together, the flame graph loads, no console errors, and no
request leaves 127.0.0.1. Screenshots go to test-artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from conftest import build_site, serve
from labkit import model, render

pytestmark = [pytest.mark.browser, pytest.mark.lab]   # the pages of a real quick run, in Chromium


@pytest.fixture(scope="module")
def served(tmp_path_factory, lat_tcp_quick):
    """The site built with the committed results plus this session's real quick run (host test-quick)."""
    proc, host_dir, _ = lat_tcp_quick
    assert proc.returncode == 0, proc.stderr[-2000:]
    site = tmp_path_factory.mktemp("site-browser")
    built = build_site(site, env={"PERF_CASEBOOK_RESULTS": str(host_dir.parent)})
    assert built.returncode == 0, built.stderr[-3000:]
    server, url = serve(site)
    yield url, host_dir
    server.shutdown()


@pytest.fixture(scope="module")
def committed(committed_site):
    """The site built from the committed results alone (no lab run), served on 127.0.0.1."""
    server, url = serve(committed_site)
    yield url
    server.shutdown()


def shown_median(result: dict, m: dict) -> str:
    """The median of measurement ``m`` as the pinned round-trip table of ``result`` shows it
    (one precision per column: labkit.render.measurement_table with page=True)."""
    ms = render.select(result, "round_trip", {"experiment": "pinned"})
    _, rows = render.measurement_table(ms, [], page=True)
    return rows[ms.index(m)][0]


@pytest.fixture
def watched(page):
    """The page with console errors and every requested URL recorded."""
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    return page, errors, requests


def test_chapter_tables_tabs_flamegraph(served, watched, artifacts_dir, root):
    url, host_dir = served
    page, errors, requests = watched
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")

    # the committed host whose tab comes first (tabs are in label order)
    ref = min((model.load(p) for p in (root / "results").glob("*/lat_tcp.json")), key=lambda r: r["host"]["label"])
    ref_label = ref["host"]["label"]
    same = next(m for m in ref["measurements"] if m["case"].get("experiment") == "pinned" and m["case"]["pin"] == "same-cpu")
    table = page.locator(".tabbed-set").filter(has_text="server_cpu").first
    assert table.locator(f"label:has-text('{ref_label}')").count() == 1
    # a block is rendered only near the viewport (content-visibility), and innerText is the rendered text
    table.scroll_into_view_if_needed()
    expect(table.locator(".tabbed-block").first).to_contain_text(shown_median(ref, same), use_inner_text=True)

    # pick the other host in one table: every linked tab set on the page follows
    quick = model.load(host_dir / "lat_tcp.json")
    table.locator("label:has-text('test-quick')").click()
    q_same = next(m for m in quick["measurements"] if m["case"].get("experiment") == "pinned" and m["case"]["pin"] == "same-cpu")
    page.wait_for_timeout(300)
    labels = table.locator(":scope > .tabbed-labels > label").all_inner_texts()
    at = next(i for i, t in enumerate(labels) if "test-quick" in t)
    visible = table.locator(":scope > .tabbed-content > .tabbed-block").nth(at)
    assert visible.is_visible()
    # another host's tab is a fragment fetched when shown (mkdocs_hooks.lazy_tabs)
    page.wait_for_function("el => !el.querySelector('.pc-fold')", arg=visible.element_handle(), timeout=10_000)
    assert shown_median(quick, q_same) in visible.inner_text()
    checked = page.evaluate("""() => [...document.querySelectorAll('.tabbed-set')].map(set => {
        const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
        return set.querySelectorAll(':scope > .tabbed-labels > label')[i]?.textContent || '';
    })""")
    assert checked and all("test-quick" in c for c in checked), checked

    # the other host's tabs far down the page are not fetched until the reader gets near them
    assert page.locator(".tabbed-block:visible > .pc-fold[data-pc-fold]").count() > 0
    table.locator(f"label:has-text('{ref_label}')").click()

    # the flame graph: an inferno SVG with its frames, loaded from this site when scrolled to
    fg = page.locator("object.pc-flamegraph:visible").first
    # not loaded before the reader gets near it (casebook.js loads it within 300 px of the
    # viewport: on a short lesson it may already be near)
    if fg.evaluate("e => e.getBoundingClientRect().top - window.innerHeight") > 400:
        assert fg.get_attribute("data") is None
    # inferno's own script handles mouseover before its onload has run by throwing
    # (its `details` is set in init): keep the pointer off the graph while it loads
    page.mouse.move(0, 0)
    fg.scroll_into_view_if_needed()
    frames_js = """() => { const o = [...document.querySelectorAll('object.pc-flamegraph')].find(x => x.offsetParent);
        return o && o.contentDocument ? o.contentDocument.querySelectorAll('g').length : 0; }"""
    page.wait_for_function(frames_js, timeout=10000)
    assert page.evaluate(frames_js) > 10
    page.screenshot(path=str(artifacts_dir / "lat_tcp-flamegraph.png"))

    page.screenshot(path=str(artifacts_dir / "lat_tcp-chapter.png"), full_page=True)
    assert errors == [], errors
    foreign = [r for r in requests if not r.startswith((url, "data:"))]
    assert foreign == [], foreign


def test_host_pick_keeps_its_place_and_is_remembered(served, watched):
    """Host tabs work without mkdocs-material's runtime (docs/assets/casebook.js): the set the
    reader clicks stays where it was on screen while the sets above it switch, and the pick is
    remembered: the page opens on the same host next time."""
    url, _ = served
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{url}/evidence/lat_tcp/", wait_until="networkidle")  # sets close together
    # as in Safari, which has no scroll anchoring: the place is kept by casebook.js alone
    page.add_style_tag(content="* { overflow-anchor: none !important; }")
    sets = page.locator(".tabbed-set[data-pc-tabs]")
    assert sets.count() > 3 and page.locator(".tabbed-set[data-tabs], .tabbed-control").count() == 0
    # a set with another set just above it, both on screen: the one above changes height
    near = page.evaluate("""() => { const s = [...document.querySelectorAll('.tabbed-set[data-pc-tabs]')];
        const top = e => e.getBoundingClientRect().top + scrollY;
        return s.findIndex((x, i) => i > 0 && top(x) - top(s[i - 1]) < 450); }""")
    assert near > 0
    target = sets.nth(near)
    label = target.locator(":scope > .tabbed-labels > label", has_text="test-quick")
    sets.nth(near - 1).evaluate("e => e.scrollIntoView({block: 'start'})")
    # blocks near the new viewport render on the next frames (content-visibility): a reader's
    # click comes after those, never in the frame of the scroll
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    top = target.evaluate("e => e.getBoundingClientRect().top")
    label.click()
    page.wait_for_timeout(200)
    assert abs(target.evaluate("e => e.getBoundingClientRect().top") - top) <= 2
    picked_js = """() => [...document.querySelectorAll('.tabbed-set')].map(set => {
        const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
        return set.querySelectorAll(':scope > .tabbed-labels > label')[i]?.textContent.trim() || '';
    })"""
    assert set(page.evaluate(picked_js)) == {"test-quick"}
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
    assert set(page.evaluate(picked_js)) == {"test-quick"}
    assert errors == [], errors


def test_scheme_toggle_switches_and_is_remembered(served, watched):
    """The light/dark toggle works without mkdocs-material's palette runtime (its partial is
    overridden in labkit/theme; docs/assets/casebook.js switches): a click turns the page dark,
    the next page opens dark, Enter on the toggle turns it light again."""
    url, _ = served
    page, errors, _ = watched
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
    assert page.locator('[data-md-component="palette"]').count() == 0
    scheme = lambda: page.evaluate("document.body.getAttribute('data-md-color-scheme')")
    toggle = page.locator("form[data-pc-palette] label:visible")
    assert scheme() == "default" and toggle.count() == 1
    toggle.click()
    page.wait_for_timeout(100)
    assert scheme() == "slate" and toggle.get_attribute("title") == "Light mode"
    page.goto(f"{url}/method/", wait_until="networkidle")
    assert scheme() == "slate"
    page.locator("form[data-pc-palette] input:checked").focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(100)
    assert scheme() == "default"
    assert errors == [], errors


def test_hosts_page_lists_both_hosts(served, watched, artifacts_dir):
    url, _ = served
    page, errors, requests = watched
    page.goto(f"{url}/hosts/", wait_until="networkidle")
    text = page.locator("article").inner_text()
    assert "test-quick" in text and "epyc" in text.lower()
    page.screenshot(path=str(artifacts_dir / "hosts.png"), full_page=True)
    assert errors == []
    assert [r for r in requests if not r.startswith((url, "data:"))] == []


def test_compare_page_puts_both_hosts_side_by_side(served, watched, artifacts_dir, root):
    url, host_dir = served
    page, errors, requests = watched
    page.goto(f"{url}/compare/", wait_until="networkidle")
    ref = model.load(next((root / "results").glob("*/lat_tcp.json")))
    title = f"test-quick vs {ref['host']['label']}"
    tab = page.locator(".tabbed-labels label", has_text=title)
    if tab.count():  # several pairs of hosts: one tab each (a tab but the first is fetched when shown)
        assert tab.count() == 1
        tab.click()
        block = page.locator(".tabbed-block:visible").first
    else:  # one pair: no tab strip, the pair named in a caption over its tables
        caption = page.locator(".pc-caption", has_text=title)
        assert caption.count() == 1
        block = page.locator(".pc-data", has=caption)
    expect(block.locator(":scope > .pc-fold")).to_have_count(0)
    # each lab's table is folded under its counts; a large one is fetched when opened
    fold = block.locator("details", has_text="lat_tcp:").first
    assert re.search(r"lat_tcp: \d+ measurements in common, \d+ beyond noise, \d+ within noise, \d+ with too few samples", fold.locator("summary").inner_text())
    fold.locator("summary").click()
    expect(fold.locator(":scope > .pc-fold")).to_have_count(0)
    text = fold.inner_text()
    assert f"ratio to {ref['host']['label']}" in text
    assert "within noise" in text or "yes" in text
    page.screenshot(path=str(artifacts_dir / "compare.png"), full_page=True)
    assert errors == []
    assert [r for r in requests if not r.startswith((url, "data:"))] == []


def test_flame_graph_zooms_and_searches(served, watched, artifacts_dir):
    """A flame graph on the page stays interactive: a click on a frame zooms (inferno's
    unzoom button appears), and search highlights matching frames."""
    url, _ = served
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


@pytest.mark.parametrize("width", [390, 1280])
def test_tables_that_scroll_sideways_and_only_they_can_be_focused(served, watched, width):
    """docs/assets/casebook.js measures each table as it nears the viewport (no layout of the
    whole chapter at load) and leaves it focusable, as a named region, only if it scrolls
    sideways (axe: scrollable-region-focusable); a table not yet measured is focusable."""
    url, _ = served
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{url}/cases/fio_engines/", wait_until="networkidle")
    state_js = """() => [...document.querySelectorAll('.md-typeset__scrollwrap')].filter(w => w.checkVisibility())
        .map(w => ({scrolls: w.scrollWidth > w.clientWidth + 1, tabindex: w.getAttribute('tabindex'),
                    label: w.getAttribute('aria-label'), role: w.getAttribute('role')}))"""
    before = page.evaluate(state_js)
    assert before and all(s["tabindex"] == "0" for s in before if s["scrolls"])
    assert any(s["label"] == "Table" for s in before)  # far below: not measured yet, focusable
    y = 0   # blocks change height as they render (content-visibility), so the end is re-read
    while y < page.evaluate("document.body.scrollHeight"):
        page.evaluate(f"window.scrollTo(0, {y})")
        page.wait_for_timeout(30)
        y += 600
    page.wait_for_timeout(300)
    after = page.evaluate(state_js)
    assert {s["scrolls"] for s in after} == {True, False}, width
    for s in after:
        want = ("0", "region", "Table (scrolls sideways)") if s["scrolls"] else (None, None, None)
        assert (s["tabindex"], s["role"], s["label"]) == want, s
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_original_vs_here_is_a_card_per_row_on_a_phone(served, watched, width):
    """labkit.macros.stacked_table on a chapter: at 390 px each row is a card that fits the screen
    (no sideways scroll), the header row is hidden from sight but not from screen readers, and
    each cell shows its column's header, the emulated host's badge included; at 1280 px it is a
    table whose cells show no such label."""
    url, _ = served
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{url}/cases/optane_kyber/", wait_until="networkidle")
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


def test_blocks_far_below_are_not_rendered_at_load_and_annotations_are_not_clipped(served, watched):
    """docs/assets/casebook.css skips the rendering of data blocks far from the viewport
    (content-visibility: auto, which also clips what overflows a block), except blocks that hold
    code annotations, whose tooltips overflow: one is opened and must lie within the viewport,
    painted over the text below rather than cut at the block's edge."""
    url, _ = served
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{url}/cases/fio_engines/", wait_until="networkidle")
    skipped = page.evaluate("""() => [...document.querySelectorAll('.md-typeset > .pc-data')]
        .filter(b => getComputedStyle(b).contentVisibility === 'auto'
                     && !b.firstElementChild.checkVisibility({contentVisibilityAuto: true})).length""")
    assert skipped >= 5, skipped
    page.goto(f"{url}/tools/perf/", wait_until="networkidle")
    marker = page.locator(".md-annotation__index").nth(2)
    marker.scroll_into_view_if_needed()
    holding = page.evaluate("""() => [...document.querySelectorAll('.md-typeset > *')]
        .filter(b => b.querySelector('.md-annotation')).map(b => getComputedStyle(b).contentVisibility)""")
    assert holding and set(holding) == {"visible"}, holding
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
    """For each tab set holding an annotated output (labkit.macros.annotated_output), the tab
    shown: its title, the code annotations mkdocs-material built in it, the ``(n)!`` markers left
    as text in its code, and whether its list of notes is still shown as a list."""
    return page.evaluate("""() => [...document.querySelectorAll('.tabbed-set[data-pc-tabs]')]
        .filter(set => set.querySelector('.pc-annotated')).map(set => {
            const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
            const block = set.querySelectorAll(':scope > .tabbed-content > .tabbed-block')[i];
            const code = [...block.querySelectorAll('.highlight code')];
            return {title: set.querySelectorAll(':scope > .tabbed-labels > label')[i].textContent.trim(),
                    loaded: !block.querySelector('.pc-fold'),
                    code: code.length,
                    live: block.querySelectorAll('.md-annotation').length,
                    literal: code.filter(c => /\\(\\d+\\)!/.test(c.textContent)).length,
                    lists: [...block.querySelectorAll('.highlight + ol')].filter(l => l.checkVisibility()).length};
        })""")


def test_code_annotations_work_in_every_host_tab(committed, watched):
    """A tool card's annotated output has mkdocs-material's annotation markers, not literal
    ``# (1)!`` lines and a plain list, in the second host's tab as in the first: material builds
    annotations only at page load, so such a tab is never fetched later (mkdocs_hooks
    ``_ANNOTATED``). The pick of host is remembered, so the next card opens on that host: its
    annotations work too."""
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
        # another host's tab fetched when shown would arrive once scrolled near: give it the chance
        for s in page.locator(".tabbed-set[data-pc-tabs]:has(.pc-annotated)").all():
            s.scroll_into_view_if_needed()
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(300)
        shown = _annotations_of_shown_tabs(page)
        assert shown and {t["title"] for t in shown} == {second}, (card, shown)
        with_code = [t for t in shown if t["code"]]
        assert with_code and all(t["loaded"] for t in shown), (card, shown)
        assert all(t["live"] and not t["literal"] and not t["lists"] for t in with_code), (card, shown)
    assert errors == [], errors


def test_output_lines_keep_their_columns_on_a_phone(committed, watched):
    """At 390 px a step block's command wraps, but its output lines (``.go``, labkit/lexer.py) do
    not: each stays one line, and a block whose lines are wider than the screen scrolls sideways
    (docs/assets/casebook.css). nvme_swiotlb shows strace -c's table, wider than a phone."""
    page, errors, _ = watched
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"{committed}/evidence/nvme_swiotlb/", wait_until="networkidle")
    block = page.locator("pre:has(.go)", has_text="usecs/call").first
    block.scroll_into_view_if_needed()
    got = block.evaluate("""pre => {
        const code = pre.querySelector('code'), line = parseFloat(getComputedStyle(code).lineHeight);
        const heights = [...code.querySelectorAll('.go')].map(s => s.getBoundingClientRect().height);
        return {line, tallest: Math.max(...heights), n: heights.length,
                scrolls: code.scrollWidth > code.clientWidth, prompts: code.querySelectorAll('.gp').length}}""")
    assert got["n"] > 3 and got["prompts"] == 1, got
    assert got["tallest"] < 1.5 * got["line"] and got["scrolls"], got
    assert errors == [], errors


@pytest.mark.parametrize("width", [390, 1280])
def test_figure_text_is_legible_at_every_width(committed, watched, width):
    """Every flame graph and heat map on optane_kyber is drawn at three quarters of its own size
    or more, so inferno's 12 px text stays 9 px or more (labkit.macros.flamegraph's ``--pc-w``,
    docs/assets/casebook.css): a phone and a 1280 px window's narrower column scroll sideways."""
    page, errors, _ = watched
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(f"{committed}/evidence/optane_kyber/", wait_until="networkidle")
    got = page.evaluate("""() => [...document.querySelectorAll('object.pc-flamegraph')].filter(o => o.offsetParent)
        .map(o => ({src: o.dataset.pcSrc, own: +o.getAttribute('width'), shown: o.getBoundingClientRect().width,
                    column: o.parentElement.clientWidth}))""")
    owns = {g["own"] for g in got}   # inferno's 1200 px flame graphs and the narrower heat map
    assert len(got) >= 4 and 1200 in owns and any(w < 1200 for w in owns), got
    for g in got:
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
    page.wait_for_function("() => document.querySelector('.pc-cast .ap-term')", timeout=15000)
    got = cast.evaluate("""d => ({font: parseFloat(getComputedStyle(d.querySelector('.ap-term')).fontSize),
        scrolls: d.scrollWidth > d.clientWidth + 1, tabindex: d.getAttribute('tabindex'),
        label: d.getAttribute('aria-label')})""")
    assert got["font"] >= 10, got
    if width == 390:
        assert got["scrolls"] and got["tabindex"] == "0" and got["label"].endswith("(scrolls sideways)"), got
    else:
        assert not got["scrolls"] and got["tabindex"] is None, got
    assert errors == [], errors
