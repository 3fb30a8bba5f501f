"""Charts of measurements, drawn with matplotlib as SVG (medians, min–max whiskers), and the
figure files of a site build.

A chart is drawn for the light colour scheme and recoloured for the dark one (:func:`chart_svg`
with ``dark=True``, :func:`dark_of`), and written as files next to the page that shows it (:func:`store` during the
build, written out by ``labkit/site/mkdocs_hooks.py`` after it): pages load figures lazily
instead of carrying them inline.

**Sized for a phone.** A page shows a chart at the width of its column, at most 640 px
(``img.pc-chart`` in ``docs/assets/casebook.css``): 358 px on a 390 px phone (mkdocs-material's
16 px margins). The SVG keeps
its text as text and is scaled as a whole, so a text of ``s`` points in a figure ``W`` points
wide shows at ``s × column / W`` CSS pixels. The figure is drawn :data:`FIG_W_IN` inches wide
(345.6 pt) with no text under :data:`TEXT_PT` points: 11.4 px on that phone, 20 px in a
640 px column. Text that would not fit is wrapped (title, axis labels), x tick labels that
would collide turn, and the legend sits under the plot in as many columns as fit.

**Cached.** Drawing is most of a build's time; :func:`chart_svg` keeps each SVG under
``labkit.model.cache_dir("charts")`` (``.cache/charts/`` of the checkout), named by a hash of
its measurements, its arguments, the source of this module, of ``labkit/view/render.py``, of
``labkit/formats.py`` (its number formats) and of ``labkit/plot.py``, and matplotlib's version: a
changed result or a changed drawing draws anew.
matplotlib is imported only to draw (:func:`pyplot`).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import tempfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from .. import model
from ..model import Measurement
from ..plot import pyplot
from .render import BYTE_UNITS, byte_scale, fmt_case_value, human_bytes
from .render import unit as display_unit

# The figure's size and text, in points (matplotlib's SVG viewBox is in points).
FIG_W_IN = 4.8               # 345.6 pt: a 358 px phone column shows it at 1.04 px per point
TEXT_PT = 11                 # ticks, axis labels, legend
TITLE_PT = 12
PLOT_H_PT = 170              # the axes' height; the figure grows with its title, ticks and legend


def human_number(v: float) -> str:
    """A tick label without exponent or offset: ``20000`` → ``"20,000"``, ``500`` → ``"500"``,
    ``0.5`` → ``"0.5"``, ``1e-3`` → ``"0.001"``: three significant digits below 1,000, no
    trailing zeros after a decimal point."""
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    decimals = max(0, -math.floor(math.log10(abs(v))) + 2)
    text = f"{v:.{decimals}f}"
    # trailing zeros go only after a decimal point: 0.50 → 0.5, but 500 stays 500
    return text.rstrip("0").rstrip(".") if "." in text else text


_UNIT_SUFFIX = {"us": "µs", "ns": "ns", "ms": "ms", "s": "s", "kb": "KiB", "kib": "KiB", "mb": "MB", "mib": "MiB",
                "bytes": "bytes", "pct": "%"}


def human_label(name: str) -> str:
    """A case key or metric name as an axis label: underscores become spaces and a unit suffix
    moves into parentheses (``bin_us`` → ``"bin (µs)"``, ``read_ahead_kb`` → ``"read ahead
    (KiB)"``, ``iodepth`` stays ``"iodepth"``)."""
    parts = name.split("_")
    if len(parts) > 1 and parts[-1].lower() in _UNIT_SUFFIX:
        return f"{' '.join(parts[:-1])} ({_UNIT_SUFFIX[parts[-1].lower()]})"
    return " ".join(parts)


# Series colours: matplotlib's tab10 on the light page; lighter tints of the same hues on the
# dark one (each ≥ 3:1 against mkdocs-material's slate background).
_LIGHT = {"fg": "#222222", "grid": "#000000",
          "colors": ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                     "#bcbd22", "#17becf"]}
_DARK = {"fg": "#e2e4e9", "grid": "#ffffff",
         "colors": ["#6cb4ee", "#ffab5e", "#7bd67b", "#f47a7a", "#c4a5e8", "#d9a99a", "#f5a3d8", "#c8c8c8",
                    "#e0e070", "#6fe0ee"]}


