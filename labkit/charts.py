"""Charts of measurements, drawn with matplotlib as SVG (medians, min–max whiskers), and the
figure files of a site build.

A chart is drawn twice, for the light and the dark colour scheme (:func:`chart_svg` with
``dark=True``), and written as files next to the page that shows it (:func:`store` during the
build, written out by ``labkit/mkdocs_hooks.py`` after it): pages load figures lazily
instead of carrying them inline.
"""

from __future__ import annotations

import hashlib
import io
import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter, NullLocator  # noqa: E402

from .render import BYTE_UNITS, byte_scale, fmt_case_value, human_bytes  # noqa: E402
from .render import unit as display_unit  # noqa: E402


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


plt.rcParams.update({
    "svg.fonttype": "none",       # text stays text: smaller files, searchable labels
    "svg.hashsalt": "perf-casebook",  # stable ids: the same data gives the same SVG
    "font.size": 10,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
})

# Series colours: matplotlib's tab10 on the light page; lighter tints of the same hues on the
# dark one (each ≥ 3:1 against mkdocs-material's slate background).
_LIGHT = {"fg": "#222222", "grid": "#000000", "colors": plt.rcParams["axes.prop_cycle"].by_key()["color"]}
_DARK = {"fg": "#e2e4e9", "grid": "#ffffff",
         "colors": ["#6cb4ee", "#ffab5e", "#7bd67b", "#f47a7a", "#c4a5e8", "#d9a99a", "#f5a3d8", "#c8c8c8",
                    "#e0e070", "#6fe0ee"]}


def _rc(pal: dict) -> dict:
    """matplotlib rcParams of a palette (``_LIGHT`` or ``_DARK``): text, axes, ticks, series."""
    return {"text.color": pal["fg"], "axes.labelcolor": pal["fg"], "axes.edgecolor": pal["fg"],
            "xtick.color": pal["fg"], "ytick.color": pal["fg"],
            "axes.prop_cycle": matplotlib.cycler(color=pal["colors"])}


def _ticks_x(ax, xs: list[float], xbytes: bool, logx: bool) -> None:
    """x ticks at the measured values (≤ 12 of them), labelled in human units; else a log-2 or
    linear locator with the same labels. Never ``2^n`` or ``×10^n``."""
    label = human_bytes if xbytes else human_number
    uniq = sorted(set(xs))
    if len(uniq) <= 12:
        ax.xaxis.set_major_locator(FixedLocator(uniq))
    elif logx:
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: label(v)))
    ax.xaxis.set_minor_locator(NullLocator())
    if len(uniq) > 6 and any(len(label(v)) > 4 for v in uniq):
        for t in ax.get_xticklabels():
            t.set_rotation(30)
            t.set_horizontalalignment("right")


def _ticks_y(ax, logy: bool, lo: float, hi: float) -> None:
    """y ticks labelled as plain numbers with thousands separators (no offset, no exponent)."""
    fmt = FuncFormatter(lambda v, _: human_number(v))
    ax.yaxis.set_major_formatter(fmt)
    if logy:
        ax.yaxis.set_major_locator(LogLocator(base=10))
        few_decades = lo > 0 and hi / lo < 30
        ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)) if few_decades else NullLocator())
        ax.yaxis.set_minor_formatter(fmt if few_decades else NullFormatter())


def chart_svg(ms: list[dict], x: str, series: str | None = None, **opts) -> str:
    """:func:`chart_figure` of the same arguments as SVG text (text kept as text, stable ids:
    the same data gives the same bytes).

    Raises:
        ValueError: as :func:`chart_figure`.
    """
    fig = chart_figure(ms, x, series, **opts)
    try:
        # ticks matplotlib adds while drawing (log axes) take their colour from rcParams then
        with plt.rc_context(_rc(_DARK if opts.get("dark") else _LIGHT)):
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "labkit (matplotlib)"}, transparent=True)
    finally:
        plt.close(fig)
    return buf.getvalue()


def chart_figure(ms: list[dict], x: str, series: str | None = None, *, kind: str = "line",
                 logx: bool = False, logy: bool = False, title: str = "", ylabel: str | None = None,
                 xbytes: bool = False, xlabel: str | None = None, host: str | None = None,
                 dark: bool = False) -> "matplotlib.figure.Figure":
    """Draw measurements ``ms`` (schema "measurements" dicts of one metric) on a 6 × 3.6 inch
    matplotlib figure and return it (the caller closes it: ``plt.close(fig)``).

    ``x``: case key on the horizontal axis (numeric for ``kind="line"``, any value for
    ``"bar"``); ``series``: case key that splits lines/bar groups. Each point is the
    median; whiskers span min–max of the samples. Axes are in human units: ticks at the
    measured x values (``xbytes``: as B/KiB/MiB), plain numbers with thousands separators on
    y, byte metrics scaled to KiB/MiB; ``xlabel``/``ylabel`` default to the case key and the
    metric with its unit. ``title`` defaults to "<metric> by <x>". ``host`` names the host
    in the legend (always drawn). ``dark``: colours for a dark page (transparent background
    either way).

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
    pal = _DARK if dark else _LIGHT
    with plt.rc_context(_rc(pal)):
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        fig.patch.set_alpha(0)
        ax.patch.set_alpha(0)
        many = series and len(groups) > 1
        if kind == "line":
            for name, g in groups.items():
                if not all(isinstance(m["case"][x], (int, float)) for m in g):
                    raise ValueError(f"chart: x key {x!r} must be numeric for a line chart")
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
            if len(cats) >= 6 or sum(len(c) for c in cats) > 60:
                for t in ax.get_xticklabels():
                    t.set_rotation(30)
                    t.set_horizontalalignment("right")
        ax.set_xlabel(xlabel or human_label(x))
        if logy:
            ax.set_yscale("log")
        lows = [m["min"] / div for m in ms if m["min"] > 0]
        _ticks_y(ax, logy, min(lows, default=0), max(m["max"] / div for m in ms))
        metric = human_label(ms[0]["metric"])
        ax.set_ylabel(ylabel or (f"{metric} ({shown_unit})" if shown_unit else metric))
        ax.set_title(title or f"{metric} by {human_label(x)}", fontsize=11, loc="left")
        legend_title = (f"{host}: {series}" if host else series) if many else None
        if ax.get_legend_handles_labels()[1]:  # a host or series to name
            ax.legend(title=legend_title, frameon=False, fontsize=8, title_fontsize=8,
                      loc="best", labelcolor=pal["fg"])
        ax.grid(True, axis="y", alpha=0.25, color=pal["grid"])
        fig.tight_layout()
    return fig


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
    by ``labkit/mkdocs_hooks.py`` (:func:`take`); the name is the content's hash, so the same
    chart keeps its URL."""
    name = f"fig-{hashlib.sha1(svg.encode()).hexdigest()[:12]}.svg"
    _FIGURES[f"{site_dir_of_page}{name}"] = svg
    return name


def take() -> dict[str, str]:
    """Every figure stored since the last call (site path → SVG text), and forget them."""
    out = dict(_FIGURES)
    _FIGURES.clear()
    return out
