"""The optane_kyber lab's parsers and heat map on real captured outputs
(tests/fixtures/<tool>/optane_kyber-*, each with the .cmd that produced it)."""

from __future__ import annotations

import gzip
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from labkit import heatmap
from labkit.parsers.fio import fio_json, fio_summary
from labkit.parsers.jsonline import ParseError, json_line
from labkit.parsers.perf import perf_stat_csv
from labkit.parsers.perf_script import sample_headers, sample_times
from labkit.parsers.sysbench import sysbench_cpu

FIX = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
HEAT_SCRIPT = FIX / "perf" / "optane_kyber-heat-burst.script.gz"
HEAT_BURST = FIX / "perf" / "optane_kyber-heat-burst.json"


def heat_text() -> str:
    return gzip.decompress(HEAT_SCRIPT.read_bytes()).decode()


def test_fixtures_have_their_commands():
    for f in FIX.rglob("optane_kyber-*"):
        if f.suffix != ".cmd":
            assert f.with_suffix(".cmd").exists(), f"{f} has no .cmd"


# ---- fio JSON ------------------------------------------------------------------------

def test_fio_summary_randread_qd1():
    text = (FIX / "fio" / "optane_kyber-randread-qd1-pvsync2.json").read_text()
    raw = json.loads(text)["jobs"][0]["read"]
    s = fio_summary(text)
    assert s["iops"] == raw["iops"] and s["total_ios"] == raw["total_ios"]
    assert s["clat_mean_us"] == pytest.approx(raw["clat_ns"]["mean"] / 1000)
    assert s["clat_p50_us"] == raw["clat_ns"]["percentile"]["50.000000"] / 1000
    assert s["clat_p99_9_us"] == raw["clat_ns"]["percentile"]["99.900000"] / 1000
    assert s["clat_min_us"] <= s["clat_p50_us"] <= s["clat_p99_us"] <= s["clat_p99_9_us"] <= s["clat_max_us"]
    # QD1: one I/O in flight, so IOPS and mean latency are tied by Little's law (within the
    # submission overhead that clat leaves out: IOPS * clat must not exceed 1 s per s)
    assert s["iops"] * s["clat_mean_us"] / 1e6 <= 1.0


def test_fio_summary_wants_one_job():
    text = (FIX / "fio" / "optane_kyber-randread-qd1-numjobs2-no-group.json").read_text()
    assert len(fio_json(text)["report"]["jobs"]) == 2
    with pytest.raises(ParseError, match="group_reporting"):
        fio_summary(text)


def test_fio_summary_no_write_io():
    text = (FIX / "fio" / "optane_kyber-randread-qd1-pvsync2.json").read_text()
    with pytest.raises(ParseError, match="no write"):
        fio_summary(text, "write")


@pytest.mark.parametrize("text", ["", "fio: failed to open /dev/nope\n", '{"fio version": "x"}'])
def test_fio_json_rejects(text):
    with pytest.raises(ParseError):
        fio_json(text)


def test_fio_json_skips_a_leading_note():
    text = (FIX / "fio" / "optane_kyber-randread-qd1-pvsync2.json").read_text()
    assert fio_summary("note: something fio said\n" + text)["iops"] == fio_summary(text)["iops"]


# ---- perf stat tracepoints ------------------------------------------------------------

def test_tracepoint_counts_match_fio_ios():
    ev = perf_stat_csv((FIX / "perf" / "optane_kyber-stat-kyber-tracepoints.csv").read_text())
    ios = fio_summary((FIX / "fio" / "optane_kyber-randread-qd1-kyber-under-perf-stat.json").read_text())["total_ios"]
    assert {"kyber:kyber_latency", "kyber:kyber_adjust", "kyber:kyber_throttled", "block:block_rq_issue"} <= set(ev)
    # filtered to the device fio read: one request issued per I/O
    assert ev["block:block_rq_issue"]["value"] == pytest.approx(ios, rel=0.02)
    assert ev["kyber:kyber_latency"]["value"] < ios / 10


# ---- sysbench --------------------------------------------------------------------------

def test_sysbench_cpu():
    s = sysbench_cpu((FIX / "sysbench" / "optane_kyber-cpu-1s.txt").read_text())
    assert s["events_per_s"] > 0 and s["events"] > 0
    assert s["latency_min_ms"] <= s["latency_avg_ms"] <= s["latency_max_ms"]
    assert s["percentile"] == 95.0
    # events per second and the total agree with the run time sysbench printed
    assert s["events"] / s["total_time_s"] == pytest.approx(s["events_per_s"], rel=0.01)


def test_sysbench_rejects_other_text():
    with pytest.raises(ParseError):
        sysbench_cpu("sysbench 1.0.20\nFATAL: unknown test\n")


# ---- perf script headers ---------------------------------------------------------------

def test_perf_script_headers():
    text = heat_text()
    hs = sample_headers(text)
    n_headers = sum(1 for line in text.splitlines() if line and line[0] not in "\t#")
    assert len(hs) == n_headers
    assert all(h.cpu is not None for h in hs), "recorded with -a: every sample has its CPU"
    assert {h.event.split(":")[0] for h in hs} <= {"cpu-clock", "cycles"}
    assert any(h.idle for h in hs) and any(h.comm == "burst" for h in hs)
    times = [h.time for h in hs]
    assert times == sorted(times)


