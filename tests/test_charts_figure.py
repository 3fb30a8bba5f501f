"""labkit/view/charts.py on the drawn figure (chart_figure): the axes a reader sees, with fixed expected
values. Ticks at the measured x values in human units (B/KiB/MiB, thousands separators, never
``2^n``), log axes, tick labels that turn when they would collide, axis labels and titles from
the metric and case keys (wrapped to the width), the legend under the plot (the host always
named), the byte scale taken from the largest value, the two colour schemes (every text and tick
of a dark figure in the dark scheme's colour, also on log axes where matplotlib adds ticks while
saving), and legibility: every text of a chart's SVG at 11 CSS pixels or more in a 390 px
phone's column, every text inside the figure, no two tick labels on top of each other, and the
heat map's text at its smallest shown size. The numbers here are drawing inputs, not
measurements."""

from __future__ import annotations

import math
import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, NullLocator

from labkit import heatmap
from labkit.view import charts
from test_render_values import m
import refhost


@pytest.fixture(autouse=True)
def no_chart_cache(monkeypatch):
    """Every SVG here is drawn, not read from the build cache (tests/test_build_speed.py tests it)."""
    monkeypatch.setenv("PCB_BUILD_CACHE", "off")


@pytest.fixture
def fig_of():
    """chart_figure, closing every figure it drew at the end of the test."""
    figs = []

    def draw(*args, **kw):
        f = charts.chart_figure(*args, **kw)
        figs.append(f)
        f.canvas.draw()            # ticks and their labels as they are saved
        return f, f.axes[0]
    yield draw
    for f in figs:
        plt.close(f)


def labels(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels()]


def test_x_ticks_at_the_measured_values_in_bytes_on_a_log2_axis(fig_of):
    ms = [m(case={"bs": b}) for b in (65536, 4096, 1048576)]
    fig, ax = fig_of(ms, "bs", xbytes=True, logx=True)
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
    assert isinstance(ax.xaxis.get_major_locator(), FixedLocator)
    assert list(ax.get_xticks()) == [4096, 65536, 1048576]
    assert labels(ax.xaxis) == ["4 KiB", "64 KiB", "1 MiB"]
    assert isinstance(ax.xaxis.get_minor_locator(), NullLocator)
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    assert ax.get_yscale() == "linear"
    assert fig.get_size_inches()[0] == charts.FIG_W_IN and fig.dpi == 100 and fig.patch.get_alpha() == 0


def rotation(ax) -> set[float]:
    return {t.get_rotation() for t in ax.get_xticklabels()}


def test_many_x_values_use_a_log2_locator_and_crowded_labels_turn(fig_of):
    xs = [2 ** k for k in range(10, 24)]                     # 14 values: more than 12 ticks
    fig, ax = fig_of([m(case={"bs": x}) for x in xs], "bs", xbytes=True, logx=True)
    loc = ax.xaxis.get_major_locator()
    assert isinstance(loc, LogLocator)
    assert set(loc.tick_values(1024, 2 ** 23)) >= {2.0 ** 12, 2.0 ** 16, 2.0 ** 20}
    assert labels(ax.xaxis) == ["256 B", "1 KiB", "4 KiB", "16 KiB", "64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB"]
    assert rotation(ax) == {30.0}
    assert {t.get_horizontalalignment() for t in ax.get_xticklabels()} == {"right"}
    # the turned labels take room under the plot: the figure grows, the plot keeps its height
    level, _ = fig_of([m(case={"bs": x}) for x in (4096, 65536, 2 ** 20)], "bs", xbytes=True, logx=True)
    assert fig.get_size_inches()[1] > level.get_size_inches()[1]
    # 14 values on a linear axis: matplotlib's own locator, still human labels; short, so level
    _, ax = fig_of([m(case={"q": x}) for x in range(1, 15)], "q")
    assert not isinstance(ax.xaxis.get_major_locator(), (FixedLocator, LogLocator))
    assert rotation(ax) == {0.0}
    # seven labels of six characters collide at 11 pt in the phone-sized plot: they turn;
    # three of them have room
    _, ax = fig_of([m(case={"q": 10000 * x}) for x in range(1, 8)], "q")
    assert labels(ax.xaxis)[0] == "10,000" and rotation(ax) == {30.0}
    _, ax = fig_of([m(case={"q": 10000 * x}) for x in range(1, 4)], "q")
    assert rotation(ax) == {0.0}
    # twelve of them stand too close for 30°: they turn further
    _, ax = fig_of([m(case={"q": 10000 * x}) for x in range(1, 13)], "q")
    assert rotation(ax) == {45.0}


