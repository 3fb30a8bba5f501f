"""The rendering layer with fixed expected values (labkit/view/render.py, labkit/view/charts.py): number
formatting and column precision, byte scaling, table alignment and escaping, compare ratios
(b/a) and their noise flags, tabs and admonitions, the emulated-CPU badge, and chart whiskers
(median − min below, max − median above, in the axis unit). The numbers here are formatting
inputs, not measurements."""

from __future__ import annotations

import matplotlib.axes
import pytest

from labkit.stats import claims
from labkit.view import charts, render


@pytest.mark.parametrize("x,shown", [
    (None, "–"), (0, "0"), (5, "5"), (1234, "1234"), (9999, "9999"), (10000, "10,000"), (12345.6, "12,346"),
    (1.5, "1.500"), (0.0123, "0.01230"), (123.456, "123.5"), (-2.5, "-2.500"), (1e-05, "0.00001000"), (99.95, "99.95"),
    (9999.6, "10,000"), (-9999.6, "-10,000"), (9999.4, "9999"),
])
def test_fmt(x, shown):
    assert render.fmt(x) == shown


@pytest.mark.parametrize("values,decimals", [
    ([100.5, 200.25], 0), ([10.5, 99.1], 1), ([1.5], 2), ([0.5], 3), ([0.0005], 3), ([5.0, 10.0], 0), ([0, 0], 0),
    ([1.5, 250.0], 2), ([None, 0.5], 3),
])
def test_column_decimals(values, decimals):
    assert render.column_decimals(values) == decimals


@pytest.mark.parametrize("values,scale", [
    ([1023], (1.0, "B")), ([1024], (1024.0, "KiB")), ([3 * 2**20, 5], (2.0**20, "MiB")), ([2**30], (2.0**30, "GiB")),
    ([], (1.0, "B")), ([None, 2048], (1024.0, "KiB")), ([-4096], (1024.0, "KiB")),
])
def test_byte_scale(values, scale):
    assert render.byte_scale(values) == scale


def test_small_formatters():
    assert render.fmt_fixed(12345.678, 1) == "12,345.7" and render.fmt_fixed(None, 2) == "–"
    assert render.fmt_fixed(2, 0) == "2"
    assert [render.unit(u) for u in ("us", "us/MiB", "bus", "x", "IOPS", "MiB/s")] == ["µs", "µs/MiB", "bus", "×", "IOPS", "MiB/s"]
    assert [render.unit(u) for u in ("ns", "ms", "s", "KiB/s", "ms/us")] == ["ns", "ms", "s", "KiB/s", "ms/µs"]
    assert [render.fmt_case_value(v) for v in (True, False, 4.0, 4.5, "s", 3)] == ["yes", "no", "4", "4.5", "s", "3"]
    assert [charts.human_bytes(n) for n in (1024, 65536, 14, 1536, 2**30, 0)] == ["1 KiB", "64 KiB", "14 B", "1.5 KiB", "1 GiB", "0 B"]
    assert [charts.human_number(v) for v in (20000, 0.5, 1e-3, 0, 12.345, -1500, 1000)] == \
        ["20,000", "0.5", "0.001", "0", "12.3", "-1,500", "1,000"]
    # tick values between 100 and 999 keep their zeros (a 500 MiB/s tick once read "5")
    assert [charts.human_number(v) for v in (100, 200, 500, 250, 10, 20.0, 0.1, 0.25, 999.4, -300)] == \
        ["100", "200", "500", "250", "10", "20", "0.1", "0.25", "999", "-300"]
    assert [charts.human_label(n) for n in ("bin_us", "read_ahead_kb", "iodepth", "cpu_pct", "size_MiB")] == \
        ["bin (µs)", "read ahead (KiB)", "iodepth", "cpu (%)", "size (MiB)"]


