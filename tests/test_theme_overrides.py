"""What the site changes of mkdocs-material, checked without a build or a browser: each
override in labkit/site/theme names the upstream file it was derived from and that file's sha256,
which must be the installed theme's (a theme upgrade that changes the file fails here, in the
fast tier, instead of in the browser tier); the Markdown marks of labkit.site.page_marks; the
data pages' fragments (labkit.site.mkdocs_hooks.lazy_folds, lazy_tabs) on small pages."""

from __future__ import annotations

import hashlib
import re
from importlib import metadata
from pathlib import Path

import markdown
import material
import pytest

from labkit.site.mkdocs_hooks import lazy_folds, lazy_parts, lazy_tabs

ROOT = Path(__file__).resolve().parent.parent
THEME = ROOT / "labkit" / "site" / "theme"
UPSTREAM = Path(material.__file__).parent / "templates"
_DERIVED = re.compile(r"Derived from mkdocs-material (\S+) (\S+), sha256 ([0-9a-f]{64})")
OVERRIDES = sorted(p.relative_to(THEME).as_posix() for p in THEME.rglob("*.html"))


def test_there_are_overrides_to_check():
    assert "main.html" in OVERRIDES and len(OVERRIDES) >= 2


@pytest.mark.parametrize("override", OVERRIDES)
def test_an_override_matches_the_installed_theme_file_it_was_derived_from(override):
    """Each override says which mkdocs-material file (and version) it was made from, with that
    file's sha256; the installed theme's file must still be exactly that one. A partial
    overrides the file of its own path; main.html extends base.html."""
    text = (THEME / override).read_text()
    found = _DERIVED.findall(text)
    assert len(found) == 1, f"labkit/site/theme/{override} names no 'Derived from mkdocs-material VERSION FILE, sha256 HEX'"
    version, upstream, digest = found[0]
    assert upstream == ("base.html" if override == "main.html" else override), (override, upstream)
    installed = metadata.version("mkdocs-material")
    now = hashlib.sha256((UPSTREAM / upstream).read_bytes()).hexdigest()
    assert now == digest, (
        f"labkit/site/theme/{override} was derived from mkdocs-material {version}'s {upstream}, which the "
        f"installed {installed} changed (sha256 {now}): compare the two, adapt the override (or drop it "
        f"if the theme now does what it is for), then record the new sha256 and version")
    assert version == installed