def test_y_ticks_are_plain_numbers_and_log_minor_ticks_only_over_few_decades(fig_of):
    _, ax = fig_of([m(case={"q": 1}, samples=(10000.0, 20000.0, 30000.0))], "q")
    assert ax.yaxis.get_major_formatter()(20000, 0) == "20,000"
    assert ax.yaxis.get_major_formatter()(0.5, 0) == "0.5"
    # 100 .. 2,000: less than 30x, minor ticks at 2 and 5 of each decade, labelled
    _, ax = fig_of([m(case={"q": 1}, samples=(100.0, 500.0, 2000.0))], "q", logy=True)
    assert ax.get_yscale() == "log"
    assert isinstance(ax.yaxis.get_major_locator(), LogLocator)
    minor = ax.yaxis.get_minor_locator()
    assert isinstance(minor, LogLocator) and {200.0, 500.0} <= set(minor.tick_values(100, 1000))
    assert 300.0 not in set(minor.tick_values(100, 1000))
    assert ax.yaxis.get_minor_formatter()(200, 0) == "200"
    # 1 .. 10,000: four decades, no minor ticks
    _, ax = fig_of([m(case={"q": 1}, samples=(1.0, 50.0, 10000.0))], "q", logy=True)
    assert isinstance(ax.yaxis.get_minor_locator(), NullLocator)
    assert isinstance(ax.yaxis.get_minor_formatter(), NullFormatter)
    # exactly 30x counts as many decades; a zero minimum is left out of the range
    _, ax = fig_of([m(case={"q": 1}, samples=(10.0, 20.0, 300.0))], "q", logy=True)
    assert isinstance(ax.yaxis.get_minor_locator(), NullLocator)
    _, ax = fig_of([m(case={"q": 1}, samples=(0.0, 20.0, 40.0)), m(case={"q": 2}, samples=(10.0, 20.0, 40.0))],
                   "q", logy=True)
    assert isinstance(ax.yaxis.get_minor_locator(), LogLocator)


def test_axis_labels_and_title_from_the_metric_and_the_case_key(fig_of):
    fig, ax = fig_of([m(case={"read_ahead_kb": 128})], "read_ahead_kb")
    assert ax.get_xlabel() == "read ahead (KiB)" and ax.get_ylabel() == "lat (µs)"
    assert fig.get_suptitle() == "lat by read ahead (KiB)" and ax.get_title() == ""
    assert fig._suptitle.get_horizontalalignment() == "left"
    fig, ax = fig_of([m("requests_per_io", "", {"q": 1})], "q", title="T", xlabel="X", ylabel="Y")
    assert (fig.get_suptitle(), ax.get_xlabel(), ax.get_ylabel()) == ("T", "X", "Y")
    _, ax = fig_of([m("requests_per_io", "", {"q": 1})], "q")
    assert ax.get_ylabel() == "requests per io"
    assert ax.yaxis.get_gridlines()[0].get_visible() and not ax.xaxis.get_gridlines()[0].get_visible()


