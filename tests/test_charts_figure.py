"""labkit/charts.py on the drawn figure (chart_figure): the axes a reader sees, with fixed expected
values. Ticks at the measured x values in human units (B/KiB/MiB, thousands separators, never
``2^n``), log axes, rotated labels when they would collide, axis labels and titles from the
metric and case keys, the legend (the host always named), the byte scale taken from the largest
value, and the two colour schemes (every text and tick of a dark figure in the dark scheme's
colour, also on log axes where matplotlib adds ticks while saving). The numbers here are
drawing inputs, not measurements."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, NullLocator

from labkit import charts
from test_render_values import m


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
    assert tuple(fig.get_size_inches()) == (6.0, 3.6) and fig.dpi == 100 and fig.patch.get_alpha() == 0


def test_many_x_values_use_a_log2_locator_and_long_labels_turn(fig_of):
    xs = [2 ** k for k in range(10, 24)]                     # 14 values: more than 12 ticks
    _, ax = fig_of([m(case={"bs": x}) for x in xs], "bs", xbytes=True, logx=True)
    loc = ax.xaxis.get_major_locator()
    assert isinstance(loc, LogLocator)
    assert set(loc.tick_values(1024, 2 ** 23)) >= {2.0 ** 12, 2.0 ** 16, 2.0 ** 20}
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {30.0}
    assert {t.get_horizontalalignment() for t in ax.get_xticklabels()} == {"right"}
    # 14 values on a linear axis: matplotlib's own locator, still human labels, still turned
    _, ax = fig_of([m(case={"q": x}) for x in range(1, 15)], "q")
    assert not isinstance(ax.xaxis.get_major_locator(), (FixedLocator, LogLocator))
    # seven short labels stay level; seven of five characters turn
    _, ax = fig_of([m(case={"q": x}) for x in range(1, 8)], "q")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    _, ax = fig_of([m(case={"q": 10000 * x}) for x in range(1, 8)], "q")
    assert labels(ax.xaxis)[0] == "10,000" and {t.get_rotation() for t in ax.get_xticklabels()} == {30.0}
    # six values of long labels stay level: the rule needs more than six
    _, ax = fig_of([m(case={"q": 10000 * x}) for x in range(1, 7)], "q")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}


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
    _, ax = fig_of([m(case={"read_ahead_kb": 128})], "read_ahead_kb")
    assert ax.get_xlabel() == "read ahead (KiB)" and ax.get_ylabel() == "lat (µs)"
    assert ax.get_title(loc="left") == "lat by read ahead (KiB)" and ax.get_title() == ""
    _, ax = fig_of([m("requests_per_io", "", {"q": 1})], "q", title="T", xlabel="X", ylabel="Y")
    assert (ax.get_title(loc="left"), ax.get_xlabel(), ax.get_ylabel()) == ("T", "X", "Y")
    _, ax = fig_of([m("requests_per_io", "", {"q": 1})], "q")
    assert ax.get_ylabel() == "requests per io"
    assert ax.yaxis.get_gridlines()[0].get_visible() and not ax.xaxis.get_gridlines()[0].get_visible()


def test_the_byte_scale_follows_the_largest_value(fig_of):
    _, ax = fig_of([m(unit="bytes", case={"q": 1}, samples=(512.0, 1024.0, 4 * 2.0 ** 20))], "q")
    assert ax.get_ylabel() == "lat (MiB)"
    assert [round(v, 6) for v in ax.lines[0].get_ydata()] == [round(1024 / 2 ** 20, 6)]


def test_the_legend_names_the_host_or_the_series(fig_of):
    one = [m(case={"q": 1}), m(case={"q": 2})]
    _, ax = fig_of(one, "q", host="arm64 board")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["arm64 board"]
    assert ax.get_legend().get_title().get_text() == ""
    _, ax = fig_of(one, "q")
    assert ax.get_legend() is None                       # nothing to name
    two = [m(case={"q": 1, "e": "psync"}), m(case={"q": 1, "e": "libaio"})]
    _, ax = fig_of(two, "q", "e", host="h1")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["psync", "libaio"]
    assert ax.get_legend().get_title().get_text() == "h1: e"
    _, ax = fig_of(two, "q", "e")
    assert ax.get_legend().get_title().get_text() == "e"
    _, ax = fig_of([m(case={"q": 1, "e": "psync"})], "q", "e", host="h1")   # one series: the host
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["h1"]


def test_bars_share_a_slot_and_long_category_labels_turn(fig_of):
    ms = [m(case={"mode": c, "rw": r}) for c in ("direct", "buffered") for r in ("read", "write", "trim")]
    _, ax = fig_of(ms, "mode", "rw", kind="bar")
    widths = {round(p.get_width(), 6) for p in ax.patches}
    assert widths == {round(0.8 / 3 * 0.95, 6)}
    assert labels(ax.xaxis) == ["direct", "buffered"]
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    six = [m(case={"c": f"c{i}"}) for i in range(6)]
    _, ax = fig_of(six, "c", kind="bar")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {30.0}
    five = [m(case={"c": f"c{i}"}) for i in range(5)]
    _, ax = fig_of(five, "c", kind="bar")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
    wordy = [m(case={"c": c}) for c in ("a" * 21, "b" * 20, "c" * 20)]     # 61 characters
    _, ax = fig_of(wordy, "c", kind="bar")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {30.0}
    _, ax = fig_of([m(case={"c": c}) for c in ("a" * 20, "b" * 20, "c" * 20)], "c", kind="bar")
    assert {t.get_rotation() for t in ax.get_xticklabels()} == {0.0}
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
    assert to_hex(dark.get_legend().get_texts()[0].get_color()) == "#e2e4e9"
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


def test_every_unit_suffix_moves_into_parentheses():
    names = ["t_us", "t_ns", "t_ms", "t_s", "size_kb", "size_KiB", "rate_mb", "size_mib", "size_bytes", "cpu_pct",
             "t_US", "bytes", "read_ahead", "a_b_c"]
    assert [charts.human_label(n) for n in names] == [
        "t (µs)", "t (ns)", "t (ms)", "t (s)", "size (KiB)", "size (KiB)", "rate (MB)", "size (MiB)", "size (bytes)",
        "cpu (%)", "t (µs)", "bytes", "read ahead", "a b c"]
