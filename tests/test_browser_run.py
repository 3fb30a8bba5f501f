"""A real quick run's pages in headless Chromium (Debian's, driven by Playwright): the
chapter's tables show the result's medians with their figure column in sight on a phone, host
tabs and flame graphs work, the hosts and compare pages list this run's host beside ours, no
console errors, and no request leaves 127.0.0.1. Screenshots go to test-artifacts/."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from conftest import build_site, serve
from labkit import model
from labkit.view import render
import refhost

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


def whole(text: str) -> re.Pattern:
    """``text`` as a whole label or caption, for Playwright's ``has_text``: not followed by a
    word character or a hyphen, so that a host label does not also match a longer label that
    begins with it (``epyc-kvm-2vcpu`` and ``epyc-kvm-2vcpu-…``)."""
    return re.compile(re.escape(text) + r"(?![\w-])")


def shown_median(result: dict, m: dict) -> str:
    """The median of measurement ``m`` as the pinned round-trip table of ``result`` shows it
    (one precision per column: labkit.view.render.measurement_table with page=True)."""
    ms = render.select(result, "round_trip", {"experiment": "pinned"})
    _, rows = render.measurement_table(ms, [], page=True)
    return rows[ms.index(m)][0]


def test_chapter_tables_tabs_flamegraph(served, watched, artifacts_dir):
    url, host_dir = served
    page, errors, requests = watched
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")

    # the committed host whose tab comes first: the reference (committed hosts first, an emulated
    # CPU last: labkit.site.macros.build.all_hosts)
    ref = model.load(refhost.result("lat_tcp"))
    ref_label = ref["host"]["label"]
    same = next(m for m in ref["measurements"] if m["case"].get("experiment") == "pinned" and m["case"]["pin"] == "same-cpu")
    table = page.locator(".tabbed-set").filter(has_text="server_cpu").first
    ref_tab = table.locator("label", has_text=whole(ref_label))
    assert ref_tab.count() == 1
    table.scroll_into_view_if_needed()
    expect(table.locator(".tabbed-block").first).to_contain_text(shown_median(ref, same), use_inner_text=True)

    # pick the other host in one table: every linked tab set on the page follows
    quick = model.load(host_dir / "lat_tcp.json")
    table.locator("label:has-text('test-quick')").click()
    q_same = next(m for m in quick["measurements"] if m["case"].get("experiment") == "pinned" and m["case"]["pin"] == "same-cpu")
    labels = table.locator(":scope > .tabbed-labels > label").all_inner_texts()
    at = next(i for i, t in enumerate(labels) if "test-quick" in t)
    visible = table.locator(":scope > .tabbed-content > .tabbed-block").nth(at)
    expect(visible).to_be_visible()
    expect(visible).to_contain_text(shown_median(quick, q_same), use_inner_text=True)
    checked = page.evaluate("""() => [...document.querySelectorAll('.tabbed-set')].map(set => {
        const i = [...set.querySelectorAll(':scope > input')].findIndex(x => x.checked);
        return set.querySelectorAll(':scope > .tabbed-labels > label')[i]?.textContent || '';
    })""")
    assert checked and all("test-quick" in c for c in checked), checked
    ref_tab.click()

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



# For each tab set, the title of the tab shown.
def test_hosts_page_lists_both_hosts(served, watched, artifacts_dir):
    url, _ = served
    page, errors, requests = watched
    page.goto(f"{url}/hosts/", wait_until="networkidle")
    text = page.locator("article").inner_text()
    assert "test-quick" in text and "xeon" in text.lower()
    page.screenshot(path=str(artifacts_dir / "hosts.png"), full_page=True)
    assert errors == []
    assert [r for r in requests if not r.startswith((url, "data:"))] == []


def test_compare_page_puts_both_hosts_side_by_side(served, watched, artifacts_dir):
    url, host_dir = served
    page, errors, requests = watched
    page.goto(f"{url}/compare/", wait_until="networkidle")
    ref = model.load(refhost.result("lat_tcp"))
    title = f"test-quick vs {ref['host']['label']}"
    tab = page.locator(".tabbed-labels label", has_text=whole(title))
    if tab.count():  # several pairs of hosts: one tab each (a tab but the first is fetched when shown)
        assert tab.count() == 1
        tab.click()
        block = page.locator(".tabbed-block:visible").first
    else:  # one pair: no tab strip, the pair named in a caption over its tables
        caption = page.locator(".pc-caption", has_text=whole(title))
        assert caption.count() == 1
        block = page.locator(".pc-data", has=caption)
    expect(block.locator(":scope > .pc-fold")).to_have_count(0)
    # each lab's table is folded under its counts; a large one is fetched when opened (a data
    # page: mkdocs_hooks.LAZY_PAGES)
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