def test_long_titles_and_labels_wrap_between_words(fig_of):
    """A title wider than the figure breaks between words (and the figure grows by its lines); a
    y label longer than the plot is high breaks too."""
    title = "4 KiB direct random reads: median completion latency on every engine we tried"
    fig, ax = fig_of([m(case={"q": 1})], "q", title=title, ylabel="reads per bin (4 bins per doubling)")
    lines = fig.get_suptitle().split("\n")
    assert len(lines) == 2 and " ".join(lines) == title
    assert ax.get_ylabel().split("\n") == ["reads per bin (4 bins per", "doubling)"]
    short, _ = fig_of([m(case={"q": 1})], "q", title="short")
    assert fig.get_size_inches()[1] > short.get_size_inches()[1]


def test_the_byte_scale_follows_the_largest_value(fig_of):
    _, ax = fig_of([m(unit="bytes", case={"q": 1}, samples=(512.0, 1024.0, 4 * 2.0 ** 20))], "q")
    assert ax.get_ylabel() == "lat (MiB)"
    assert [round(v, 6) for v in ax.lines[0].get_ydata()] == [round(1024 / 2 ** 20, 6)]


def legend(fig):
    """The figure's one legend (under the plot), or None."""
    assert len(fig.legends) <= 1 and fig.axes[0].get_legend() is None
    return fig.legends[0] if fig.legends else None


def test_the_legend_names_the_host_or_the_series(fig_of):
    one = [m(case={"q": 1}), m(case={"q": 2})]
    fig, ax = fig_of(one, "q", host="arm64 board")
    assert [t.get_text() for t in legend(fig).get_texts()] == ["arm64 board"]
    assert legend(fig).get_title().get_text() == ""
    # under the plot: below the x axis' label
    assert legend(fig).get_window_extent().y1 <= ax.xaxis.label.get_window_extent().y0
    fig, ax = fig_of(one, "q")
    assert legend(fig) is None                       # nothing to name
    two = [m(case={"q": 1, "e": "psync"}), m(case={"q": 1, "e": "libaio"})]
    fig, ax = fig_of(two, "q", "e", host="h1")
    assert [t.get_text() for t in legend(fig).get_texts()] == ["psync", "libaio"]
    assert legend(fig).get_title().get_text() == "h1: e"
    assert legend(fig)._ncols == 2                   # side by side where they fit
    fig, ax = fig_of(two, "q", "e")
    assert legend(fig).get_title().get_text() == "e"
    fig, ax = fig_of([m(case={"q": 1, "e": "psync"})], "q", "e", host="h1")   # one series: the host
    assert [t.get_text() for t in legend(fig).get_texts()] == ["h1"]
    # names too wide for one row share the width in fewer columns
    wide = [m(case={"q": 1, "e": f"{k}-a-long-series-name"}) for k in "abcd"]
    fig, ax = fig_of(wide, "q", "e")
    assert 1 <= legend(fig)._ncols < 4


def test_bars_share_a_slot_and_long_category_labels_turn(fig_of):
    ms = [m(case={"mode": c, "rw": r}) for c in ("direct", "buffered") for r in ("read", "write", "trim")]
    _, ax = fig_of(ms, "mode", "rw", kind="bar")
    widths = {round(p.get_width(), 6) for p in ax.patches}
    assert widths == {round(0.8 / 3 * 0.95, 6)}
    assert labels(ax.xaxis) == ["direct", "buffered"]
    assert rotation(ax) == {0.0}
    # eight short categories have room; five of perf's profiler settings do not, nor three
    # names of 20 characters; three of 12 do
    _, ax = fig_of([m(case={"c": f"c{i}"}) for i in range(8)], "c", kind="bar")
    assert rotation(ax) == {0.0}
    profilers = ("plain", "perf stat", "record (defaults)", "record 997 Hz", "record 9973 Hz")
    _, ax = fig_of([m(case={"c": c}) for c in profilers], "c", kind="bar")
    assert rotation(ax) == {30.0}
    _, ax = fig_of([m(case={"c": c * 20}) for c in "abc"], "c", kind="bar")
    assert rotation(ax) == {30.0}
    _, ax = fig_of([m(case={"c": c * 12}) for c in "abc"], "c", kind="bar")
    assert rotation(ax) == {0.0}
    # xbytes: numeric categories as sizes, others as they are; yes/no for booleans
    _, ax = fig_of([m(case={"bs": 4096}), m(case={"bs": 1048576})], "bs", kind="bar", xbytes=True)
    assert labels(ax.xaxis) == ["4 KiB", "1 MiB"]
    _, ax = fig_of([m(case={"bs": "4k"}), m(case={"bs": True})], "bs", kind="bar", xbytes=True)
    assert labels(ax.xaxis) == ["4k", "yes"]
    _, ax = fig_of(ms, "mode", "rw", kind="bar", logy=True)
    assert ax.get_yscale() == "log"