def _rc(pal: dict) -> dict:
    """matplotlib rcParams of a palette (``_LIGHT`` or ``_DARK``): text, axes, ticks, series,
    and the text sizes (:data:`TEXT_PT`, :data:`TITLE_PT`)."""
    from matplotlib import cycler
    return {"text.color": pal["fg"], "axes.labelcolor": pal["fg"], "axes.edgecolor": pal["fg"],
            "xtick.color": pal["fg"], "ytick.color": pal["fg"], "axes.prop_cycle": cycler(color=pal["colors"]),
            "font.size": TEXT_PT, "axes.labelsize": TEXT_PT, "xtick.labelsize": TEXT_PT, "ytick.labelsize": TEXT_PT,
            "legend.fontsize": TEXT_PT, "legend.title_fontsize": TEXT_PT, "figure.titlesize": TITLE_PT,
            "axes.labelpad": 7.0}   # an axis label stays apart from a second line of tick labels


class Measure:
    """Widths of texts in points, as matplotlib will lay them out (the figure's renderer)."""

    def __init__(self, fig):
        from matplotlib.font_manager import FontProperties
        self._r = fig.canvas.get_renderer()
        self._k = 1 / self._r.points_to_pixels(1.0)
        self._props = {}
        self._font = FontProperties

    def width(self, text: str, size: float) -> float:
        """Width in points of ``text`` set at ``size`` points: its widest line (0.0 for no text)."""
        prop = self._props.setdefault(size, self._font(size=size))
        return max((self._r.get_text_width_height_descent(line, prop, ismath=False)[0] * self._k
                    for line in text.split("\n")), default=0.0)

    def wrap(self, text: str, size: float, width: float) -> str:
        """``text`` broken between words into lines no wider than ``width`` points (a word
        wider than that keeps a line of its own)."""
        lines: list[str] = []
        for word in text.split():
            if lines and self.width(f"{lines[-1]} {word}", size) <= width:
                lines[-1] += f" {word}"
            else:
                lines.append(word)
        return "\n".join(lines)


def turn_crowded_x_labels(ax, measure: Measure, axis_w: float) -> float:
    """Turn the x tick labels (anchored at their right end) when two neighbours would come
    closer than half a text size at an axis ``axis_w`` points long, by the smallest of 30°,
    45°, 60° and 90° at which neighbouring labels, parallel strips one text line high, stay
    apart; return the angle (0: level). Positions come from the axis' own scale and limits,
    widths from the renderer, so the rule holds for fixed, log and category ticks alike."""
    lo, hi = sorted(ax.get_xlim())
    fmt = ax.xaxis.get_major_formatter()
    locs = [v for v in ax.xaxis.get_majorticklocs() if lo <= v <= hi]
    if hasattr(fmt, "set_locs"):
        fmt.set_locs(locs)
    to_axes = ax.transData + ax.transAxes.inverted()
    ticks = sorted((to_axes.transform((v, 0))[0] * axis_w, measure.width(fmt(v, i), TEXT_PT))
                   for i, v in enumerate(locs))
    pairs = list(zip(ticks, ticks[1:]))
    if not any(b[0] - a[0] < (a[1] + b[1]) / 2 + TEXT_PT / 2 for a, b in pairs):
        return 0.0
    gap = min(b[0] - a[0] for a, b in pairs)
    angle = next((deg for deg in (30, 45, 60) if gap * math.sin(math.radians(deg)) >= 1.25 * TEXT_PT), 90)
    for t in ax.get_xticklabels():
        t.set_rotation(angle)
        t.set_horizontalalignment("right")
        t.set_rotation_mode("anchor")
    return float(angle)


def _ticks_x(ax, xs: list[float], xbytes: bool, logx: bool) -> None:
    """x ticks at the measured values (≤ 12 of them), labelled in human units; else a log-2
    (at most 8 ticks) or linear locator with the same labels. Never ``2^n`` or ``×10^n``."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator
    label = human_bytes if xbytes else human_number
    uniq = sorted(set(xs))
    if len(uniq) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(uniq))
    elif logx:
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))
    ax.xaxis.set_minor_locator(NullLocator())


def _ticks_y(ax, logy: bool, lo: float, hi: float) -> None:
    """y ticks labelled as plain numbers with thousands separators (no offset, no exponent)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator
    fmt = FuncFormatter(lambda v, _: human_number(v))
    ax.yaxis.set_major_formatter(fmt)
    if logy:
        ax.yaxis.set_major_locator(LogLocator(base=10))
        few_decades = lo > 0 and hi / lo < 30
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)) if few_decades else NullLocator())
        ax.yaxis.set_minor_formatter(fmt if few_decades else NullFormatter())


