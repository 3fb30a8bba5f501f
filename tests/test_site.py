"""The site built for real: strict build, results injected, broken inputs fail the build."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, build_site
import refhost
from labkit import model
from labkit.view import render

pytestmark = pytest.mark.slow   # whole site builds


@pytest.fixture(scope="session")
def site(committed_site) -> Path:
    """The site of the committed results (built once per session, conftest.py)."""
    return committed_site


def _copy_repo(dst: Path) -> Path:
    """A throwaway copy of what the build reads: docs, config and every path mkdocs.yml watches."""
    watched = re.findall(r"^  - (\S+)$", (ROOT / "mkdocs.yml").read_text().split("\nwatch:\n", 1)[1].split("\n\n", 1)[0],
                         re.M)
    assert watched, "mkdocs.yml has no watch list"
    for name in ("docs", *watched):
        shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", dst / "mkdocs.yml")
    return dst


def test_no_page_points_to_the_write_ups_files(site):
    """Nothing a reader sees names where the project keeps the original write-ups: no built page
    (lazily loaded folds included) holds a write-up's file name (original.toml's [source] seed,
    ``NNN_<16 hex>.txt``), a ``seeds/`` path or ``../shared/``."""
    names = {tomllib.loads(p.read_text())["source"]["seed"] for p in ROOT.glob("labs/*/original.toml")}
    assert names and all(re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", n) for n in names), names
    for page in site.rglob("*.html"):
        text = page.read_text(errors="replace")
        found = [n for n in names if n in text] + re.findall(r"\.\./shared/|\bseeds/", text)
        assert not found, (page.relative_to(site), found)


def test_every_case_page_is_built(site):
    for page in (ROOT / "docs" / "cases").glob("*.md"):
        assert (site / "cases" / page.stem / "index.html").exists(), page


def median_cells(r: dict, experiment: str) -> list[str]:
    """The median cells of lat_tcp's round-trip table for ``experiment`` as the page shows them
    (units in the header, one precision per column, right-aligned)."""
    ms = render.select(r, "round_trip", {"experiment": experiment})
    header, rows = render.measurement_table(ms, [], page=True)
    assert header[0] == "median (µs)", header
    return [f'<td style="text-align: right;">{row[0]}</td>' for row in rows]


def page_and_fragments(page_dir: Path) -> str:
    """A page's HTML and its fragments (folded blocks, other hosts' tabs: fetched when shown)."""
    return "".join(p.read_text() for p in [page_dir / "index.html", *sorted(page_dir.glob("fold-*.html"))])


def test_medians_of_the_result_are_on_the_page(site):
    """Every median, every host's, is on the chapter or on its evidence page, or in one of their
    fragments (fetched when shown): the chapter shows what each step needs, the evidence page all."""
    html = page_and_fragments(site / "cases" / "lat_tcp") + page_and_fragments(site / "evidence" / "lat_tcp")
    for path in sorted((ROOT / "results").glob("*/lat_tcp.json")):
        r = model.load(path)
        for experiment in ("pinned", "msize", "free"):
            for cell in median_cells(r, experiment):
                assert cell in html, (path, experiment, cell)


def test_no_unrendered_macros_and_no_external_urls(site):
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "{{" not in re.sub(r"<(code|pre)[^>]*>.*?</\1>", "", text, flags=re.S), page
        # a page may link elsewhere (<a href>), but must load nothing from another origin
        loads = re.findall(r'(?:src|data)="(https?://[^"]+)"', text)
        loads += re.findall(r'<link[^>]+href="(https?://[^"]+)"', text)
        for url in loads:
            pytest.fail(f"{page} loads {url}: pages must not load anything from another origin")


def test_artifacts_are_served(site):
    for path in sorted((ROOT / "results").glob("*/*.json")):
        r = model.load(path)
        for a in r["artifacts"]:
            assert (site / "results" / path.parent.name / a["path"]).is_file(), a


def test_edited_result_changes_the_rendered_table(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    path = next((repo / "results").glob("*/lat_tcp.json"))
    r = json.loads(path.read_text())
    metric = next(m for m in r["measurements"] if m["case"].get("experiment") == "pinned")["metric"]
    # a marker no real run would give: every sample of the metric scaled by 1000 (the medians
    # follow), all alike, so that every ratio a claim reads, and every verdict a page's prose
    # reads (prose_reads), stays as it was
    for m in r["measurements"]:
        if m["metric"] == metric:
            m["samples"] = [s * 1000 for s in m["samples"]]
            m.update(model.summarize(m["samples"]))
    model.write_atomic(path, r)
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert median_cells(model.load(path), "pinned")[0] in page_and_fragments(tmp_path / "site" / "cases" / "lat_tcp")


@pytest.mark.parametrize("bad", [
    '{{ results_table("lat_tcp", "no_such_metric") }}',
    '{{ results_table("no_such_lab", "round_trip") }}',
    '{{ flamegraph("lat_tcp", pin="no-such-pin") }}',
    '{{ step_output("lat_tcp", "no_such_step") }}',
    '{{ chart("lat_tcp", "round_trip", x="msize", kind="pie") }}',
    '{{ undefined_macro() }}',
    '--8<-- "labs/lat_tcp/no_such_file.sh"',
])
def test_broken_page_fails_strict_build(tmp_path, bad):
    repo = _copy_repo(tmp_path / "repo")
    page = repo / "docs" / "cases" / "lat_tcp.md"
    page.write_text(page.read_text() + "\n\n" + bad + "\n")
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode != 0, f"build passed with {bad!r}"


def test_invalid_result_fails_build(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    path = next((repo / "results").glob("*/lat_tcp.json"))
    r = json.loads(path.read_text())
    r["measurements"][0]["median"] += 1.0
    path.write_text(json.dumps(r))
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode != 0
    assert "median" in proc.stderr + proc.stdout


def test_shell_braces_in_pages_without_macros_are_left_alone(tmp_path):
    repo = _copy_repo(tmp_path / "repo")
    (repo / "docs" / "method.md").write_text((repo / "docs" / "method.md").read_text()
                                             + '\n```bash\necho "${#arr[@]} {{ not a macro }}"\n```\n')
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "not a macro" in (tmp_path / "site" / "method" / "index.html").read_text()


def test_figures_are_files_next_to_their_page(site):
    """Charts are SVG files beside their page, with a size and lazy loading, never inlined."""
    n = 0
    for page in site.rglob("*.html"):
        text = page.read_text()
        assert "data:image" not in text, page
        for img in re.findall(r"<img [^>]*class=\"pc-chart[^>]*>", text):
            src = re.search(r'src="([^"]+)"', img).group(1)
            assert "/" not in src and (page.parent / src).is_file(), (page, src)
            assert 'loading="lazy"' in img and re.search(r'width="\d+" height="\d+"', img), img
            n += 1
    assert n > 0


def test_player_only_where_a_recording_is(site):
    """The terminal player's script and styles are on pages with a recording only, and its
    script is loaded when a recording comes near (docs/assets/casebook.js), not with the page."""
    with_cast = 0
    for page in site.rglob("index.html"):
        text = page.read_text()
        if "data-pc-cast=" in text:
            with_cast += 1
            assert re.search(r'<template id="pc-player-js" data-src="[^"]*asciinema-player\.min\.js">', text), page
            assert re.search(r'<link rel="stylesheet" href="[^"]*asciinema-player\.css">', text), page
            assert not re.search(r'<script[^>]*asciinema-player', text), page
        else:
            assert "asciinema-player" not in text, page
    assert with_cast >= 1



def test_no_script_blocks_the_first_paint(site):
    """Every external script of every page is deferred (labkit/site/theme/main.html): a parser-blocking
    one at the end of <body> could run before the first paint and delay the chapter's heading,
    Lighthouse's largest contentful paint. Material's bundle and docs/assets/casebook.js are
    among them, in that order."""
    pages = 0
    for page in site.rglob("index.html"):
        text = page.read_text()
        tags = re.findall(r"<script\b[^>]*\bsrc=[^>]*>", text)
        if not tags:
            continue
        pages += 1
        assert all(re.match(r"<script defer src=", t) for t in tags), (page, tags)
        names = [re.search(r'src="([^"]+)"', t).group(1).rsplit("/", 1)[-1] for t in tags]
        assert names.index("casebook.js") > next(i for i, n in enumerate(names) if n.startswith("bundle.")), names
    assert pages >= 6

def test_measured_data_stay_out_of_the_search_index(site):
    """The index every page downloads holds the prose, not the tables, outputs and evidence."""
    index = (site / "search" / "search_index.json").read_text()
    assert "measurements pooled" not in index  # claims evidence
    r = model.load(next((ROOT / "results").glob("*/lat_tcp.json")))
    assert render.measurement_table(render.select(r, "round_trip", {"experiment": "pinned"}), [], page=True)[0][0] not in index
    assert "lat_tcp" in index  # the chapters are still found


def leaked_rows(site: Path) -> list[tuple[str, str]]:
    """(page, row) for each table row of a data block (``<div class="pc-data">``) of a page whose
    text, as the search index flattens it (cells joined by spaces), is in that page's index
    entries. A data block's nested ``</div>`` once ended material's exclusion early (its parser
    compares elements by tag), so the rows after it were indexed."""
    from selectolax.lexbor import LexborHTMLParser
    docs = json.loads((site / "search" / "search_index.json").read_text())["docs"]
    leaks = []
    for page in sorted(site.glob("**/index.html")):
        url = page.parent.relative_to(site).as_posix() + "/" if page.parent != site else ""
        text = " ".join(d["text"] for d in docs if d["location"].split("#")[0] == url)
        if not text:
            continue
        for block in LexborHTMLParser(page.read_text()).css("div.pc-data"):
            for tr in block.css("tr"):
                cells = [c.text(deep=True).strip() for c in tr.css("td")]
                row = " ".join(c for c in cells if c)
                if len(cells) >= 3 and len(row) >= 12 and row in text:
                    leaks.append((url, row))
    return leaks


def test_no_data_table_row_is_in_the_search_index(site):
    """Every row of every data block stays out of the index (its page's entries), not only the rows
    before the block's first nested element (labkit/site/mkdocs_hooks.py sets the blocks aside
    while the search plugin parses a page)."""
    leaks = leaked_rows(site)
    assert not leaks, leaks[:5]


def test_one_host_means_no_tab_strip(tmp_path):
    """With a single host, data blocks carry a host caption instead of a one-tab strip."""
    repo = _copy_repo(tmp_path / "repo")
    def keep_first(p: Path):
        """A hardware host, the reference of the most labs (the pages' unnamed verdict guards
        read the reference; the chapters need its flame graphs), then the one with most labs."""
        emulated = any(json.loads(f.read_text())["host"].get("emulation") for f in p.glob("*.json"))
        refs = sum(refhost.host(f.stem) == p.name for f in p.glob("*.json"))
        return (emulated, -refs, -len(list(p.glob("*.json"))))
    hosts = sorted((p for p in (repo / "results").iterdir() if p.is_dir()), key=keep_first)
    # a lab whose reference is on another host joins the kept one, as if measured there
    kept_host = json.loads(next(hosts[0].glob("*.json")).read_text())["host"]
    for extra in hosts[1:]:
        for f in extra.glob("*.json"):
            r = json.loads(f.read_text())
            if not (hosts[0] / f.name).exists() and not r["host"].get("emulation"):
                (hosts[0] / f.name).write_text(json.dumps(dict(r, host=kept_host)))
                shutil.copytree(extra / f.stem, hosts[0] / f.stem)
        shutil.rmtree(extra)
        # the pages' guards on sentences about a removed host's tab go with it (prose_reads
        # fails a build whose named host has no result, as it should for the real site)
        guard = re.compile(r'\{\{ prose_reads\([^}]*host="' + re.escape(extra.name) + r'"\) \}\}')
        for page in [*(repo / "docs").rglob("*.md"), *(repo / "labs").glob("*/evidence.md")]:
            text = page.read_text()
            if guard.search(text):
                page.write_text(guard.sub("", text))
    proc = build_site(tmp_path / "site", repo / "mkdocs.yml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    html = (tmp_path / "site" / "cases" / "lat_tcp" / "index.html").read_text()
    assert "class=\"tabbed-set" not in html
    assert f'<p class="pc-caption">{hosts[0].name}</p>' in html


def _tab_set(*blocks: str) -> str:
    inputs = "".join(f'<input id="__tabbed_1_{i}" name="__tabbed_1" type="radio" />' for i in range(len(blocks)))
    body = "".join(f'<div class="tabbed-block">{b}</div>' for b in blocks)
    return (f'<div class="tabbed-set tabbed-alternate" data-pc-tabs="1:{len(blocks)}">{inputs}'
            f'<div class="tabbed-labels"></div><div class="tabbed-content">{body}</div></div>')


def test_lazy_tabs_moves_every_large_tab_but_the_first():
    """The first host's tab stays; a later one longer than the threshold becomes a placeholder
    and a fragment holding exactly its HTML (nested <div>s included); a short one stays."""
    from labkit.site.mkdocs_hooks import lazy_tabs
    first = "<p>" + "a" * 600 + "</p>"
    big = '<div class="x"><div>' + "b" * 600 + "</div></div><p>after the nested divs</p>"
    small = "<p>c</p>"
    html = "<p>before</p>" + _tab_set(first, big, small) + "<p>between</p>" + _tab_set(first, big) + "<p>end</p>"
    store: dict[str, str] = {}
    out = lazy_tabs(html, "cases/x/", store)
    assert list(store.values()) == [big], store  # the same block twice: one fragment
    name = next(iter(store)).removeprefix("cases/x/")
    assert out.count(f'data-pc-fold="{name}"') == 2
    assert first in out and small in out and big not in out
    assert out.startswith("<p>before</p>") and "<p>between</p>" in out and out.endswith("<p>end</p>")
    assert out.count('<div class="tabbed-block">') == 5 and out.count("<div") == out.count("</div>")
    assert lazy_tabs(html, "cases/x/", {}, min_chars=10_000) == html


def test_large_folds_are_fetched_when_opened(site):
    """A large closed block keeps only a placeholder in its page; its contents are a file next
    to the page, exactly the HTML that was folded (the lab's source listing on its evidence page)."""
    html = (site / "evidence" / "lat_tcp" / "index.html").read_text()
    names = re.findall(r'<div class="pc-fold" data-pc-fold="(fold-[0-9a-f]{12}\.html)">', html)
    assert names and 'class="pc-lazy-page"' in html   # a data page (mkdocs_hooks.LAZY_PAGES)
    texts = [(site / "evidence" / "lat_tcp" / n).read_text() for n in names]
    assert any("labs/lat_tcp/run.sh: TCP round-trip" in t for t in texts)
    assert "labs/lat_tcp/run.sh: TCP round-trip" not in html


def test_chapters_and_cards_are_whole(site):
    """A chapter, a tool card, the home and method pages hold all their content (only data
    pages, mkdocs_hooks.LAZY_PAGES, fetch fragments): no placeholder, no fragment file, no
    block left unrendered until the reader nears it (``pc-lazy-page``)."""
    pages = [site / "index.html", site / "method" / "index.html",
             *site.glob("cases/*/index.html"), *site.glob("tools/*/index.html")]
    assert len(pages) > 10
    for page in pages:
        html = page.read_text()
        assert "data-pc-fold" not in html and "pc-lazy-page" not in html, page
        assert not list(page.parent.glob("fold-*.html")), page


def test_a_cold_build_gives_the_site_of_a_warm_one(tmp_path):
    """With an empty build cache, charts are drawn beside the build (labkit.site.macros.beside) and
    filled in later; with the cache that build left, they are read back in the build's own
    process. Both give the same files, byte for byte."""
    cache = tmp_path / "cache"
    for name in ("cold", "warm"):
        proc = build_site(tmp_path / name, env={"PCB_BUILD_CACHE": str(cache)})
        assert proc.returncode == 0, proc.stderr[-3000:]
    cold = {p.relative_to(tmp_path / "cold"): p.read_bytes() for p in (tmp_path / "cold").rglob("*") if p.is_file()}
    warm = {p.relative_to(tmp_path / "warm"): p.read_bytes() for p in (tmp_path / "warm").rglob("*") if p.is_file()}
    assert sorted(cold) == sorted(warm)
    assert [p for p in cold if cold[p] != warm[p]] == []
    assert any(p.name.startswith("fig-") for p in cold)


def test_serve_draws_charts_beside_each_build_and_leaves_no_process(tmp_path):
    """``mkdocs serve`` (what ``make serve`` runs) builds in one long-lived process: its first
    build, from an empty cache, fills in every chart drawn by the workers, a rebuild after an
    edit does too and runs an edited macro's new code, and stopping the server leaves none of its processes (the fork server, the
    workers) behind."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    repo = _copy_repo(tmp_path / "repo")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PERF_CASEBOOK_LOCAL="0", PCB_BUILD_CACHE=str(tmp_path / "cache"))
    log = (tmp_path / "serve.log").open("w")
    # SIGINT as a terminal gives it: the suite itself may run with SIGINT ignored (a background
    # job, nohup), which a child would inherit and which would make Ctrl-C below do nothing.
    proc = subprocess.Popen(["env", "--default-signal=INT", sys.executable, "-m", "mkdocs", "serve", "--strict", "-a",
                             f"127.0.0.1:{port}"],
                            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def page() -> str:
        end = time.time() + 120
        while time.time() < end:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/evidence/fio_engines/", timeout=5) as r:
                    return r.read().decode()
            except OSError:
                time.sleep(0.5)
        raise AssertionError((tmp_path / "serve.log").read_text()[-3000:])

    def builds() -> int:
        return (tmp_path / "serve.log").read_text().count("Documentation built in")

    try:
        html = page()
        figs = re.findall(r'<img class="pc-chart[^>]*src="(fig-[0-9a-f]+\.svg)" width="\d+" height="\d+"', html)
        assert figs and "@@pcb-draw" not in html
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/evidence/fio_engines/{figs[0]}", timeout=5) as r:
            assert r.read().lstrip().startswith(b"<?xml")
        shutil.rmtree(tmp_path / "cache")                  # the rebuild draws every chart again
        (repo / "docs" / "method.md").write_text((repo / "docs" / "method.md").read_text() + "\nEdited.\n")
        macro = repo / "labkit" / "site" / "evidence.py"     # and a macro: the rebuild runs the edited code
        assert "### Group `" in macro.read_text() and "Group EDITED" not in html
        macro.write_text(macro.read_text().replace("### Group `", "### Group EDITED `"))
        end = time.time() + 120
        while builds() < 2 and time.time() < end:
            time.sleep(0.5)
        assert builds() >= 2, (tmp_path / "serve.log").read_text()[-3000:]
        again = page()
        assert "@@pcb-draw" not in again and "Group EDITED" in again
        assert re.findall(r'src="(fig-[0-9a-f]+\.svg)"', again) == re.findall(r'src="(fig-[0-9a-f]+\.svg)"', html)
    finally:
        os.killpg(proc.pid, signal.SIGINT)                 # Ctrl-C in the terminal of `make serve`
        proc.wait(timeout=60)
        log.close()
    time.sleep(1)
    # exited processes waiting for init to reap them (slow on some VMs) are not left running
    ps = subprocess.run(["ps", "-eo", "pid=,sid=,stat=,args="], capture_output=True, text=True).stdout
    left = [line for line in ps.splitlines() if line.split()[1] == str(proc.pid) and not line.split()[2].startswith("Z")]
    assert left == [], left