def test_series_colours_of_each_scheme(fig_of):
    two = [m(case={"q": 1, "e": "a"}), m(case={"q": 1, "e": "b"})]
    _, light = fig_of(two, "q", "e")
    _, dark = fig_of(two, "q", "e", dark=True)
    assert [to_hex(ln.get_color()) for ln in light.lines[:1]] == ["#1f77b4"]
    assert [to_hex(c.lines[0].get_color()) for c in dark.containers] == ["#6cb4ee", "#ffab5e"]
    assert to_hex(legend(dark.figure).get_texts()[0].get_color()) == "#e2e4e9"
    assert to_hex(dark.xaxis.label.get_color()) == "#e2e4e9" and to_hex(light.xaxis.label.get_color()) == "#222222"


@pytest.mark.parametrize("kind,logy", [("line", False), ("bar", True)])
def test_every_text_and_tick_of_a_dark_svg_is_in_the_dark_colour(kind, logy):
    """matplotlib creates some ticks only while saving (log axes): they too take the scheme's
    colour, not the default black."""
    ms = [m(case={"q": 1}, samples=(10.0, 200.0, 3000.0)), m(case={"q": 2}, samples=(5.0, 50.0, 500.0))]
    svg = charts.chart_svg(ms, "q", kind=kind, logy=logy, dark=True, host="h")
    fills = set(re.findall(r"<text[^>]*style=\"[^\"]*fill: (#[0-9a-f]{6})", svg))
    assert fills == {"#e2e4e9"}, fills
    tick_strokes = set(re.findall(r"<use [^>]*xlink:href=\"#m[0-9a-f]+\"[^>]*style=\"stroke: (#[0-9a-f]{6})", svg))
    defs = set(re.findall(r"<path id=\"m[0-9a-f]+\"[^>]*style=\"stroke: (#[0-9a-f]{6})", svg))
    assert "#000000" not in fills | tick_strokes | defs


_MARKER_ID = re.compile(r'(?<=id=")m[0-9a-f]{10}|(?<=#)m[0-9a-f]{10}')


@pytest.mark.parametrize("opts", [{"kind": "bar", "logy": True, "title": "T"}, {"kind": "line", "logx": True, "xbytes": True},
                                  {"kind": "line", "series": "e", "logy": True}])
def test_the_recoloured_dark_chart_is_the_chart_drawn_dark(opts):
    """A site build draws each chart for the light scheme and recolours it for the dark one
    (charts.dark_of): the result is what drawing it dark gives, but for the ids of marker
    definitions, which matplotlib derives from the marker's colour and which the file uses
    consistently."""
    opts = dict(opts)
    series = opts.pop("series", None)
    ms = [m(case={"q": q, "e": e}, samples=(q * 10.0 + i, q * 200.0, 3000.0 / q)) for q in (1, 2, 4096) for i, e in
          enumerate(("a", "b") if series else ("a",))]
    light = charts.render_svg(ms, "q", series, host="h", **opts)
    drawn_dark = charts.render_svg(ms, "q", series, host="h", dark=True, **opts)
    recoloured = charts.dark_of(light)
    assert recoloured != light
    assert _MARKER_ID.sub("m", recoloured) == _MARKER_ID.sub("m", drawn_dark)
    assert charts.chart_svg(ms, "q", series, host="h", dark=True, **opts) == recoloured


