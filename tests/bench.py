"""`make bench`: figures, not a timed test. Prints each lab's quick (and with --full, full)
wall time, the `mkdocs build` time with all results, and for every built page what a reader's
browser loads before any interaction, against the budgets the suite enforces
(tests/test_budgets.py): transferred bytes ≤ 400 KB (recordings excluded), zero requests off
the site's origin, zero console errors, axe-core serious + critical findings = 0 (light and
dark scheme), and, where Lighthouse is installed (``make setup`` puts it in .tools/node),
Lighthouse's mobile performance and accessibility scores per page.

Usage: .venv/bin/python tests/bench.py [--full] [--labs lat_tcp,...] [--pages-only]
       [--no-lighthouse] [--site DIR]

The page checks (:func:`page_budget`) are the ones the suite's budget test runs, so `make
bench` and `make test` measure the same thing.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))     # the suite's conftest.py, at the checkout's root
from conftest import CHROMIUM, build_site  # noqa: E402

NODE_TOOLS = ROOT / ".tools" / "node" / "node_modules"
AXE_JS = NODE_TOOLS / "axe-core" / "axe.min.js"
LIGHTHOUSE = NODE_TOOLS / ".bin" / "lighthouse"

# Budgets, per page, before any interaction.
MAX_PAGE_BYTES = 400_000          # bytes transferred, recordings (asciicast files) excluded
MIN_LIGHTHOUSE = 95               # performance and accessibility, mobile, home page and chapters
RECORDING_SUFFIXES = (".cast",)
# Chromium as the browser tests launch it (conftest.py: browser_type_launch_args).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]
VIEWPORTS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
# Two rendering frames, for IntersectionObserver callbacks and layout to run, or 250 ms if no frame
# comes: headless Chromium can stop producing frames (requestAnimationFrame never fires), and an
# await on a bare requestAnimationFrame then hangs the test until pytest-timeout kills it.
FRAMES_JS = """() => new Promise(r => {
    let done = false;
    const end = () => { if (!done) { done = true; r(); } };
    requestAnimationFrame(() => requestAnimationFrame(end));
    setTimeout(end, 250);
})"""
# A screen at a time to the end (which moves as fetched blocks arrive), FRAMES_JS at each stop.
SCROLL_THROUGH_JS = """async () => {
    const frames = %s;
    for (let y = 0; y < document.documentElement.scrollHeight; y += innerHeight) {
        scrollTo(0, y);
        await frames();
    }
}""" % FRAMES_JS
# One axe-core pass, under the slow tier's 600 s pytest-timeout (conftest.TIMEOUTS) with room for
# opening the page: fio_engines' opened evidence page (63,500 elements, 37,500 of them table
# cells) took 174 s alone and 224 s beside another worker, color-contrast 180 s of it (2026-11-29).
AXE_TIMEOUT_MS = 480_000


_COMPRESSIBLE = (".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".cast", ".folded", ".map")


class _GzipHandler(http.server.SimpleHTTPRequestHandler):
    """Static files as a production web server sends them: text types gzip-compressed when the
    browser accepts it (GitHub Pages, nginx and the like do), everything else as is."""

    def log_message(self, *args):
        pass

    def send_head(self):
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if not self.path.split("?")[0].endswith("/"):
                return super().send_head()  # the redirect to "dir/"
            path = path / "index.html"
        if path.suffix not in _COMPRESSIBLE or "gzip" not in self.headers.get("Accept-Encoding", "") \
                or not path.is_file():
            return super().send_head()
        body = gzip.compress(path.read_bytes(), 6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


def serve_site(directory: Path):
    """Serve a built site on 127.0.0.1 (random port) in a thread, compressed as a web server
    would (:class:`_GzipHandler`); returns (server, base_url)."""
    handler = functools.partial(_GzipHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def site_pages(site: Path) -> list[str]:
    """URL paths of every page of a built site (``/``, ``/cases/lat_tcp/``, ...), sorted."""
    out = []
    for page in sorted(site.rglob("index.html")):
        rel = page.parent.relative_to(site).as_posix()
        if rel.startswith("results/"):
            continue
        out.append("/" if rel == "." else f"/{rel}/")
    return out


# The shape of an element, as axe-core's checks read it: tag, class, alignment, inline style,
# spans, computed colour, background, font size, weight and display, with or without text, and
# for every element inside it the same computed style, links with or without text and images
# with or without alt text. Two elements of one shape on one background give axe the same
# findings (colour contrast above all, which is most of a pass): their text differs, what the
# checks read does not.
_SHAPE_JS = """const shape = el => {
        const cs = getComputedStyle(el);
        const inner = [...el.querySelectorAll('*')].map(e => {
            const s = getComputedStyle(e);
            return [e.tagName, e.getAttribute('class') || '', s.color, s.backgroundColor, s.fontSize, s.fontWeight,
                    s.display, e.tagName === 'A' ? !!e.textContent.trim() : '', e.tagName === 'IMG' ? e.hasAttribute('alt') : ''].join(':');
        }).join(',');
        return [el.tagName, el.getAttribute('class') || '', el.getAttribute('align') || '', el.getAttribute('style') || '',
                el.colSpan, el.rowSpan, cs.color, cs.backgroundColor, cs.fontSize, cs.fontWeight, cs.display,
                !!el.textContent.trim(), inner].join('|');
    };"""
# Removes from every table each body row whose cells have the shapes (_SHAPE_JS) of an earlier
# row's of the same table, on the same row background. Signatures first, removals after (a
# removal between two reads of computed style would lay the page out again). Returns the count
# removed.
DISTINCT_ROWS_JS = """() => {
    %s
    const repeated = [];
    for (const table of document.querySelectorAll('table')) {
        const seen = new Set();
        for (const row of table.querySelectorAll(':scope > tbody > tr')) {
            const sig = getComputedStyle(row).backgroundColor + '#' + [...row.cells].map(shape).join('||');
            if (seen.has(sig)) repeated.push(row); else seen.add(sig);
        }
    }
    repeated.forEach(row => row.remove());
    return repeated.length;
}""" % _SHAPE_JS


# Removes from every code block (``pre > code``, Pygments' output) each child of the code whose
# shape (_SHAPE_JS) repeats an earlier child's of the same block. Pygments writes one span per
# token and pymdownx one line-number link per line, all on the block's one background, and the
# code element keeps its own text. Signatures first, removals after. Returns the count removed.
DISTINCT_CODE_JS = """() => {
    %s
    const repeated = [];
    for (const code of document.querySelectorAll('pre > code')) {
        const seen = new Set();
        for (const el of code.children) {
            const sig = shape(el);
            if (seen.has(sig)) repeated.push(el); else seen.add(sig);
        }
    }
    repeated.forEach(el => el.remove());
    return repeated.length;
}""" % _SHAPE_JS


def _axe(page, distinct_rows: bool = False) -> dict:
    """Run axe-core (injected from the project's node_modules, never a CDN) on the page as it
    is; returns {impact: count of violating nodes} and the violations (id, impact, nodes). With
    ``distinct_rows``, table rows and code tokens that repeat an earlier one's shape are removed
    first (:data:`DISTINCT_ROWS_JS`, :data:`DISTINCT_CODE_JS`; the page is the caller's own copy):
    on fio_engines' opened evidence page 2,684 of 3,001 rows go, and its accessibility test took
    76 s instead of 208 s; without the 17,279 repeated code tokens and line links too, axe's pass
    there took 17.5 s instead of 36.8 s and found the same violations (2026-12-01)."""
    if distinct_rows:
        page.evaluate(DISTINCT_ROWS_JS)
        page.evaluate(DISTINCT_CODE_JS)
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.add_script_tag(content=AXE_JS.read_text())
    res = page.evaluate("""async (ms) => {
        const late = new Promise((_, no) => setTimeout(() => no(new Error(`axe-core took over ${ms} ms`)), ms));
        const r = await Promise.race([axe.run(document, {resultTypes: ['violations']}), late]);
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5), count: v.nodes.length}));
    }""", AXE_TIMEOUT_MS)
    counts: dict[str, int] = {}
    for v in res:
        counts[v["impact"]] = counts.get(v["impact"], 0) + v["count"]
    return {"counts": counts, "violations": res}


def page_budget(browser, base_url: str, path: str, viewport: str = "desktop", run_axe: bool = True) -> dict:
    """Load ``base_url + path`` in a fresh context of ``browser`` (Playwright, Chromium) and
    measure what it costs before any interaction (load, then network idle, no scrolling).

    Returns a dict: ``bytes`` (transferred: response headers and bodies as sent, compressed
    when the server compresses; asciicast recordings excluded), ``decoded_bytes`` (the same
    responses uncompressed), ``requests`` (count), ``recording_bytes``, ``foreign`` (URLs not on ``base_url``'s
    origin, ``data:`` and ``blob:`` excepted), ``errors`` (console errors and page
    exceptions), ``largest`` (the five biggest responses), and with ``run_axe`` ``axe``:
    {"light": ..., "dark": ...} from :func:`_axe` in each colour scheme.

    Raises:
        FileNotFoundError: axe-core is not installed (``make setup`` installs it).
    """
    if run_axe and not AXE_JS.exists():
        raise FileNotFoundError(f"{AXE_JS} missing: `make setup` installs axe-core (npm) into .tools/node")
    ctx = browser.new_context(viewport=VIEWPORTS[viewport])
    page = ctx.new_page()
    errors, foreign, bodies = [], [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))

    def guard(route):
        """Record a request off the site's origin and stop it: nothing leaves this machine."""
        u = route.request.url
        if u.startswith((base_url + "/", "data:", "blob:")) or u == base_url:
            route.continue_()
        else:
            foreign.append(u)
            route.abort()

    finished = []
    ctx.route("**/*", guard)
    page.on("requestfinished", lambda r: finished.append(r))
    page.goto(base_url + path, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(300)
    sizes = []  # (bytes on the wire: headers + encoded body, decoded body, url)
    for req in finished:
        if req.url.startswith(("data:", "blob:")):
            continue
        sz = req.sizes()
        resp = req.response()
        decoded = len(resp.body()) if resp is not None and resp.status == 200 else 0
        sizes.append((sz["responseHeadersSize"] + max(0, sz["responseBodySize"]), decoded, req.url))
    recording = [s for s in sizes if s[2].split("?")[0].endswith(RECORDING_SUFFIXES)]
    counted = [s for s in sizes if s not in recording]
    out = {
        "path": path, "viewport": viewport,
        "bytes": sum(s[0] for s in counted),
        "decoded_bytes": sum(s[1] for s in counted),
        "recording_bytes": sum(s[0] for s in recording),
        "requests": len(sizes), "foreign": foreign, "errors": list(errors),
        "largest": sorted(((s[0], s[2].removeprefix(base_url)) for s in counted), reverse=True)[:6],
    }
    if run_axe:
        out["axe"] = {"light": _axe(page)}
        # Switch as the palette toggle does, with colour transitions off so axe sees the end state.
        page.add_style_tag(content="*, *::before, *::after { transition: none !important; }")
        page.evaluate("() => document.body.setAttribute('data-md-color-scheme', 'slate')")
        page.wait_for_timeout(300)
        out["axe"]["dark"] = _axe(page)
    out["errors"] = list(errors)
    ctx.close()
    return out


def serious(axe_result: dict) -> int:
    """Serious + critical axe findings (violating nodes) of one colour scheme."""
    return axe_result["counts"].get("serious", 0) + axe_result["counts"].get("critical", 0)


def lighthouse(url: str) -> dict | None:
    """Lighthouse (npm, in .tools/node) on ``url`` with its default mobile emulation and
    simulated throttling, in Debian's Chromium: {"performance": 0-100, "accessibility": 0-100,
    "lcp_s": ..., "tbt_ms": ..., "bytes": ...}; None when Lighthouse is not installed.

    Scores depend on the CPU: Lighthouse calibrates its simulation from the page's own trace,
    so on a busy 2-CPU machine they come out lower than on an idle one.
    """
    if not LIGHTHOUSE.exists() or not Path(CHROMIUM).exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "lh.json"
        flags = " ".join(["--headless=new"] + CHROMIUM_ARGS)
        proc = subprocess.run([str(LIGHTHOUSE), url, "--quiet", "--only-categories=performance,accessibility",
                               "--output=json", f"--output-path={out}", f"--chrome-flags={flags}",
                               # the full-page screenshot is for the HTML report only (no score uses
                               # it): on a 50,000 px chapter it costs about a second a run
                               "--disable-full-page-screenshot"],
                              capture_output=True, text=True, env=dict(os.environ, CHROME_PATH=CHROMIUM), timeout=180)
        if proc.returncode != 0 or not out.exists():
            return {"error": (proc.stderr or proc.stdout)[-500:]}
        d = json.loads(out.read_text())
    a = d["audits"]
    a11y = {r["id"] for r in d["categories"]["accessibility"]["auditRefs"]}
    return {"performance": round(100 * (d["categories"]["performance"]["score"] or 0)),
            "accessibility": round(100 * (d["categories"]["accessibility"]["score"] or 0)),
            "lcp_s": a["largest-contentful-paint"]["numericValue"] / 1000,
            "tbt_ms": a["total-blocking-time"]["numericValue"],
            "bytes": a["total-byte-weight"]["numericValue"],
            "failed": sorted(k for k, v in a.items() if v.get("scoreDisplayMode") == "binary" and v.get("score") == 0
                             and k in a11y)}


def run_lab(lab: str, quick: bool, out: Path) -> tuple[float, int]:
    t0 = time.time()
    args = ["bash", str(ROOT / "labs" / lab / "run.sh"), "--out", str(out), "--host", "bench"]
    if quick:
        args.append("--quick")
    rc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.time() - t0, rc


def bench_pages(site: Path, use_lighthouse: bool = True, as_json: Path | None = None) -> int:
    """Print the page table for built site ``site``; returns the number of budget breaches."""
    from playwright.sync_api import sync_playwright

    with_axe = AXE_JS.exists()
    if not with_axe:
        print(f"axe-core not installed ({AXE_JS}): `make setup` installs it; no accessibility counts below.")
    server, url = serve_site(site)
    rows, breaches = [], 0
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for path in site_pages(site):
                r = page_budget(browser, url, path, run_axe=with_axe)
                r.setdefault("axe", {"light": {"counts": {}, "violations": []}, "dark": {"counts": {}, "violations": []}})
                r["phone"] = page_budget(browser, url, path, "phone", run_axe=False)
                r["lighthouse"] = lighthouse(url + path) if use_lighthouse else None
                rows.append(r)
            browser.close()
    finally:
        server.shutdown()
    lh_on = any(r["lighthouse"] for r in rows)
    print(f"\n{'page':<22}{'KB':>7}{'raw KB':>7}{'req':>5}{'off':>5}{'err':>5}{'axe L':>7}{'axe D':>7}"
          + (f"{'LH perf':>9}{'LH a11y':>9}" if lh_on else "") + "  budget")
    for r in rows:
        weight = max(r["bytes"], r["phone"]["bytes"])
        bad = []
        if weight > MAX_PAGE_BYTES:
            bad.append("weight")
        if r["foreign"] or r["phone"]["foreign"]:
            bad.append("off-origin")
        if r["errors"] or r["phone"]["errors"]:
            bad.append("console")
        if serious(r["axe"]["light"]) or serious(r["axe"]["dark"]):
            bad.append("axe")
        lh = r["lighthouse"] or {}
        if lh_on and (r["path"] == "/" or r["path"].startswith("/cases/")):
            if "error" in lh or lh.get("performance", 0) < MIN_LIGHTHOUSE:
                bad.append("LH perf")
            if "error" in lh or lh.get("accessibility", 0) < MIN_LIGHTHOUSE:
                bad.append("LH a11y")
        breaches += len(bad)
        lh_cols = (f"{lh.get('performance', '–'):>9}{lh.get('accessibility', '–'):>9}" if lh_on else "")
        print(f"{r['path']:<22}{weight / 1000:>7.0f}{r['decoded_bytes'] / 1000:>7.0f}{r['requests']:>5}"
              f"{len(r['foreign']):>5}{len(r['errors']):>5}"
              + (f"{serious(r['axe']['light']):>7}{serious(r['axe']['dark']):>7}" if with_axe else f"{'–':>7}{'–':>7}")
              + f"{lh_cols}  {'ok' if not bad else 'OVER: ' + ', '.join(bad)}")
    print(f"\nKB: bytes transferred before any interaction, from a server that gzips text as web hosts do"
          f" (larger of 1280 px and 390 px wide; recordings excluded; budget {MAX_PAGE_BYTES // 1000} KB);"
          f" raw KB: the same responses uncompressed (1280 px)."
          f"\naxe L/D: axe-core serious + critical findings, light / dark scheme (budget 0).")
    if lh_on:
        print(f"LH: Lighthouse mobile scores (simulated throttling; budget ≥ {MIN_LIGHTHOUSE} on / and /cases/*).")
    elif use_lighthouse:
        print("Lighthouse: not installed (make setup installs it with npm into .tools/node).")
    for r in rows:
        for scheme in ("light", "dark"):
            for v in r["axe"][scheme]["violations"]:
                if v["impact"] in ("serious", "critical"):
                    print(f"  {r['path']} [{scheme}] {v['impact']} {v['id']} ×{v['count']}: {v['help']} e.g. {v['nodes'][:2]}")
        for u in r["foreign"]:
            print(f"  {r['path']} off-origin request: {u}")
        for e in r["errors"]:
            print(f"  {r['path']} console error: {e[:200]}")
        if r["lighthouse"] and r["lighthouse"].get("failed"):
            print(f"  {r['path']} Lighthouse failed audits: {', '.join(r['lighthouse']['failed'])}")
        if r["lighthouse"] and "error" in r["lighthouse"]:
            print(f"  {r['path']} Lighthouse error: {r['lighthouse']['error']}")
    if as_json:
        as_json.write_text(json.dumps(rows, indent=1))
    return breaches


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="also time each lab's full run")
    ap.add_argument("--labs", help="comma-separated labs (default: all)")
    ap.add_argument("--pages-only", action="store_true", help="no lab runs: build the site and measure its pages")
    ap.add_argument("--no-lighthouse", action="store_true", help="skip Lighthouse (it takes ~15 s a page)")
    ap.add_argument("--site", type=Path, help="measure this already built site instead of building one")
    ap.add_argument("--json", type=Path, help="also write every page's figures to this file")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not a.pages_only and not a.site:
            labs = a.labs.split(",") if a.labs else sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))
            print(f"{'lab':<16}{'mode':<7}{'wall s':>9}{'exit':>6}  target")
            for lab in labs:
                for quick in ([True, False] if a.full else [True]):
                    secs, rc = run_lab(lab, quick, Path(tmp) / lab / ("quick" if quick else "full"))
                    target = "≤ 120 s " + ("ok" if secs <= 120 else "OVER") if quick else ""
                    print(f"{lab:<16}{'quick' if quick else 'full':<7}{secs:>9.1f}{rc:>6}  {target}")
        site = a.site
        if site is None:
            site = Path(tmp) / "site"
            t0 = time.time()
            proc = build_site(site)
            build_s = time.time() - t0
            print(f"\nmkdocs build --strict: {build_s:.1f} s (target ≤ 10 s){'' if proc.returncode == 0 else '  FAILED'}")
            if proc.returncode != 0:
                print(proc.stderr[-3000:])
                return 1
        bench_pages(site, use_lighthouse=not a.no_lighthouse, as_json=a.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