def test_the_theme_is_pinned_at_the_version_the_overrides_name():
    pins = dict(line.split("==") for line in (ROOT / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    versions = {v for o in OVERRIDES for v, _, _ in _DERIVED.findall((THEME / o).read_text())}
    assert versions == {pins["mkdocs-material"]}


def test_material_still_mounts_tab_sets_by_data_tabs():
    """labkit.site.page_marks renames pymdownx's data-tabs so that material's runtime leaves the tab
    sets alone: that works only while the runtime finds them by that attribute."""
    bundle, = (UPSTREAM / "assets" / "javascripts").glob("bundle.*.min.js")
    assert '"[data-tabs]"' in bundle.read_text()


def test_material_still_builds_what_casebook_js_copies_for_fetched_blocks():
    """docs/assets/casebook.js gives a fetched fragment what material's runtime gives a page's own
    blocks at load (``asMaterialDoes``): a copy button, ``nav.md-code__nav >
    button.md-code__button[data-clipboard-target="#ID > code"][data-md-type=copy]``, which
    material's delegated clipboard handler serves, and ``div.md-typeset__scrollwrap >
    div.md-typeset__table`` around a table. Each piece must still be how the installed bundle
    builds them, or the copies drift from the page's own blocks."""
    bundle, = (UPSTREAM / "assets" / "javascripts").glob("bundle.*.min.js")
    js = bundle.read_text()
    assert re.search(r'\("nav",\{class:"md-code__nav"\}\)', js)
    assert re.search(r'class:"md-code__button",title:[^,]+,"data-clipboard-target":`#\$\{\w+\} > code`,"data-md-type":"copy"', js)
    assert '"[data-clipboard-target], [data-clipboard-text]"' in js          # delegated: a later button works
    assert re.search(r'\("div",\{class:"md-typeset__scrollwrap"\},\w+\("div",\{class:"md-typeset__table"\}', js)
    ours = (ROOT / "docs" / "assets" / "casebook.js").read_text()
    for piece in ('"md-code__nav"', '"md-code__button"', '"data-clipboard-target", "#" + pre.id + " > code"',
                  '"data-md-type", "copy"', '"md-typeset__scrollwrap"', '"md-typeset__table"'):
        assert piece in ours, piece


def _md(text: str) -> str:
    return markdown.markdown(text, extensions=["pymdownx.details", "pymdownx.tabbed", "md_in_html", "labkit.site.page_marks"],
                             extension_configs={"pymdownx.tabbed": {"alternate_style": True}})


def test_tab_sets_and_folds_are_marked_also_inside_html_blocks():
    page = ('=== "a"\n\n    x\n\n=== "b"\n\n    y\n\n??? note "N"\n\n    folded\n\n'
            '<div markdown>\n\n??? question "Q"\n\n    inside\n\n=== "c"\n\n    z\n\n</div>\n')
    html = _md(page)
    assert "data-tabs" not in html and html.count('data-pc-tabs="') == 2
    assert html.count("<details") == html.count(" data-search-exclude>") == 2


def _details(body: str, attrs: str = ' class="note"') -> str:
    return f"<details{attrs}><summary>S</summary>{body}</details>"


def test_a_large_closed_block_becomes_a_fragment_and_the_rest_stays():
    big = "<p>" + "b" * 5000 + "</p>"
    annotated = '<div class="highlight"><pre><code>x # (1)!</code></pre></div>\n<p> </p>\n<ol><li>note</li></ol>' + big
    html = ("<p>before</p>" + _details(big) + _details(big, ' class="note" open') + _details("<p>small</p>")
            + _details(annotated) + _details('<div class="annotate">' + big + "</div>")
            + _details(_details(big)) + "<p>end</p>")
    store: dict[str, str] = {}
    out = lazy_folds(html, "evidence/x/", store)
    # the first block and the outer block of the last (with the closed block inside it) moved
    assert sorted(store.values()) == sorted([big, _details(big)])
    names = re.findall(r'<div class="pc-fold" data-pc-fold="(fold-[0-9a-f]{12}\.html)">', out)
    assert [f"evidence/x/{n}" for n in names] == list(store)
    assert out.count(big) == 3                 # the open block's, the annotated ones'
    assert out.startswith("<p>before</p><details") and out.endswith("<p>end</p>")
    assert '<a href="' + names[0] + '">' in out     # without JavaScript, a link to the fragment
    assert lazy_folds(html, "evidence/x/", {}, min_chars=100_000) == html


def test_lazy_parts_folds_then_moves_later_tabs():
    tab = "t" * 600
    page = _md('=== "a"\n\n    first\n\n=== "b"\n\n    ' + tab + '\n\n??? note "N"\n\n    ' + "f" * 5000 + "\n")
    store: dict[str, str] = {}
    out = lazy_parts(page, "evidence/x/", store)
    assert list(store.values()) == [f"\n<p>{'f' * 5000}</p>\n", f"\n<p>{tab}</p>\n"]
    assert "first" in out and tab not in out
    assert lazy_tabs(lazy_folds(page, "evidence/x/", {}), "evidence/x/", {}) == out


def test_put_back_strips_what_materials_search_plugin_strips():
    """labkit.site.mkdocs_hooks.put_back gives the data blocks it set aside the attributes that
    mkdocs-material's search plugin leaves on the rest of the page after indexing it (its
    on_page_context removes ``data-search-*="..."``): the same page through the installed plugin
    and through ``_SEARCH_ATTR`` must come out alike, so a plugin that strips otherwise fails here."""
    from types import SimpleNamespace

    from material.plugins.search.plugin import SearchPlugin

    from labkit.site.mkdocs_hooks import _SEARCH_ATTR
    plugin = SearchPlugin()
    assert plugin.load_config({}) == ([], [])
    plugin.search_index = SimpleNamespace(add_entry_from_context=lambda page: None)
    html = ('<div class="pc-data" data-search-exclude><p data-search-x="y">a</p>'
            '<details data-search-exclude="" class="note"><summary>s</summary></details></div>'
            '<p data-other="1" data-search-boost="2">b</p>')
    page = SimpleNamespace(content=html)
    plugin.on_page_context({}, page=page, config=None, nav=None)
    assert page.content != html                           # the plugin did strip something
    assert _SEARCH_ATTR.sub("", html) == page.content