def test_every_unit_suffix_moves_into_parentheses():
    names = ["t_us", "t_ns", "t_ms", "t_s", "size_kb", "size_KiB", "rate_mb", "size_mib", "size_bytes", "cpu_pct",
             "t_US", "bytes", "read_ahead", "a_b_c"]
    assert [charts.human_label(n) for n in names] == [
        "t (µs)", "t (ns)", "t (ms)", "t (s)", "size (KiB)", "size (KiB)", "rate (MB)", "size (MiB)", "size (bytes)",
        "cpu (%)", "t (µs)", "bytes", "read ahead", "a b c"]


# ---- legibility: what a reader sees on a phone and on a laptop ----

PHONE_COLUMN_PX = 390 - 2 * 16   # a 390 px phone less mkdocs-material's 0.8 rem margins (measured in Chromium: 358)
WIDE_COLUMN_PX = 640             # img.pc-chart's max-width in docs/assets/casebook.css: a 1280 px window
MIN_TEXT_PX = 11


def on_screen_px(svg: str, shown_px: float) -> list[float]:
    """CSS pixel size of every text of ``svg`` when the page shows the image ``shown_px`` wide:
    font size × shown width / viewBox width (the SVG scales as a whole)."""
    view_w = float(re.search(r'<svg[^>]*\sviewBox="[\d.]+ [\d.]+ ([\d.]+) ', svg).group(1))
    texts = re.findall(r"<text\b[^>]*>", svg)
    sizes = [float(re.search(r"font-size: ([\d.]+)px", t).group(1)) for t in texts]   # each text has its own
    return [s * shown_px / view_w for s in sizes]


def test_the_legibility_check_flags_small_text():
    """The check itself: a chart as it was drawn before (6 inches wide, an 8 pt legend) shows
    its legend at 6.6 px on a phone."""
    old = '<svg width="432pt" height="259.2pt" viewBox="0 0 432 259.2"><text style="font-size: 8px">x</text></svg>'
    assert [round(v, 1) for v in on_screen_px(old, PHONE_COLUMN_PX)] == [6.6]
    assert min(on_screen_px(old, PHONE_COLUMN_PX)) < MIN_TEXT_PX


CHARTS = {
    "bytes on log2, three series": ([m(case={"bs": 2 ** k, "io": io}, samples=(1.0 * k, 2.0 * k, 3.0 * k))
                                     for k in range(12, 21) for io in ("direct", "buffered", "mmap")],
                                    "bs", "io", dict(logx=True, xbytes=True, host=refhost.HOST)),
    "log y, long title": ([m(case={"q": q}, samples=(10.0 * q, 100.0 * q, 900.0 * q)) for q in (1, 2, 4, 32)],
                          "q", None, dict(logx=True, logy=True, host="h", ylabel="clat p50 (µs)",
                                          title="4 KiB direct random reads: median completion latency")),
    "twelve wide numbers": ([m(case={"q": 10000 * x}) for x in range(1, 13)], "q", None, dict(host="h")),
    "bars, long categories, dark": ([m(case={"p": p, "n": n}) for p in ("plain", "perf stat", "record (defaults)",
                                                                        "record 997 Hz") for n in (1, 2)],
                                    "p", "n", dict(kind="bar", host="qemu-arm64-tcg", dark=True)),
}


@pytest.mark.parametrize("name", list(CHARTS))
def test_chart_text_is_legible_on_a_phone_and_not_huge_on_a_laptop(name):
    ms, x, series, opts = CHARTS[name]
    svg = charts.chart_svg(ms, x, series, **opts)
    assert len(re.findall(r"<text\b", svg)) >= 10          # title, ticks, labels, legend: all text, no paths
    phone, wide = on_screen_px(svg, PHONE_COLUMN_PX), on_screen_px(svg, WIDE_COLUMN_PX)
    assert min(phone) >= MIN_TEXT_PX, sorted(phone)[:3]
    assert max(wide) <= 24, sorted(wide)[-3:]
    # the page shows it at the width macros give the <img> (labkit.site.macros.chart: svg_size)
    assert charts.svg_size(svg)[0] <= WIDE_COLUMN_PX


