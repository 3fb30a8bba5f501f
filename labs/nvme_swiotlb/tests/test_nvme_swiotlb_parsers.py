"""Parsers used by the nvme_swiotlb lab, on real outputs captured on the development VM
(tests/fixtures/<tool>/*.cmd hold the commands), and the device-tree decoder on a tree
built here from the binding's cell layout."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.parsers.btt import btt_latencies, btt_summary
from labkit.parsers.dd import dd_summary
from labkit.parsers.ftrace import block_rq, io_cycle, sched_switch, trace_events
from labkit.parsers.jsonline import ParseError
from labkit.parsers.strace import strace_summary
from labkit.parsers.strace_t import log_histogram, strace_calls

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"


def fixture(rel: str) -> str:
    path = FIX / rel
    cmd = path.with_suffix(".cmd") if path.suffix != ".dat" else path.parent / (path.name.split(".")[0] + ".cmd")
    assert cmd.exists(), f"{rel} has no .cmd beside it"
    return path.read_text()


# ---------------------------------------------------------------- dd -----

def test_dd_direct_read_summary():
    text = fixture("dd/read-direct.txt")
    d = dd_summary(text)
    assert d["bytes"] == 64 * 2**20
    assert d["records_in"] == (64, 0) and d["records_out"] == (64, 0)
    # our rate is bytes/seconds, consistent with (not copied from) dd's rounded one
    assert d["mb_per_s"] == pytest.approx(d["bytes"] / d["seconds"] / 1e6)
    printed, unit = d["printed_rate"].split()
    scale = {"kB/s": 1e-3, "MB/s": 1, "GB/s": 1e3}[unit]
    assert d["mb_per_s"] == pytest.approx(float(printed) * scale, rel=0.06)


@pytest.mark.parametrize("name", ["read-buffered", "write-fsync", "partial"])
def test_dd_other_summaries_are_self_consistent(name):
    d = dd_summary(fixture(f"dd/{name}.txt"))
    assert d["seconds"] > 0 and d["bytes"] > 0
    printed, unit = d["printed_rate"].split()
    scale = {"kB/s": 1e-3, "MB/s": 1, "GB/s": 1e3}[unit]
    assert d["mb_per_s"] == pytest.approx(float(printed) * scale, rel=0.06)


def test_dd_partial_record_and_zero_bytes():
    assert dd_summary(fixture("dd/partial.txt"))["records_in"] == (0, 1)
    zero = dd_summary(fixture("dd/count-0.txt"))
    assert zero["bytes"] == 0 and zero["mb_per_s"] == 0.0


def test_dd_failure_has_no_summary():
    with pytest.raises(ParseError, match="failed to open"):
        dd_summary(fixture("dd/no-such-file.txt"))


def test_dd_decimal_comma_and_old_format():
    # The same fixture line as another locale and older coreutils would print it.
    line = fixture("dd/read-direct.txt").splitlines()[-1]
    comma = line.replace(".", ",")
    assert dd_summary(comma)["seconds"] == dd_summary(line)["seconds"]
    old = line.split(" (")[0] + " (" + line.split(" (")[1].split(",")[0] + ") copied," + line.split("copied,")[1]
    assert dd_summary(old)["bytes"] == dd_summary(line)["bytes"]


# ---------------------------------------------------------------- btt ----

def test_btt_summary_all_devices_and_overhead():
    s = btt_summary(fixture("btt/loop-direct-512k.txt"))
    assert set(s["all"]) >= {"Q2Q", "D2C", "Q2C"}
    for row in s["all"].values():
        assert row["min"] <= row["avg"] <= row["max"]
    assert s["all"]["D2C"]["n"] == s["all"]["Q2C"]["n"] == 256   # 256 reads in the .cmd
    assert s["all"]["D2C"]["avg"] <= s["all"]["Q2C"]["avg"]      # D2C is part of Q2C
    (dev, shares), = s["overhead"].items()
    assert dev == "7,1"
    assert sum(shares.values()) == pytest.approx(100, abs=1.5)


def test_btt_latency_files_agree_with_the_table():
    s = btt_summary(fixture("btt/loop-direct-512k.txt"))
    for phase, name in (("D2C", "d2c"), ("Q2C", "q2c")):
        lat = [x[1] for x in btt_latencies(fixture(f"btt/loop-direct-512k.{name}.dat"))]
        row = s["all"][phase]
        assert len(lat) == row["n"]
        assert statistics.fmean(lat) == pytest.approx(row["avg"], rel=0.01)   # .dat rounds to µs
        assert min(lat) == pytest.approx(row["min"], abs=1e-6)
        assert max(lat) == pytest.approx(row["max"], abs=1e-6)


def test_btt_split_requests_have_no_d2c():
    s = btt_summary(fixture("btt/loop-direct-1m-split.txt"))
    assert "Q2Q" in s["all"]
    assert "D2C" not in s["all"] and "Q2C" not in s["all"]


def test_btt_rejects_other_text():
    with pytest.raises(ParseError):
        btt_summary(fixture("dd/read-direct.txt"))
    with pytest.raises(ParseError):
        btt_latencies("0.1 0.2 0.3\n")


# ---------------------------------------------------------------- ftrace --

def test_trace_events_parse_every_line():
    text = fixture("ftrace/instance-block-sched.txt")
    ev = trace_events(text)
    body_lines = [l for l in text.splitlines() if l.strip() and not l.startswith("#")]
    assert len(ev) == len(body_lines)
    assert {e["event"] for e in ev} == {"block_rq_issue", "block_rq_complete", "sched_switch"}
    assert any(" " in e["task"] for e in ev)    # task names with spaces ("lto cgu.10") survive
    assert all(ev[i]["ts"] <= ev[i + 1]["ts"] for i in range(len(ev) - 1))


def test_block_and_sched_fields():
    ev = trace_events(fixture("ftrace/instance-block-sched.txt"))
    issue = block_rq(next(e for e in ev if e["event"] == "block_rq_issue")["body"])
    assert issue["dev"] == "7,1" and issue["rwbs"] == "RS" and issue["bytes"] == 512 * 1024
    assert issue["nr_sector"] * 512 == issue["bytes"] and issue["last"] == "dd"
    comp = block_rq(next(e for e in ev if e["event"] == "block_rq_complete")["body"])
    assert comp["bytes"] is None and comp["last"] == "0"
    sw = sched_switch(next(e for e in ev if e["event"] == "sched_switch")["body"])
    assert isinstance(sw["prev_pid"], int) and sw["prev_comm"] == "dd"
    with pytest.raises(ParseError):
        block_rq("prev_comm=dd prev_pid=1")


def test_io_cycle_phases():
    ev = trace_events(fixture("ftrace/instance-block-sched.txt"))
    (pid,) = {e["pid"] for e in ev if e["event"] == "block_rq_issue"}
    c = io_cycle(ev, pid, "7,1")
    assert c["requests"] == 32 == len(c["service"])             # count=32 in the .cmd
    assert len(c["wakeup"]) == 32 and len(c["user"]) == 31       # no issue after the last wakeup
    assert all(x > 0 for k in ("service", "wakeup", "user") for x in c[k])
    # the three phases tile the time between the first issue and the last wakeup
    issues = [e["ts"] for e in ev if e["event"] == "block_rq_issue"]
    total = sum(c["service"]) + sum(c["wakeup"]) + sum(c["user"])
    last_wake = max(e["ts"] for e in ev if e["event"] == "sched_switch" and sched_switch(e["body"])["next_pid"] == pid)
    assert total == pytest.approx(last_wake - issues[0], rel=1e-6)
    assert io_cycle(ev, pid, "8,0")["requests"] == 0             # another device: nothing


def test_trace_events_rejects_non_trace():
    with pytest.raises(ParseError):
        trace_events("hello\nworld\n")
    assert trace_events("# tracer: nop\n#\n") == []


# ---------------------------------------------------------------- strace --

def test_strace_T_reads():
    calls = strace_calls(fixture("strace/dd-direct-T.txt"), "read")
    data = [c for c in calls if c["first_arg"] == "0" and c["ret"] > 0]
    assert len(data) == 64 and all(c["ret"] == 2**20 for c in data)
    assert calls[-1]["ret"] == 0                                 # EOF read
    hist = log_histogram([c["seconds"] * 1e6 for c in data], per_octave=4)
    assert sum(n for _, n in hist) == 64
    edges = [e for e, _ in hist]
    assert edges == sorted(edges) and hist[0][1] > 0 and hist[-1][1] > 0
    with pytest.raises(ParseError):
        strace_calls(fixture("strace/dd-direct-cw.txt"))          # a -c table is not -T output


def test_strace_cw_accounts_for_dd_elapsed():
    """The method of the calls-times-time-per-call claim, on one real capture."""
    summ = strace_summary(fixture("strace/dd-direct-cw.txt"))
    read = summ["syscalls"]["read"]
    dd = dd_summary((FIX / "strace" / "dd-direct-cw.dd-stderr.txt").read_text())
    assert read["calls"] == 66                                   # 64 data + loader + EOF
    assert read["calls"] * read["usecs_per_call"] / 1e6 == pytest.approx(read["seconds"], rel=0.01)
    assert 1 / 1.3 < read["seconds"] / dd["seconds"] < 1.3


# ---------------------------------------------------------------- device tree --

def _prop(d: Path, name: str, *cells_: int, raw: bytes | None = None):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(raw if raw is not None else b"".join(c.to_bytes(4, "big") for c in cells_))


def test_dt_dma_ranges_decodes_pci_windows(tmp_path):
    """A tree laid out as the devicetree PCI binding says (3 child cells, parent #address-cells 2,
    #size-cells 2): one 3 GiB window at CPU address 0, and 8 GiB of RAM from 0."""
    root = tmp_path / "dt"
    _prop(root, "#address-cells", 2)
    _prop(root, "#size-cells", 2)
    _prop(root / "memory@0", "device_type", raw=b"memory\0")
    _prop(root / "memory@0", "reg", 0, 0, 2, 0)                    # base 0, size 0x2_0000_0000
    pcie = root / "soc" / "pcie@1000"
    _prop(root / "soc", "#address-cells", 2)
    _prop(pcie, "device_type", raw=b"pci\0")
    _prop(pcie, "compatible", raw=b"vendor,pcie\0")
    _prop(pcie, "#size-cells", 2)
    _prop(pcie, "dma-ranges", 0x02000000, 0, 0, 0, 0, 0, 0xC0000000)
    out = subprocess.run([sys.executable, str(ROOT / "labs" / "nvme_swiotlb" / "dt_dma_ranges.py"), "--root", str(root)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    (node,) = r["nodes"]
    assert node["path"] == "/soc/pcie@1000" and node["device_type"] == "pci"
    assert node["windows"] == [{"child_addr": 0, "cpu_addr": 0, "size": 0xC0000000, "space": "mem32", "prefetchable": False}]
    assert r["ram_bytes"] == 8 * 2**30
    assert r["ram_outside_pci_windows"] == 8 * 2**30 - 3 * 2**30
    assert "RAM outside the PCI DMA windows" in out.stderr


def test_dt_dma_ranges_empty_property_means_no_limit(tmp_path):
    root = tmp_path / "dt"
    _prop(root, "#address-cells", 2)
    _prop(root / "memory@0", "reg", 0, 0, 0, 0x40000000)
    _prop(root / "pcie@0", "device_type", raw=b"pci\0")
    _prop(root / "pcie@0", "dma-ranges", raw=b"")
    r = json.loads(subprocess.run([sys.executable, str(ROOT / "labs" / "nvme_swiotlb" / "dt_dma_ranges.py"),
                                   "--root", str(root)], capture_output=True, text=True).stdout)
    assert r["nodes"][0]["empty"] is True and r["ram_outside_pci_windows"] == 0


def test_dt_dma_ranges_without_tree_and_bad_usage(tmp_path):
    script = str(ROOT / "labs" / "nvme_swiotlb" / "dt_dma_ranges.py")
    p = subprocess.run([sys.executable, script, "--root", str(tmp_path / "none")], capture_output=True, text=True)
    assert p.returncode == 1 and p.stdout == "" and "no device tree" in p.stderr
    assert subprocess.run([sys.executable, script, "--bogus"], capture_output=True, text=True).returncode == 2
