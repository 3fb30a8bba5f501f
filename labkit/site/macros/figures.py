"""Figures: charts of measurements, flame graphs and heat maps, terminal recordings."""

from __future__ import annotations

import json

from ...view import charts, render
from . import beside, build, templates
from .build import MacroError

CAST_FONTS = "ui-monospace, 'DejaVu Sans Mono', 'Liberation Mono', Menlo, Consolas, monospace"
CAST_IDLE_LIMIT = 1.0  # seconds: a recording's pauses (a step at work) play back at most this long


def chart(lab: str, metric: str, x: str, series: str | None = None, where: dict | None = None,
          kind: str = "line", logx: bool = False, logy: bool = False, title: str = "",
          group: str | None = None, ylabel: str | None = None, xbytes: bool = False,
          xlabel: str | None = None) -> str:
    """Markdown: per host, an SVG chart (matplotlib, :func:`labkit.view.charts.chart_svg`) of
    ``metric`` against case key ``x`` (one line or bar group per value of case key ``series``),
    titled ``title``, the host named in its legend; ``where`` filters cases (subset match),
    ``group`` names the step group whose skips explain a host without data.

    Each chart is drawn for the light and the dark scheme and written as two files next to
    the page (``fig-<hash>.svg``, :func:`labkit.view.charts.store`), shown with
    ``<img loading="lazy">`` and their size in px, one per scheme (CSS). During a build, a
    chart the cache lacks is drawn by worker processes and its file name and size filled in
    later (:mod:`.beside`).

    Raises:
        MacroError: no host has matching measurements.
        ValueError: bad chart arguments.
    """
    folder = build.page_dir(build.page())
    alt_of = f"{title or metric}: {metric} by {x}" + (f" and {series}" if series else "")

    def figure(host, result):
        ms = render.select(result, metric, where)
        if not ms:
            return build.skip_note(result, group)
        opts = dict(kind=kind, logx=logx, logy=logy, xbytes=xbytes, title=title, ylabel=ylabel, xlabel=xlabel,
                    host=host.label)
        images = []
        for scheme, dark in (("light", False), ("dark", True)):
            images.append({"scheme": scheme, **beside.image(folder, ms, x, series, dark=dark, **opts)})
        return build.guest_badge(result, ms) + templates.render("chart.html", alt=f"{alt_of} on {host.label}", images=images)

    return build.per_host(lab, figure,
                          missing=f"chart: no host has {metric!r} measurements in lab {lab!r}"
                          + (f" where {where}" if where else ""))[0]


def svg_size(path) -> tuple[int, int]:
    """(width, height) in px of an SVG file's root element (inferno writes both), read as
    :func:`labkit.view.charts.svg_size` reads a chart's; bytes that are not UTF-8 are replaced.

    Raises:
        MacroError: the root element has no width and height (naming the file).
    """
    try:
        return charts.svg_size(path.read_text(errors="replace"))
    except ValueError:
        raise MacroError(f"{path}: no width/height on the SVG root; not an inferno flame graph?") from None


def flamegraph(lab: str, kind: str = "flamegraph", group: str | None = None, **case) -> str:
    """Markdown: per host, the interactive inferno flame graph SVG of the artifact of ``kind``
    (``flamegraph``, ``diff_flamegraph``, ``heatmap``) whose case matches ``case``
    (``<object>`` so its search and zoom scripts run), its title and a link to it under it.

    The figure keeps the SVG's own proportions (inferno sets its height from the deepest
    stack), fills the content width, and never shrinks below three quarters of its own width
    (``--pc-w``; inferno's 12 px text stays at 9 px or more): where the column is narrower, on a
    phone and in a 1280 px window's 688 px column alike, it scrolls sideways
    (docs/assets/casebook.css). It loads when it comes near the
    viewport (``data-pc-src``, docs/assets/casebook.js), so a page's weight does not count
    figures a reader never scrolls to; without JavaScript the link under it opens it.

    Raises:
        MacroError: no host has such an artifact, or a host has several.
    """
    page = build.page()
    how = ("click a frame to zoom, Ctrl-F to search" if kind in ("flamegraph", "diff_flamegraph")
           else "a static image") + "; where the column is too narrow for its text, the figure scrolls sideways"

    def figure(host, result):
        a = build.one_artifact("flamegraph", host, result, kind, case)
        if a is None:
            return build.skip_note(result, group)
        w, h = svg_size(host.dir / a["path"])
        target = f"results/{host.label}/{a['path']}"
        obj = templates.render("flamegraph.html", src=build.rel(page, target), width=f"{w:g}", height=f"{h:g}",
                               title=a.get("title", kind))
        return (f"{obj}\n\n{render.esc(a.get('title', kind))}. "
                f"[Open it on its own page]({build.rel_src(page, target)}) ({how}).")

    return build.per_host(lab, figure,
                          missing=f"flamegraph: no host has a {kind} artifact of lab {lab!r} matching {case}")[0]


def _cast_header(path) -> tuple[dict, float]:
    """(header, time of the last event in s) of an asciicast v2 file.

    Raises:
        MacroError: not an asciicast file, or another version.
    """
    try:
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        last = json.loads(lines[-1])[0] if len(lines) > 1 else 0.0
    except (OSError, IndexError, ValueError, KeyError, TypeError) as exc:
        raise MacroError(f"cast: {path} is not an asciicast file: {exc}") from None
    if header.get("version") != 2:
        raise MacroError(f"cast: {path} is asciicast version {header.get('version')}, expected 2")
    return header, float(last)


def cast(lab: str, title: str | None = None, rows: int | None = None, cols: int | None = None) -> str:
    """Markdown: per host with a recording, its title in bold and an asciinema player of the
    lab's run (artifact kind ``cast``, recorded headless by ``asciinema rec``), played from this
    site; no tabs (a host without a recording is left out).

    The player (docs/assets/casebook.js) uses the recording's own terminal size unless
    ``rows``/``cols`` are given, a monospace font stack (:data:`CAST_FONTS`), pauses cut to
    :data:`CAST_IDLE_LIMIT` s, and the recording's last screen as its poster. The player's
    script is only on pages that have a recording (``labkit/site/mkdocs_hooks.py``).

    Raises:
        MacroError: no host has a cast for ``lab``, or a cast is not asciicast v2.
    """
    page = build.page()
    out = []
    for host, r in build.for_lab(lab):
        arts = build.artifacts(r, "cast", {})
        if not arts:
            continue
        a = arts[0]
        header, last = _cast_header(host.dir / a["path"])
        conf = {"cols": cols or header.get("width", 80), "rows": rows or header.get("height", 24),
                "idleTimeLimit": CAST_IDLE_LIMIT, "poster": f"npt:{last:.1f}", "fit": "width",
                "terminalFontFamily": CAST_FONTS}
        badge = render.emulation_badge(r["host"])
        player = templates.render("cast.html", name=title or f"{lab} on {host.label}",
                                  src=build.rel(page, f"results/{host.label}/{a['path']}"),
                                  options=json.dumps(conf), idle=f"{CAST_IDLE_LIMIT:g}")
        out.append(f"**{host.title}**{' ' + badge if badge else ''}\n\n{player}\n")
    if not out:
        raise MacroError(f"cast: no host has a recording of lab {lab!r}")
    return "\n".join(out)