def tick_labels(axis) -> list:
    """The tick labels matplotlib draws: major and minor, at locations inside the view."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for minor in (False, True):
        locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
        out += [t for v, t in zip(locs, axis.get_ticklabels(minor=minor)) if lo <= v <= hi and t.get_text()]
    return out


def drawn_texts(fig) -> list:
    """Every text of a chart figure that is drawn: title, axis labels, tick labels, legend."""
    ax = fig.axes[0]
    texts = [fig._suptitle, ax.xaxis.label, ax.yaxis.label, *tick_labels(ax.xaxis), *tick_labels(ax.yaxis)]
    for lg in fig.legends:
        texts += [lg.get_title(), *lg.get_texts()]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text()]


@pytest.mark.parametrize("name", list(CHARTS))
def test_every_text_fits_in_the_figure_and_tick_labels_do_not_touch(fig_of, name):
    ms, x, series, opts = CHARTS[name]
    fig, ax = fig_of(ms, x, series, **opts)
    box = fig.bbox
    texts = drawn_texts(fig)
    assert len(texts) >= 10
    for t in texts:
        e = t.get_window_extent()
        assert box.x0 - 1 <= e.x0 and e.x1 <= box.x1 + 1 and box.y0 - 1 <= e.y0 and e.y1 <= box.y1 + 1, t.get_text()
    # neighbouring x tick labels: level ones side by side; turned ones, parallel strips of one
    # text line, at least a line apart across their direction
    ticks = sorted(tick_labels(ax.xaxis), key=lambda t: t.get_window_extent().x0)
    angle = ticks[0].get_rotation()
    line_px = fig.dpi * charts.TEXT_PT / 72
    for a, b in zip(ticks, ticks[1:]):
        if angle == 0:
            assert a.get_window_extent().x1 <= b.get_window_extent().x0, (a, b)
        else:
            across = (b.get_window_extent().x1 - a.get_window_extent().x1) * math.sin(math.radians(angle))
            assert across >= line_px, (a.get_text(), b.get_text(), across, line_px)


def test_heat_map_text_is_legible_at_its_smallest(tmp_path):
    """A heat map is shown at three quarters of its own width or more (labkit.site.macros.flamegraph
    ``--pc-w``; it scrolls sideways in a narrower column): there, its text is 11 px or more."""
    hm = heatmap.bin_times([s + f / 50 for s in range(8) for f in range(0, 50, 3)], rows=50)
    svg = heatmap.heatmap_svg(hm, "a title", (1, 10, 12), (400, 600))
    own_px = charts.svg_size(svg)[0]
    sizes = on_screen_px(svg, 0.75 * own_px)
    assert len(sizes) >= 20 and min(sizes) >= MIN_TEXT_PX, sorted(sizes)[:3]


@pytest.mark.parametrize("room, turned", [(5 / 12, True), (0.6, False)])
def test_x_labels_turn_closer_than_half_a_text_size_apart(room, turned):
    """Two labels whose centres are their width plus ``room`` text sizes apart: turned below half
    a text size of clear space, level above it (the threshold, not a multiple of it)."""
    fig, ax = plt.subplots()
    try:
        ax.set_xlim(0, 1)
        ax.set_xticks([0, 1], ["wide label", "wide label"])
        measure = charts.Measure(fig)
        w = measure.width("wide label", charts.TEXT_PT)
        angle = charts.turn_crowded_x_labels(ax, measure, w + room * charts.TEXT_PT)
        assert (angle > 0) == turned, angle
    finally:
        plt.close(fig)


def test_y_tick_texts_include_a_tick_on_either_limit():
    fig, ax = plt.subplots()
    try:
        ax.set_ylim(0, 10)
        ax.set_yticks([0, 5, 10], ["0", "5", "10"])
        assert charts.y_tick_texts(ax) == ["0", "5", "10"]
    finally:
        plt.close(fig)
