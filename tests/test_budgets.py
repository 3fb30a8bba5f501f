"""Budgets of every page of the built site, in headless Chromium (Debian's, driven by
Playwright) with axe-core injected from the project's own node_modules (``make setup``):
before any interaction a page transfers at most 400 KB (recordings excluded), requests
nothing from another origin, logs no console error, and axe-core finds no serious or
critical problem in the light or the dark scheme. The same checks print per page with
`make bench` (tests/bench.py), which adds Lighthouse's scores."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import AXE_JS, MAX_PAGE_BYTES, page_budget, serious, serve_site, site_pages
from conftest import build_site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The site built from the committed results, served gzip-compressed as a web host would."""
    site = tmp_path_factory.mktemp("site-budgets")
    built = build_site(site)
    assert built.returncode == 0, built.stderr[-3000:]
    server, url = serve_site(site)
    yield site, url
    server.shutdown()


DOCS = Path(__file__).resolve().parent.parent / "docs"


def _pages() -> list[str]:
    """URL path of every page of the guide, from its Markdown sources (known at collection)."""
    out = []
    for md in sorted(DOCS.rglob("*.md")):
        rel = md.relative_to(DOCS).with_suffix("").as_posix()
        out.append("/" if rel == "index" else "/" + (rel[: -len("/index")] if rel.endswith("/index") else rel) + "/")
    return out


def test_every_page_is_measured(served):
    """The pages the budget tests check are the built site's pages."""
    site, _ = served
    assert set(site_pages(site)) == set(_pages())


@pytest.mark.parametrize("path", _pages())
def test_page_budget(served, browser, path):
    if not AXE_JS.exists():
        pytest.skip(f"{AXE_JS} missing: `make setup` installs axe-core with npm")
    _, url = served
    for viewport in ("desktop", "phone"):
        r = page_budget(browser, url, path, viewport, run_axe=viewport == "desktop")
        assert r["bytes"] <= MAX_PAGE_BYTES, (viewport, r["bytes"], r["largest"])
        assert r["foreign"] == [], r["foreign"]
        assert r["errors"] == [], r["errors"]
        if viewport == "desktop":
            for scheme in ("light", "dark"):
                bad = [v for v in r["axe"][scheme]["violations"] if v["impact"] in ("serious", "critical")]
                assert serious(r["axe"][scheme]) == 0, (scheme, bad)


def test_budget_catches_a_heavy_page(served, browser, tmp_path):
    """The weight check can fail: a page that pulls a large file is over budget."""
    site, url = served
    heavy = site / "heavy-test" / "index.html"
    heavy.parent.mkdir(exist_ok=True)
    (site / "heavy-test" / "blob.js").write_bytes(__import__("os").urandom(MAX_PAGE_BYTES + 10_000))
    other = url.replace("127.0.0.1", "localhost")  # another origin, on this machine
    heavy.write_text('<!doctype html><html lang="en"><head><title>heavy</title></head><body><main><h1>x</h1>'
                     f'<script src="blob.js"></script><img src="{other}/x.png" alt="x"></main></body></html>')
    r = page_budget(browser, url, "/heavy-test/", run_axe=False)
    assert r["bytes"] > MAX_PAGE_BYTES
    assert r["foreign"] == [f"{other}/x.png"]


def test_folded_block_loads_when_opened(served, browser):
    """Opening a large folded block fetches its contents, with a copy button on its code."""
    _, url = served
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{url}/cases/lat_tcp/", wait_until="networkidle")
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
    block.locator(":scope > summary").click()
    page.wait_for_function("() => document.querySelectorAll('details > .pc-fold').length < %d" % folds)
    opened = page.evaluate("""() => { const d = document.querySelector('details[open]');
        return {code: d.querySelectorAll('pre code').length, copy: d.querySelectorAll('.md-code__button').length}; }""")
    assert opened["code"] >= 1 and opened["copy"] == opened["code"], opened
    assert errors == [], errors
    page.close()