def test_perf_script_times_drop_idle():
    text = heat_text()
    hs = sample_headers(text)
    assert len(sample_times(text)) == sum(1 for h in hs if not h.idle)
    assert len(sample_times(text, include_idle=True)) == len(hs)


def test_perf_script_comm_with_spaces_and_no_cpu():
    line = "Web Content  4242/4243 12.500000:     250000 cpu-clock:ppp: \n\tffff foo ([kernel.kallsyms])\n"
    (h,) = sample_headers(line)
    assert (h.comm, h.pid, h.tid, h.cpu, h.time, h.period, h.event) == ("Web Content", 4242, 4243, None, 12.5, 250000,
                                                                         "cpu-clock:ppp")


def test_perf_script_rejects_other_text():
    with pytest.raises(ParseError):
        sample_headers("# ========\n# captured on: nothing\n\tffff foo\n")


# ---- heat map ----------------------------------------------------------------------------

def test_heatmap_bins_every_sample_flamescope_style():
    times = sample_times(heat_text())
    hm = heatmap.bin_times(times, rows=50)
    assert hm.total == len(times) == sum(map(sum, hm.counts))
    assert hm.origin == math.floor(min(times)) and hm.cols == math.floor(max(times)) - hm.origin + 1
    t = times[len(times) // 2]
    col, row = math.floor(t - hm.origin), math.floor(50 * (t % 1))
    assert hm.counts[col][row] >= 1


def test_heatmap_finds_the_burst_in_the_fixture():
    """The fixture was recorded while burst ran 200 ms at 400 ms of each second, with
    about one CPU of other load on the machine: the hottest slice (summed over the
    seconds) and the selected range lie in burst's window, although the single hottest
    cell of this recording does not (it is other load, before the first burst)."""
    burst = json_line(HEAT_BURST.read_text(), "burst")
    starts = [(a % 1) * 1000 for a, _ in burst["bursts"]]
    ends = [(b % 1) * 1000 for _, b in burst["bursts"]]
    hm = heatmap.bin_times(sample_times(heat_text()), rows=25)
    s = heatmap.summary(hm)
    assert min(starts) - 40 <= s["hottest_slice"]["center_ms"] <= max(ends) + 40
    r = s["range"]
    assert min(starts) - 40 <= r["start_ms"] < r["end_ms"] <= max(ends) + 40
    # and the selected range's second is one in which burst ran
    assert any(math.floor(a) == hm.origin + r["col"] for a, _ in burst["bursts"])
    cell_ms = s["hottest_cell"]["offset_ms"]
    assert not min(starts) <= cell_ms < max(ends), "fixture changed: its hottest cell used to be outside the burst"


def test_heatmap_svg_renders(tmp_path):
    hm = heatmap.bin_times(sample_times(heat_text()), rows=50)
    s = heatmap.summary(hm)
    r = s["range"]
    svg = heatmap.heatmap_svg(hm, "fixture", (r["col"], r["row_lo"], r["row_hi"]), (400, 600))
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg") and root.get("width") and root.get("height")
    assert "offset within the second" in svg and "fixture" in svg
    # same input, same bytes (stable ids: the committed reference SVGs do not churn)
    assert svg == heatmap.heatmap_svg(hm, "fixture", (r["col"], r["row_lo"], r["row_hi"]), (400, 600))


def test_heatmap_cli(tmp_path, capsys):
    script = tmp_path / "heat.script"
    script.write_text(heat_text())
    rc = heatmap.main(["--perf-script", str(script), "--svg", str(tmp_path / "h.svg"), "--json", str(tmp_path / "h.json"),
                       "--band", "400,600"])
    assert rc == 0
    start, end = (float(x) for x in capsys.readouterr().out.splitlines()[0].split(","))
    data = json.loads((tmp_path / "h.json").read_text())
    assert (start, end) == (pytest.approx(data["range"]["start"]), pytest.approx(data["range"]["end"]))
    assert 0 < end - start <= 1.0
    assert sum(map(sum, data["counts"])) == data["total"]


def test_heatmap_cli_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.write_text("")
    assert heatmap.main(["--perf-script", str(empty), "--svg", str(tmp_path / "x.svg")]) == 1
    assert "no perf script sample" in capsys.readouterr().err
    assert not (tmp_path / "x.svg").exists()
    with pytest.raises(SystemExit) as exc:
        heatmap.main(["--perf-script", str(empty), "--svg", str(tmp_path / "x.svg"), "--band", "x"])
    assert exc.value.code == 2


def test_burst_range_ignores_a_busy_background():
    # a column where one CPU is busy all second (20 per slice) and a burst doubles it
    hm = heatmap.Heatmap(origin=0, rows=10, counts=[[20, 20, 20, 20, 40, 40, 20, 20, 20, 20]], total=240)
    assert heatmap.burst_range(hm, 0, 4) == (4, 5)
    quiet = heatmap.Heatmap(origin=0, rows=10, counts=[[0, 1, 0, 0, 18, 20, 19, 2, 0, 0]], total=60)
    assert heatmap.hottest(quiet) == (0, 5, 20)
    assert heatmap.burst_range(quiet, 0, 5) == (4, 6)


def test_bin_times_rejects_empty():
    with pytest.raises(ValueError):
        heatmap.bin_times([])
