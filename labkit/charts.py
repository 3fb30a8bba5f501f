"""Charts of measurements, drawn with matplotlib as SVG (medians, min–max whiskers)."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .render import fmt_case_value  # noqa: E402
from .render import unit as display_unit  # noqa: E402


def human_bytes(n: float) -> str:
    """``1024`` → ``"1 KiB"``, ``65536`` → ``"64 KiB"``, ``14`` → ``"14 B"``."""
    for suffix, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            v = n / size
            return f"{v:g} {suffix}"
    return f"{n:g} B"

plt.rcParams.update({
    "svg.fonttype": "none",       # text stays text: smaller files, searchable labels
    "svg.hashsalt": "perf-casebook",  # stable ids: the same data gives the same SVG
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
})


def chart_svg(ms: list[dict], x: str, series: str | None = None, *, kind: str = "line",
              logx: bool = False, logy: bool = False, title: str = "", ylabel: str | None = None,
              xbytes: bool = False) -> str:
    """Draw measurements ``ms`` (schema "measurements" dicts of one metric) and return SVG text.

    ``x``: case key on the horizontal axis (numeric for ``kind="line"``, any value for
    ``"bar"``); ``series``: case key that splits lines/bar groups. Each point is the
    median; whiskers span min–max of the samples.

    Raises:
        ValueError: no measurements, unknown kind, or non-numeric x for a line chart.
    """
    if not ms:
        raise ValueError("chart: no measurements to draw")
    if kind not in ("line", "bar"):
        raise ValueError(f"chart: kind must be 'line' or 'bar', not {kind!r}")
    unit = ms[0]["unit"]
    groups: dict[str, list[dict]] = {}
    for m in ms:
        if x not in m["case"]:
            raise ValueError(f"chart: measurement has no case key {x!r}: {m['case']}")
        groups.setdefault(fmt_case_value(m["case"].get(series, "")) if series else "", []).append(m)
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    if kind == "line":
        for name, g in groups.items():
            if not all(isinstance(m["case"][x], (int, float)) for m in g):
                raise ValueError(f"chart: x key {x!r} must be numeric for a line chart")
            g = sorted(g, key=lambda m: m["case"][x])
            xs = [m["case"][x] for m in g]
            med = [m["median"] for m in g]
            err = [[m["median"] - m["min"] for m in g], [m["max"] - m["median"] for m in g]]
            ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=name or None)
        ax.set_xlabel(x)
    else:
        cats = list(dict.fromkeys(fmt_case_value(m["case"][x]) for m in ms))
        width = 0.8 / max(1, len(groups))
        for i, (name, g) in enumerate(groups.items()):
            pos, med, lo, hi = [], [], [], []
            for m in g:
                pos.append(cats.index(fmt_case_value(m["case"][x])) + i * width - 0.4 + width / 2)
                med.append(m["median"])
                lo.append(m["median"] - m["min"])
                hi.append(m["max"] - m["median"])
            ax.bar(pos, med, width=width * 0.95, yerr=[lo, hi], capsize=3, label=name or None)
        ax.set_xticks(range(len(cats)), cats, rotation=0 if len(cats) < 6 else 30)
        ax.set_xlabel(x)
    if logx:
        ax.set_xscale("log", base=2)
    if xbytes and kind == "line":
        ticks = sorted({m["case"][x] for m in ms})
        ax.set_xticks(ticks, [human_bytes(t) for t in ticks], rotation=30 if len(ticks) > 6 else 0)
        ax.minorticks_off()
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel or f"{ms[0]['metric']} ({display_unit(unit)})")
    if title:
        ax.set_title(title)
    if series and len(groups) > 1:
        ax.legend(title=series, frameon=False, fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "labkit (matplotlib)"})
    plt.close(fig)
    return buf.getvalue()


def data_uri(svg: str) -> str:
    """A ``data:image/svg+xml;base64`` URI (the page needs no extra request or file)."""
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
