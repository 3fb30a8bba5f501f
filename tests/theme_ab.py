"""What two theme overrides save, measured: a page as built against the same page with
mkdocs-material's runtime given back the host tab sets (``data-tabs``, labkit/site/page_marks.py) or
the palette toggle (``data-md-component="palette"``, labkit/site/theme/partials/palette.html), each
variant a copy of the built page with that one attribute changed. Headless Chromium (Debian's)
at 390 px with the CPU slowed 4x, loads interleaved; per load the total blocking time (long
tasks until 1.5 s after load, each less 50 ms) and Chromium's style, layout and script time.
Prints medians and ranges (DESIGN.md, "Pages in the browser", quotes them).

Usage: .venv/bin/python tests/theme_ab.py --site DIR [--page cases/lat_tcp] [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import CHROMIUM, CHROMIUM_ARGS, serve_site  # noqa: E402

VARIANTS = {"material tabs": ('data-pc-tabs="', 'data-tabs="'),
            "material palette": ('<form class="md-header__option" data-pc-palette>',
                                 '<form class="md-header__option" data-md-component="palette">')}
LONG_TASKS = ("window.__pcLong = []; new PerformanceObserver(l => { for (const e of l.getEntries()) "
              "window.__pcLong.push(e.duration); }).observe({type: 'longtask', buffered: true});")


def variants(site: Path, page: str) -> dict[str, str]:
    """Copy ``site``'s page folder once per variant, beside it; ``{name: page path}``."""
    base = site / page
    out = {"as built": page}
    for name, (a, b) in VARIANTS.items():
        copy = base.parent / f"{base.name}-{name.split()[1]}"
        shutil.copytree(base, copy)
        html = (copy / "index.html").read_text()
        if a not in html:
            raise SystemExit(f"{page}: no {a!r} to change for {name}")
        (copy / "index.html").write_text(html.replace(a, b))
        out[name] = str(copy.relative_to(site))
    return out


def measure(url: str, pages: dict[str, str], runs: int) -> dict[str, list[tuple[float, ...]]]:
    from playwright.sync_api import sync_playwright
    res: dict[str, list[tuple[float, ...]]] = {k: [] for k in pages}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(runs):
            for name, rel in pages.items():
                ctx = browser.new_context(viewport={"width": 390, "height": 844})
                page = ctx.new_page()
                page.add_init_script(LONG_TASKS)
                cdp = ctx.new_cdp_session(page)
                cdp.send("Performance.enable")
                cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})
                page.goto(f"{url}/{rel}/", wait_until="load")
                page.wait_for_timeout(1500)
                long = page.evaluate("() => window.__pcLong")
                m = {x["name"]: x["value"] for x in cdp.send("Performance.getMetrics")["metrics"]}
                res[name].append((sum(max(0.0, d - 50) for d in long), 1000 * m["RecalcStyleDuration"],
                                  1000 * m["LayoutDuration"], 1000 * m["ScriptDuration"]))
                ctx.close()
        browser.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, required=True, help="a built site (mkdocs build -d DIR)")
    ap.add_argument("--page", default="cases/lat_tcp")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        shutil.copytree(a.site, site)
        pages = variants(site, a.page)
        server, url = serve_site(site)
        try:
            res = measure(url, pages, a.runs)
        finally:
            server.shutdown()
    print(f"{a.page}: {a.runs} loads each, interleaved; median (min-max), ms")
    for name, rows in res.items():
        cols = list(zip(*rows))
        print(f"{name:18}" + "  ".join(f"{label} {statistics.median(c):5.0f} ({min(c):.0f}-{max(c):.0f})"
                                       for label, c in zip(("TBT", "style", "layout", "script"), cols)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
