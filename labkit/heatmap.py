"""Subsecond-offset heat maps of ``perf script`` samples, drawn as a static SVG.

The view is Brendan Gregg's subsecond-offset heat map, as FlameScope (Netflix) shows it
before you pick a time range: each **column** is one second of the recording, each
**row** a slice of that second (``rows`` slices, 50 by default: 20 ms each, offset 0 at
the bottom), and a cell's **colour** is the number of samples whose timestamp falls in
that slice. A CPU burst that recurs at the same point of every second is a horizontal
band; a one-off burst is a short vertical streak. Binning as in FlameScope
(``app/util/heatmap.py``): ``col = floor(t - floor(t_first))``,
``row = floor(rows * (t mod 1))``; idle samples (pid 0) are left out.

Here the map is a matplotlib SVG (no server, no JavaScript; text as text, no text under 11 pt:
a page shows it at three quarters of its own size or more, scrolling sideways where the column
is narrower, so its text stays 11 CSS pixels or more) and the time range to look
at is chosen by a rule, not a mouse: the **hottest slice** (the row with the most
samples summed over every second: a burst that recurs each second), in it the second
with the most samples, grown up and down that column while cells stay above half-way
between the column's median and the peak (``summary``, ``burst_range``). That range is what
``perf script --time START,END`` then turns into a flame graph.

Command line (used by labs/optane_kyber/run.sh)::

    python -m labkit.heatmap --perf-script F --svg OUT.svg --json OUT.json
        [--rows 50] [--title T] [--band START_MS,END_MS] [--include-idle] [--no-range]

prints the range as ``START,END`` (seconds, perf's clock) on stdout, ready for
``perf script --time``; ``--json`` keeps the counts and the summary. ``--no-range`` draws no
box and prints no range: for a map whose burst fills a whole second (a column), where the
rule above, made for a burst that recurs every second, would outline a piece of it.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .parsers.jsonline import ParseError
from .parsers.perf_script import sample_times
from .plot import pyplot


TEXT_PT = 11     # ticks and labels; the page never shows the map under 1 CSS px per point
TITLE_PT = 12


@dataclass
class Heatmap:
    """Sample counts per (second, slice).

    ``origin``: the whole second (perf's clock) where column 0 starts; ``rows``: slices
    per second; ``counts[col][row]``: samples in second ``origin + col``, slice ``row``
    (row 0 = offsets [0, 1000/rows) ms); ``total``: samples counted.
    """

    origin: int
    rows: int
    counts: list[list[int]]
    total: int

    @property
    def cols(self) -> int:
        return len(self.counts)

    @property
    def slice_s(self) -> float:
        """Height of one row in seconds."""
        return 1.0 / self.rows

    def cell_start(self, col: int, row: int) -> float:
        """Absolute start time (s, perf's clock) of cell (col, row)."""
        return self.origin + col + row / self.rows

    def max(self) -> int:
        return max((c for column in self.counts for c in column), default=0)


def bin_times(times: list[float], rows: int = 50) -> Heatmap:
    """Bin sample timestamps (seconds) into a subsecond-offset heat map.

    Raises:
        ValueError: no timestamps, or ``rows`` < 1.
    """
    if rows < 1:
        raise ValueError("rows must be at least 1")
    if not times:
        raise ValueError("no samples to draw (every sample idle, or an empty recording?)")
    origin = math.floor(min(times))
    cols = math.floor(max(times)) - origin + 1
    counts = [[0] * rows for _ in range(cols)]
    for t in times:
        off = t - origin
        col = math.floor(off)
        row = min(rows - 1, math.floor(rows * (off - col)))
        counts[col][row] += 1
    return Heatmap(origin, rows, counts, len(times))


def hottest(hm: Heatmap) -> tuple[int, int, int]:
    """(col, row, count) of the cell with the most samples; the earliest one on a tie."""
    best = (0, 0, -1)
    for col, column in enumerate(hm.counts):
        for row, c in enumerate(column):
            if c > best[2]:
                best = (col, row, c)
    return best


def row_totals(hm: Heatmap) -> list[int]:
    """Samples per slice of the second, summed over every second (one total per row)."""
    return [sum(column[row] for column in hm.counts) for row in range(hm.rows)]


def hottest_slice(hm: Heatmap) -> tuple[int, int]:
    """(row, total) of the slice of the second with the most samples over the whole
    recording: where a burst that recurs every second shows up, even when another
    moment has the single hottest cell. The earliest row on a tie."""
    totals = row_totals(hm)
    row = max(range(hm.rows), key=lambda r: (totals[r], -r))
    return row, totals[row]


def burst_range(hm: Heatmap, col: int, row: int, frac: float = 0.5) -> tuple[int, int]:
    """Rows [lo, hi] (inclusive) of column ``col`` around ``row`` whose counts all stay at
    or above ``median + frac × (peak − median)``, where ``peak`` is the count at ``row``
    and ``median`` the column's median count: the burst that the hot cell belongs to,
    measured against the column's own background (a CPU busy all the time raises every
    cell of the column alike and must not widen the range)."""
    peak = hm.counts[col][row]
    base = statistics.median(hm.counts[col])
    limit = base + frac * (peak - base)
    lo = hi = row
    while lo > 0 and hm.counts[col][lo - 1] >= limit:
        lo -= 1
    while hi < hm.rows - 1 and hm.counts[col][hi + 1] >= limit:
        hi += 1
    return lo, hi


def summary(hm: Heatmap, frac: float = 0.5) -> dict:
    """The hottest slice, the hottest cell and the range picked for a flame graph, as
    plain data (times in seconds of perf's clock, offsets in ms within the second)::

        {"origin", "rows", "cols", "total", "max",
         "hottest_slice": {"row", "samples", "offset_ms", "center_ms"},
         "hottest_cell": {"col", "row", "count", "start", "offset_ms"},
         "range": {"col", "row_lo", "row_hi", "start", "end", "start_ms", "end_ms", "samples"}}

    The range is one burst of the hottest slice: in that row, the second with the most
    samples, grown up and down its column by ``burst_range``.
    """
    ms = 1000.0 / hm.rows
    srow, stotal = hottest_slice(hm)
    col = max(range(hm.cols), key=lambda c: (hm.counts[c][srow], -c))
    lo, hi = burst_range(hm, col, srow, frac)
    ccol, crow, ccount = hottest(hm)
    return {
        "origin": hm.origin, "rows": hm.rows, "cols": hm.cols, "total": hm.total, "max": ccount,
        "hottest_slice": {"row": srow, "samples": stotal, "offset_ms": srow * ms, "center_ms": (srow + 0.5) * ms},
        "hottest_cell": {"col": ccol, "row": crow, "count": ccount, "start": hm.cell_start(ccol, crow),
                         "offset_ms": crow * ms},
        "range": {"col": col, "row_lo": lo, "row_hi": hi, "start": hm.cell_start(col, lo),
                  "end": hm.cell_start(col, hi + 1), "start_ms": lo * ms, "end_ms": (hi + 1) * ms,
                  "samples": sum(hm.counts[col][lo:hi + 1])},
    }


def heatmap_svg(hm: Heatmap, title: str = "", highlight: tuple[int, int, int] | None = None,
                band_ms: tuple[float, float] | None = None) -> str:
    """Draw the heat map with matplotlib; return SVG text.

    Columns are seconds since ``hm.origin``, rows the offset within the second (ms,
    0 at the bottom), colour the sample count (white = none). ``highlight`` =
    (col, row_lo, row_hi) outlines a selected range, as FlameScope highlights a
    selection; ``band_ms`` = (start, end) draws two dashed lines across every second
    (for example where a workload was told to be busy).
    """
    plt = pyplot()
    data = np.array(hm.counts, dtype=float).T  # rows × cols
    masked = np.ma.masked_equal(data, 0)
    cmap = plt.get_cmap("OrRd").with_extremes(bad="white")
    width = min(12.0, max(7.5, 0.45 * hm.cols + 3.0))
    with plt.rc_context({"font.size": TEXT_PT, "axes.titlesize": TITLE_PT}):
        fig, ax = plt.subplots(figsize=(width, 4.2), dpi=100)
        ms = 1000.0 / hm.rows
        mesh = ax.pcolormesh(np.arange(hm.cols + 1), np.arange(hm.rows + 1) * ms, masked, cmap=cmap,
                             vmin=0, vmax=max(1, hm.max()), edgecolors="#f2f2f2", linewidth=0.3)
        ax.set_xlim(0, hm.cols)
        ax.set_ylim(0, 1000)
        ax.set_xlabel(f"second of the recording (column 0 = {hm.origin} s of perf's clock)")
        ax.set_ylabel("offset within the second (ms)")
        step = 1 if hm.cols <= 20 else math.ceil(hm.cols / 20)
        ax.set_xticks([c + 0.5 for c in range(0, hm.cols, step)], [str(c) for c in range(0, hm.cols, step)])
        ax.set_yticks(range(0, 1001, 100))
        if band_ms:
            for y in band_ms:
                ax.axhline(y, color="#3060c0", linestyle="--", linewidth=0.9)
        if highlight:
            col, lo, hi = highlight
            ax.add_patch(plt.Rectangle((col, lo * ms), 1, (hi - lo + 1) * ms, fill=False,
                                       edgecolor="#1040a0", linewidth=2.0))
        cb = fig.colorbar(mesh, ax=ax, pad=0.02)
        cb.set_label(f"samples per {ms:g} ms slice")
        ax.set_title(title or "subsecond-offset heat map")
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "labkit.heatmap (matplotlib)"})
    plt.close(fig)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    """CLI: perf script text → heat map SVG (+ JSON summary); prints ``START,END``."""
    p = argparse.ArgumentParser(prog="python -m labkit.heatmap", description=__doc__.split("\n\n")[0])
    p.add_argument("--perf-script", required=True, help="perf script output (with timestamps)")
    p.add_argument("--svg", required=True)
    p.add_argument("--json", help="write counts and the summary here")
    p.add_argument("--rows", type=int, default=50, help="slices per second (default 50: 20 ms)")
    p.add_argument("--title", default="")
    p.add_argument("--band", help="START_MS,END_MS: dashed lines at these offsets")
    p.add_argument("--include-idle", action="store_true", help="count idle (pid 0) samples too")
    p.add_argument("--no-range", action="store_true", help="draw no selected range and print none")
    a = p.parse_args(argv)
    band = None
    if a.band:
        try:
            lo, hi = (float(x) for x in a.band.split(","))
        except ValueError:
            p.error(f"--band wants START_MS,END_MS, not {a.band!r}")
        band = (lo, hi)
    if a.rows < 1 or a.rows > 1000:
        p.error("--rows must be in 1..1000")
    try:
        text = Path(a.perf_script).read_text(errors="replace")
        hm = bin_times(sample_times(text, include_idle=a.include_idle), a.rows)
    except (OSError, ParseError, ValueError) as exc:
        print(f"labkit.heatmap: {a.perf_script}: {exc}", file=sys.stderr)
        return 1
    s = summary(hm)
    r = s["range"]
    box = None if a.no_range else (r["col"], r["row_lo"], r["row_hi"])
    Path(a.svg).write_text(heatmap_svg(hm, a.title, box, band))
    if a.json:
        Path(a.json).write_text(json.dumps({**s, "counts": hm.counts}, indent=1) + "\n")
    if not a.no_range:
        print(f"{r['start']:.6f},{r['end']:.6f}")
    print(f"labkit.heatmap: {hm.total} samples in {hm.cols} s x {hm.rows} slices; hottest slice "
          f"{s['hottest_slice']['offset_ms']:g} ms ({s['hottest_slice']['samples']} samples over all seconds)"
          + ("" if a.no_range else f"; range {r['start_ms']:g}-{r['end_ms']:g} ms of second {r['col']}"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