def m(metric="lat", unit="us", case=None, samples=(1.0, 2.0, 3.0)) -> dict:
    samples = [float(s) for s in samples]
    return {"metric": metric, "unit": unit, "case": case or {}, "samples": samples,
            "median": sorted(samples)[len(samples) // 2] if len(samples) % 2 else
            sum(sorted(samples)[len(samples) // 2 - 1:len(samples) // 2 + 1]) / 2,
            "min": min(samples), "max": max(samples), "n": len(samples)}


def test_measurement_table_terminal_and_page():
    ms = [m(case={"q": 1, "io": True}, samples=(10.0, 12.5, 15.0)), m(case={"q": 32}, samples=(1000.0, 1100.0, 1500.0))]
    keys = render.case_keys(ms)
    assert keys == ["q", "io"] and render.case_keys(ms, where={"io": True}) == ["q"]
    assert render.case_keys(ms, columns=["io"]) == ["io"]
    header, rows = render.measurement_table(ms, keys)
    assert header == ["q", "io", "median", "min – max", "samples", "unit"]
    assert rows == [["1", "yes", "12.50", "10 – 15", "3", "µs"], ["32", "", "1100", "1000 – 1500", "3", "µs"]]
    header, rows = render.measurement_table(ms, keys, page=True)   # the median after the first case column
    assert header == ["q", "median (µs)", "io", "min – max (µs)", "samples"]
    assert rows == [["1", "12.5", "yes", "10.0 – 15.0", "3"], ["32", "1,100.0", "", "1,000.0 – 1,500.0", "3"]]
    assert render.measurement_table(ms, [], page=True)[0] == ["median (µs)", "min – max (µs)", "samples"]


def test_measurement_table_page_bytes_and_mixed_units():
    ms = [m(unit="bytes", samples=(1024.0, 2048.0, 4096.0)), m(unit="bytes", case={"k": 2}, samples=(3 * 2**20,) * 3)]
    header, rows = render.measurement_table(ms, ["k"], page=True)
    assert header == ["k", "median (MiB)", "min – max (MiB)", "samples"]
    assert rows[1] == ["2", "3.000", "3.000 – 3.000", "3"] and rows[0][1] == "0.002"
    mixed = [m(unit="us"), m(unit="ms", case={"k": 1})]
    header, rows = render.measurement_table(mixed, ["k"], page=True)
    assert header == ["k", "median", "unit", "min – max", "samples"] and [r[2] for r in rows] == ["µs", "ms"]
    assert rows == [["", "2", "µs", "1 – 3", "3"], ["1", "2", "ms", "1 – 3", "3"]]     # mixed units: unscaled
    # a dimensionless metric: no empty "()" in the headers
    header, rows = render.measurement_table([m(unit="", case={"k": 1}, samples=(0.5, 0.25, 1.0))], ["k"], page=True)
    assert header == ["k", "median", "min – max", "samples"] and rows == [["1", "0.500", "0.250 – 1.000", "3"]]


def test_tables_align_and_escape():
    assert render.table_align([["1", "a", "1.5 – 2.0 µs", "", "12,345", "3 %"], ["–", "b", "2", "x", "1", "4 %"]]) == \
        ["right", "left", "right", "left", "right", "right"]
    assert render.table_align([]) == []
    assert render.table_align([["", "a"], ["1", "b"], ["–", ""]]) == ["right", "left"]   # empty cells do not count
    assert render.markdown_table(["a|b", "n"], [["x|y", "1.5"]]) == "| a\\|b | n |\n|---|---:|\n| x\\|y | 1.5 |"
    assert render.markdown_table(["a"], [["1"]], align=None) == "| a |\n|---|\n| 1 |"
    assert render.markdown_table(["a", "b"], [["x\ny", "2"]], align=["right", "left"]) == "| a | b |\n|---:|---|\n| x y | 2 |"
    assert render.text_table(["h", "long"], [["x", "1"], ["yy", "22"]]) == "h   long\n--  ----\nx   1\nyy  22"
    assert render.text_table(["h"], []) == "h\n-"


def test_escaping_of_text_from_results():
    assert render.esc("<not supported> a_b *c* [x] `y` & \\") == \
        "&lt;not supported&gt; a\\_b \\*c\\* \\[x\\] \\`y\\` &amp; \\\\"
    assert render.esc('"quoted"') == '"quoted"'
    assert render.code_span("a`b") == "``a`b``" and render.code_span("`x") == "`` `x ``"
    assert render.code_span("plain") == "`plain`" and render.code_span("two\nlines") == "`two lines`"
    assert render.code_span("x`") == "`` x` ``"          # a trailing backtick is padded too
    assert render.code_block("x ``` y") == "````text\nx ``` y\n````"
    assert render.code_block("a", "console") == "```console\na\n```"
    assert render.admonition("note", 'say "hi" <b>', "one\n\ntwo") == '!!! note "say &quot;hi&quot; &lt;b&gt;"\n\n    one\n\n    two\n'


def result(label: str, ms: list[dict], emulation=None, arch="x86_64") -> dict:
    return {"host": {"label": label, "arch": arch, "emulation": emulation}, "measurements": ms}


def test_compare_rows_ratio_is_b_over_a_with_its_calibrated_interval():
    """The "beyond noise?" mark is the claims engine's unpaired interval of b/a (Welch's t on
    logs): it excludes 1, or holds it; fewer than 3 samples on a side decide nothing; every
    sample 0 on both sides is no difference."""
    a = result("A", [m(case={"k": 1}, samples=(10.0, 11.0, 12.0)), m(case={"k": 2}, samples=(10.0, 11.0, 12.0)),
                     m(case={"k": 3}, samples=(1.0, 2.0)), m(case={"k": 4}), m(metric="zero", samples=(0.0, 0.0, 0.0))])
    b = result("B", [m(case={"k": 1}, samples=(20.0, 22.0, 24.0)), m(case={"k": 2}, samples=(11.5, 12.0, 13.0)),
                     m(case={"k": 3}, samples=(5.0, 6.0, 7.0)), m(metric="zero", samples=(0.0, 0.0, 0.0))])
    header, rows = render.compare_rows(a, b)
    assert header == ["metric", "case", "A", "B", "ratio", "95 % interval", "beyond noise?"]
    want = {}
    for k in (1, 2):
        _, lo, hi, _ = claims.interval_of(tuple(b["measurements"][k - 1]["samples"]),
                                          tuple(a["measurements"][k - 1]["samples"]), "median", False)
        want[k] = (f"{lo:.2f}–{hi:.2f}", "yes" if lo > 1 or hi < 1 else "within noise")
    assert want[1][1] == "yes" and want[2][1] == "within noise"
    assert rows == [
        ["lat", "k=1", "11 µs", "22 µs", "2.00", *want[1]],
        ["lat", "k=2", "11 µs", "12 µs", "1.09", *want[2]],
        ["lat", "k=3", "1.500 µs", "6 µs", "4.00", "", "too few samples"],
        ["zero", "", "0 µs", "0 µs", "nan", "0 in every sample of both", "within noise"],
    ]   # k=4 has no counterpart in B: no row
    _, back = render.compare_rows(b, a)
    assert back[0][4] == "0.50"
    # Ranges apart are not enough at n = 3 (2 orderings in 20 under no difference): the interval
    # of two sides whose ranges barely miss each other still holds 1.
    a = result("A", [m(case={"k": 1, "rw": "read"}, samples=(10.0, 11.5, 12.0))])
    b = result("B", [m(case={"k": 1, "rw": "read"}, samples=(12.1, 13.0, 17.0))])
    assert [(r[1], r[6]) for r in render.compare_rows(a, b)[1]] == [("k=1, rw=read", "within noise")]


def test_tabs_and_captions():
    one = render.tabs([("host <1>", "body")])
    assert one == f"{render.DATA_OPEN}\n\n<p class=\"pc-caption\">host &lt;1&gt;</p>\n\nbody\n\n{render.DATA_CLOSE}\n\n"
    two = render.tabs([("h1", "a\n\nb"), ("h2", "c")])
    assert two == f'{render.DATA_OPEN}\n\n===! "h1"\n\n    a\n\n    b\n\n=== "h2"\n\n    c\n\n{render.DATA_CLOSE}\n\n'


def test_emulated_hosts_are_badged():
    tcg = {"accelerator": "tcg", "host_arch": "x86_64"}
    assert render.emulation({"arch": "aarch64", "emulation": tcg}) == \
        "emulated aarch64 (QEMU TCG on x86_64): timings are not hardware"
    assert render.emulation({"arch": "x86_64", "emulation": {"accelerator": "kvm", "host_arch": "x86_64"}}) is None
    assert render.emulation({"arch": "x86_64"}) is None and render.emulation_badge({"arch": "x86_64"}) == ""
    assert render.host_label({"label": "a_b", "arch": "x86_64"}) == "a\\_b"
    assert render.host_label({"label": "q", "arch": "aarch64", "emulation": tcg}, "lbl") == \
        'lbl <span class="pc-emulated">emulated aarch64 (QEMU TCG on x86_64): timings are not hardware</span>'


@pytest.fixture
def drawn(monkeypatch):
    """What chart_svg asks matplotlib to draw: errorbar and bar calls (x, heights, yerr, label).
    The build's chart cache is off: every chart is drawn."""
    monkeypatch.setenv("PCB_BUILD_CACHE", "off")
    calls, inside_bar = [], []
    real_errorbar, real_bar = matplotlib.axes.Axes.errorbar, matplotlib.axes.Axes.bar

    def errorbar(self, x, y, yerr=None, **kw):
        if not inside_bar:            # bar draws its whiskers with errorbar: recorded as the bar
            calls.append(("line", list(x), list(y), [list(e) for e in yerr], kw.get("label")))
        return real_errorbar(self, x, y, yerr=yerr, **kw)

    def bar(self, x, height, **kw):
        calls.append(("bar", [round(p, 9) for p in x], list(height), [list(e) for e in kw["yerr"]], kw.get("label")))
        inside_bar.append(1)
        try:
            return real_bar(self, x, height, **kw)
        finally:
            inside_bar.pop()
    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", errorbar)
    monkeypatch.setattr(matplotlib.axes.Axes, "bar", bar)
    return calls


def test_line_chart_whiskers_span_min_to_max(drawn):
    ms = [m(case={"q": 4, "e": "b"}, samples=(4.0, 5.0, 9.0)), m(case={"q": 1, "e": "b"}, samples=(1.0, 2.0, 3.0)),
          m(case={"q": 1, "e": "a"}, samples=(2.0, 2.0, 2.0))]
    svg = charts.chart_svg(ms, "q", "e", host="h1")
    assert svg.lstrip().startswith(("<?xml", "<svg"))
    assert drawn == [("line", [1, 4], [2.0, 5.0], [[1.0, 1.0], [1.0, 4.0]], "b"),     # sorted by x
                     ("line", [1], [2.0], [[0.0], [0.0]], "a")]
    assert "lat (µs)" in svg and "lat by q" in svg and "h1: e" in svg


def test_byte_metrics_are_scaled_on_both_the_median_and_the_whiskers(drawn):
    ms = [m(unit="bytes", case={"q": 1}, samples=(2**20, 2 * 2**20, 4 * 2**20))]
    svg = charts.chart_svg(ms, "q", host="h")
    assert drawn == [("line", [1], [2.0], [[1.0], [2.0]], "h")]
    assert "lat (MiB)" in svg


def test_bar_chart_positions_and_whiskers(drawn):
    ms = [m(case={"bs": 4096, "e": "x"}, samples=(1.0, 2.0, 4.0)), m(case={"bs": 65536, "e": "x"}, samples=(3.0, 3.0, 3.0)),
          m(case={"bs": 4096, "e": "y"}, samples=(5.0, 6.0, 8.0))]
    svg = charts.chart_svg(ms, "bs", "e", kind="bar", xbytes=True)
    assert drawn == [("bar", [-0.2, 0.8], [2.0, 3.0], [[1.0, 0.0], [2.0, 0.0]], "x"),
                     ("bar", [0.2], [6.0], [[1.0], [2.0]], "y")]
    assert "4 KiB" in svg and "64 KiB" in svg


def test_chart_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="no measurements"):
        charts.chart_svg([], "q")
    with pytest.raises(ValueError, match="kind must be"):
        charts.chart_svg([m(case={"q": 1})], "q", kind="pie")
    with pytest.raises(ValueError, match="no case key 'q'"):
        charts.chart_svg([m(case={"r": 1})], "q")
    with pytest.raises(ValueError, match="must be numeric"):
        charts.chart_svg([m(case={"q": "a"})], "q")


def test_same_data_same_svg_and_sizes(monkeypatch):
    monkeypatch.setenv("PCB_BUILD_CACHE", "off")      # drawn twice, not read back from the cache
    ms = [m(case={"q": 1}), m(case={"q": 2}, samples=(2.0, 3.0, 4.0))]
    a, b = charts.chart_svg(ms, "q"), charts.chart_svg(ms, "q")
    assert a == b and a != charts.chart_svg(ms, "q", dark=True)
    w, h = charts.svg_size(a)
    assert (w, h) == (461, 327)              # 4.8 x 3.41 inches at 96 px per inch
    assert charts.svg_size('<svg width="10px" height="20px">') == (10, 20)
    assert charts.svg_size('<svg width="72pt" height="36pt">') == (96, 48)
    with pytest.raises(ValueError, match="no width/height"):
        charts.svg_size("<svg>")
    charts.take()                            # figures other tests of the session stored
    name = charts.store("cases/x/", a)
    assert name.startswith("fig-") and name.endswith(".svg") and charts.store("cases/x/", a) == name
    assert charts.take() == {f"cases/x/{name}": a} and charts.take() == {}


def test_metrics_table_puts_metrics_side_by_side():
    """One row per case in first-seen order over the columns, a median per metric with its unit
    in the header (none added when the label holds it), bytes scaled per column, "–" where a
    metric did not measure a case, and samples as n or a range when the metrics disagree."""
    iops = [m("iops", "IOPS", {"e": "psync", "d": 1}, (900.0, 1000.0, 1100.0)),
            m("iops", "IOPS", {"e": "libaio", "d": 32}, (20000.0, 25000.5, 30000.0))]
    lat = [m("clat", "us", {"e": "libaio", "d": 32}, (1.25, 1.5, 2.0, 9.0)),
           m("clat", "us", {"e": "psync", "d": 1}, (100.0, 120.0, 130.0)),
           m("clat", "us", {"e": "io_uring", "d": 4}, (50.0, 60.0, 70.0))]
    rss = [m("rss", "bytes", {"e": "psync", "d": 1}, (3 * 2**20,) * 3)]
    header, rows = render.metrics_table([("IOPS", iops), ("clat p50", lat), ("RSS", rss)], ["e", "d"])
    assert header == ["e", "IOPS", "clat p50 (µs)", "RSS (MiB)", "d", "samples"]   # figures after the first key
    assert rows == [["psync", "1,000", "120.00", "3", "1", "3"],
                    ["libaio", "25,000", "1.75", "–", "32", "3–4"],
                    ["io_uring", "–", "60.00", "–", "4", "3"]]
    assert render.table_align(rows) == ["left", "right", "right", "right", "right", "right"]


def test_metrics_table_refuses_ambiguous_rows_and_mixed_units():
    two = [m(case={"e": "psync", "p": "job"}), m(case={"e": "psync", "p": "sync"})]
    with pytest.raises(ValueError, match="two measurements"):
        render.metrics_table([("lat", two)], ["e"])
    assert len(render.metrics_table([("lat", two)], ["e", "p"])[1]) == 2
    with pytest.raises(ValueError, match="mixes units"):
        render.metrics_table([("lat", [m(unit="us"), m(unit="ms", case={"k": 1})])], ["k"])


def test_sizes_in_bytes_read_as_kib_in_site_tables():
    """Case columns that hold sizes in bytes (the manifests' case_units) show B/KiB/MiB in the site's
    tables; other numbers stay as they are, and the terminal table keeps the raw value."""
    assert [render.case_cell("bs", v) for v in (4096, 1024.0, 4194304, 14, 1536)] == \
        ["4 KiB", "1 KiB", "4 MiB", "14 B", "1.5 KiB"]
    assert [render.case_cell(k, v) for k, v in (("iodepth", 4096), ("bs", "4k"), ("msize", True))] == ["4096", "4k", "yes"]
    ms = [m(case={"bs": 65536, "iodepth": 32})]
    assert render.measurement_table(ms, ["bs", "iodepth"], page=True)[1][0][:3] == ["64 KiB", "2", "32"]
    assert render.measurement_table(ms, ["bs", "iodepth"])[1][0][:2] == ["65536", "32"]
    assert render.metrics_table([("lat", ms)], ["bs"])[1] == [["64 KiB", "2", "3"]]
    # every byte key the manifests declare: fio's bs, fstime's bufsize, lat_tcp's msize, the nvme lab's block
    assert [render.case_cell(k, 65536) for k in ("bs", "bufsize", "msize", "block")] == ["64 KiB"] * 4


def test_metrics_table_precision_missing_keys_and_empty_columns():
    """A byte column's precision is that of the scaled values (1536 B reads 1.50 KiB, not 2);
    a case without one of the keys shows an empty cell; a column with no measurement adds no
    unit to its header."""
    size = [m("size", "bytes", {"k": 1}, (1536.0,) * 3)]
    header, rows = render.metrics_table([("size", size)], ["k"])
    assert header == ["k", "size (KiB)", "samples"] and rows == [["1", "1.50", "3"]]
    assert render.metrics_table([("lat", [m(case={"k": 1})])], ["k", "j"])[1] == [["1", "2", "", "3"]]
    header, rows = render.metrics_table([("lat", [m(case={"k": 1})]), ("none", [])], ["k"])
    assert header == ["k", "lat (µs)", "none", "samples"] and rows == [["1", "2", "–", "3"]]