@lru_cache(maxsize=1)
def code_digest() -> bytes:
    """SHA-256 of what draws a chart besides its data: the source of this module, of
    ``render.py`` and of what they draw and write numbers with (``labkit/plot.py``,
    ``labkit/formats.py``), and matplotlib's version."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for part in ((here / "charts.py").read_bytes(), (here / "render.py").read_bytes(),
                 (here.parent / "plot.py").read_bytes(), (here.parent / "formats.py").read_bytes(),
                 metadata.version("matplotlib").encode()):
        h.update(hashlib.sha256(part).digest())
    return h.digest()


def chart_key(ms: list[Measurement], x: str, series: str | None = None, **opts) -> str:
    """Hex SHA-256 naming the chart that :func:`chart_svg` draws of these arguments: the
    measurements (every field, samples included), ``x``, ``series``, the options, and
    :func:`code_digest` (``dark=False`` is the default, and names the same chart as no ``dark``)."""
    opts = {k: v for k, v in opts.items() if not (k == "dark" and not v)}
    args = json.dumps({"ms": ms, "x": x, "series": series, "opts": opts}, sort_keys=True, default=repr)
    return hashlib.sha256(code_digest() + args.encode()).hexdigest()


def chart_svg(ms: list[Measurement], x: str, series: str | None = None, **opts) -> str:
    """:func:`chart_figure` of the same arguments as SVG text (text kept as text, stable ids:
    the same data gives the same bytes), from the chart cache when it holds
    :func:`chart_key` of them, else drawn and kept there (module docstring).

    Raises:
        ValueError: as :func:`chart_figure` (a chart that fails is never cached).
    """
    folder = model.cache_dir("charts")
    cached = folder / f"{chart_key(ms, x, series, **opts)}.svg" if folder is not None else None
    if cached is not None:
        try:
            svg = cached.read_text()
            os.utime(cached)          # recently used: kept by _prune
            return svg
        except OSError:
            pass
    svg = draw_svg(ms, x, series, **opts)
    if cached is not None:
        _write_quietly(cached, svg)
        _prune(cached.parent)
    return svg


CACHE_KEEP = 1000
"""Chart files the cache keeps (a build of the site uses about 80): the least recently used
beyond that go when a process first adds one."""

PRUNED: set[Path] = set()
"""The chart cache folders this process has pruned (:func:`_prune` runs once per folder); a test
that wants a prune again sets it to an empty set."""


def _prune(folder: Path) -> None:
    """Once per process and folder: delete all but the :data:`CACHE_KEEP` most recently used
    chart files (every change to the drawing code renames every chart)."""
    if folder in PRUNED:
        return
    PRUNED.add(folder)
    try:
        files = sorted(((p.stat().st_mtime, p) for p in folder.glob("*.svg")), reverse=True)
        for _, p in files[CACHE_KEEP:]:
            p.unlink(missing_ok=True)
    except OSError:           # another build pruned it first
        pass


_PAINT = re.compile(r"((?:fill|stroke): )(#[0-9a-f]{6})")
# Each light-scheme colour (text, grid, series) and its dark-scheme counterpart, for dark_of.
_SWAP = dict(zip([_LIGHT["fg"], _LIGHT["grid"], *_LIGHT["colors"]], [_DARK["fg"], _DARK["grid"], *_DARK["colors"]]))


def dark_of(light_svg: str) -> str:
    """The dark scheme's SVG of a chart drawn for the light one: every fill and stroke in a
    colour of ``_LIGHT`` (text, axes, grid, series) in its ``_DARK`` counterpart. A chart
    differs between the schemes only in those colours (:func:`_rc`, :func:`chart_figure`), so
    this is the SVG that drawing it dark gives, but for the ids matplotlib derives from a
    marker's style (internal to the file); tests/test_charts_figure.py compares the two on every
    kind of chart. Drawing is most of a cold build; this halves it."""
    return _PAINT.sub(lambda m: m.group(1) + _SWAP.get(m.group(2), m.group(2)), light_svg)


def draw_svg(ms: list[Measurement], x: str, series: str | None = None, **opts) -> str:
    """A chart cache's miss: the light chart drawn (:func:`render_svg`), the dark one recoloured
    from the light one (:func:`dark_of`; the light one is drawn, and cached, first if needed).
    Arguments as :func:`chart_svg`; returns SVG text.

    Raises:
        ValueError: as :func:`chart_figure`.
    """
    if opts.get("dark"):
        return dark_of(chart_svg(ms, x, series, **{k: v for k, v in opts.items() if k != "dark"}))
    return render_svg(ms, x, series, **opts)


def render_svg(ms: list[Measurement], x: str, series: str | None = None, **opts) -> str:
    """:func:`chart_figure` drawn with matplotlib and saved as SVG text, in either scheme
    (``dark=True`` in ``opts``: the dark one), never from or into the chart cache.

    Raises:
        ValueError: as :func:`chart_figure`.
    """
    plt = pyplot()
    fig = chart_figure(ms, x, series, **opts)
    try:
        # ticks matplotlib adds while drawing (log axes) take their colour from rcParams then
        with plt.rc_context(_rc(_DARK if opts.get("dark") else _LIGHT)):
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "labkit (matplotlib)"}, transparent=True)
    finally:
        plt.close(fig)
    return buf.getvalue()


def _write_quietly(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a build running beside it reads the whole file
    or none); a folder that cannot be written is left alone: the next build draws again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        pass


def chart_figure(ms: list[Measurement], x: str, series: str | None = None, *, kind: str = "line",
                 logx: bool = False, logy: bool = False, title: str = "", ylabel: str | None = None,
                 xbytes: bool = False, xlabel: str | None = None, host: str | None = None,
                 dark: bool = False) -> "matplotlib.figure.Figure":
    """Draw measurements ``ms`` (schema "measurements" dicts of one metric) on a matplotlib
    figure :data:`FIG_W_IN` inches wide and return it (the caller closes it:
    ``pyplot().close(fig)``). Its height grows with what surrounds the plot (title lines,
    turned tick labels, legend rows) so that the plot itself stays :data:`PLOT_H_PT` high.

    ``x``: case key on the horizontal axis (numeric for ``kind="line"``, any value for
    ``"bar"``); ``series``: case key that splits lines/bar groups. Each point is the
    median; whiskers span min–max of the samples. Axes are in human units: ticks at the
    measured x values (``xbytes``: as B/KiB/MiB), plain numbers with thousands separators on
    y, byte metrics scaled to KiB/MiB; ``xlabel``/``ylabel`` default to the case key and the
    metric with its unit. ``title`` (the figure's, left-aligned, wrapped to the width)
    defaults to "<metric> by <x>". ``host`` names the host in the legend (always drawn, under
    the plot). ``dark``: colours for a dark page (transparent background either way). Every
    text is :data:`TEXT_PT` points or more.

    Raises:
        ValueError: no measurements, unknown kind, or non-numeric x for a line chart.
    """
    if not ms:
        raise ValueError("chart: no measurements to draw")
    if kind not in ("line", "bar"):
        raise ValueError(f"chart: kind must be 'line' or 'bar', not {kind!r}")
    unit = ms[0]["unit"]
    div, shown_unit = (byte_scale([m["max"] for m in ms]) if unit in BYTE_UNITS else (1.0, display_unit(unit)))
    groups: dict[str, list[dict]] = {}
    for m in ms:
        if x not in m["case"]:
            raise ValueError(f"chart: measurement has no case key {x!r}: {m['case']}")
        groups.setdefault(fmt_case_value(m["case"].get(series, "")) if series else "", []).append(m)
    if kind == "line":
        for g in groups.values():
            if not all(isinstance(m["case"][x], (int, float)) for m in g):
                raise ValueError(f"chart: x key {x!r} must be numeric for a line chart")
    plt = pyplot()
    pal = _DARK if dark else _LIGHT
    fig_w = FIG_W_IN * 72
    with plt.rc_context(_rc(pal)):
        fig, ax = plt.subplots(figsize=(FIG_W_IN, 4), dpi=100, layout="constrained")
        measure = Measure(fig)
        fig.patch.set_alpha(0)
        ax.patch.set_alpha(0)
        many = series and len(groups) > 1
        if kind == "line":
            for name, g in groups.items():
                g = sorted(g, key=lambda m: m["case"][x])
                xs = [m["case"][x] for m in g]
                med = [m["median"] / div for m in g]
                err = [[(m["median"] - m["min"]) / div for m in g], [(m["max"] - m["median"]) / div for m in g]]
                ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=name if many else (host or name or None))
            if logx:
                ax.set_xscale("log", base=2)
            _ticks_x(ax, [m["case"][x] for m in ms], xbytes, logx)
        else:
            values = list(dict.fromkeys(m["case"][x] for m in ms))
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            cats = [human_bytes(v) if xbytes and numeric else fmt_case_value(v) for v in values]
            width = 0.8 / max(1, len(groups))
            for i, (name, g) in enumerate(groups.items()):
                pos, med, lo, hi = [], [], [], []
                for m in g:
                    pos.append(values.index(m["case"][x]) + i * width - 0.4 + width / 2)
                    med.append(m["median"] / div)
                    lo.append((m["median"] - m["min"]) / div)
                    hi.append((m["max"] - m["median"]) / div)
                ax.bar(pos, med, width=width * 0.95, yerr=[lo, hi], capsize=3, ecolor=pal["fg"],
                       label=name if many else (host or name or None))
            ax.set_xticks(range(len(cats)), cats)
        if logy:
            ax.set_yscale("log")
        lows = [m["min"] / div for m in ms if m["min"] > 0]
        _ticks_y(ax, logy, min(lows, default=0), max(m["max"] / div for m in ms))
        metric = human_label(ms[0]["metric"])
        # the plot's width: the figure less the y axis' labels, ticks and padding
        axis_w = fig_w - 2 * TEXT_PT * 1.4 - max(measure.width(t, TEXT_PT) for t in y_tick_texts(ax)) - 14
        turned = turn_crowded_x_labels(ax, measure, axis_w)
        ax.set_xlabel(measure.wrap(xlabel or human_label(x), TEXT_PT, fig_w - 20))
        ylab = measure.wrap(ylabel or (f"{metric} ({shown_unit})" if shown_unit else metric), TEXT_PT, PLOT_H_PT)
        ax.set_ylabel(ylab)
        head = measure.wrap(title or f"{metric} by {human_label(x)}", TITLE_PT, fig_w - 12)
        fig.suptitle(head, x=0.02, ha="left", fontsize=TITLE_PT)
        legend_rows = 0
        handles, names = ax.get_legend_handles_labels()
        if names:  # a host or series to name
            legend_title = (f"{host}: {series}" if host else series) if many else None
            entry = max(measure.width(n, TEXT_PT) for n in names) + 4.8 * TEXT_PT   # handle, gaps
            ncols = max(1, min(len(names), int((fig_w - 12) // entry)))
            legend_rows = math.ceil(len(names) / ncols) + (1 if legend_title else 0)
            fig.legend(handles, names, loc="outside lower center", ncols=ncols, title=legend_title,
                       frameon=False, labelcolor=pal["fg"], borderpad=0.8)
        ax.grid(True, axis="y", alpha=0.25, color=pal["grid"])
        line = TEXT_PT * 1.35
        ticks_h = (max(measure.width(t.get_text(), TEXT_PT) for t in ax.get_xticklabels())
                   * math.sin(math.radians(turned)) + line if turned else line)
        height = (PLOT_H_PT + (head.count("\n") + 1) * TITLE_PT * 1.3 + ticks_h
                  + (ax.get_xlabel().count("\n") + 1) * line + legend_rows * line + 30)
        fig.set_size_inches(FIG_W_IN, round(height / 72, 2))
    return fig


def y_tick_texts(ax) -> list[str]:
    """The y axis' major tick labels as they will be drawn (at least ``"0"``)."""
    lo, hi = sorted(ax.get_ylim())
    fmt = ax.yaxis.get_major_formatter()
    locs = [v for v in ax.yaxis.get_majorticklocs() if lo <= v <= hi]
    return [fmt(v, i) for i, v in enumerate(locs)] or ["0"]


def svg_size(svg: str) -> tuple[int, int]:
    """(width, height) in CSS pixels of an SVG whose root gives them in pt or px (matplotlib
    writes pt).

    Raises:
        ValueError: the root element has no width/height.
    """
    m = re.search(r"<svg[^>]*?\swidth=\"([\d.]+)(pt|px)?\"[^>]*?\sheight=\"([\d.]+)(pt|px)?\"", svg[:2000], re.S)
    if not m:
        raise ValueError("svg_size: no width/height on the SVG root")
    k = 96 / 72 if m.group(2) == "pt" else 1.0
    return round(float(m.group(1)) * k), round(float(m.group(3)) * k)


# ---- figure files of one build ----

_FIGURES: dict[str, str] = {}


def store(site_dir_of_page: str, svg: str) -> str:
    """Keep ``svg`` for the site at ``<site_dir_of_page>/fig-<hash>.svg`` (the page's own
    folder, e.g. ``cases/lat_tcp/``) and return that file's name. Written out after the build
    by ``labkit/site/mkdocs_hooks.py`` (:func:`take`); the name is the content's hash, so the same
    chart keeps its URL."""
    name = f"fig-{hashlib.sha1(svg.encode()).hexdigest()[:12]}.svg"
    _FIGURES[f"{site_dir_of_page}{name}"] = svg
    return name


def take() -> dict[str, str]:
    """Every figure stored since the last call (site path → SVG text), and forget them."""
    out = dict(_FIGURES)
    _FIGURES.clear()
    return out
