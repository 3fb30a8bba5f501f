"""labkit parsers on real captured tool outputs (tests/fixtures/<tool>/, each with its .cmd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.parsers.jsonline import ParseError, json_line, json_lines
from labkit.parsers.perf import folded_samples, perf_stat_csv, share_under
from labkit.parsers.sockperf import sockperf_pingpong
from labkit.parsers.strace import strace_summary

FIX = Path(__file__).parent / "fixtures"


def test_every_fixture_has_its_command():
    """Each captured file has a .cmd beside it whose name starts its own (x.cmd covers x.txt, x.err.txt),
    or lies in a folder whose README.md says where its files come from (tests/fixtures/cpuinfo:
    util-linux's dumps; tests/fixtures/original: quotes of a seed, not tool output)."""
    for f in FIX.rglob("*"):
        if f.is_file() and f.suffix not in (".cmd", ".md"):
            cmds = [c.name[:-4] for c in f.parent.glob("*.cmd")]
            documented = any((d / "README.md").is_file() for d in f.parents if d == FIX or FIX in d.parents)
            assert documented or any(f.name.startswith(c + ".") for c in cmds), f"{f} has no .cmd"


def test_strace_summary_dd():
    text = (FIX / "strace" / "dd-1k.txt").read_text()
    s = strace_summary(text)
    # the command copied 20000 blocks: dd reads and writes each once (plus its own setup calls)
    assert s["syscalls"]["read"]["calls"] >= 20000
    assert s["syscalls"]["write"]["calls"] >= 20000
    assert s["total"]["calls"] == sum(r["calls"] for r in s["syscalls"].values())
    assert s["total"]["errors"] == sum(r["errors"] for r in s["syscalls"].values())
    assert abs(sum(r["pct_time"] for r in s["syscalls"].values()) - 100) < 0.5


def test_strace_summary_rejects_other_text():
    with pytest.raises(ParseError):
        strace_summary("dd: 20000+0 records in\n")


def test_sockperf_pingpong():
    text = (FIX / "sockperf" / "ping-pong-tcp-m14.out").read_text()
    s = sockperf_pingpong(text)
    assert s["half_rtt"] is True  # no --full-rtt in the .cmd
    assert "--full-rtt" not in (FIX / "sockperf" / "ping-pong-tcp-m14.cmd").read_text()
    assert s["min_us"] <= s["percentiles"][50.0] <= s["max_us"]
    ps = [s["percentiles"][p] for p in sorted(s["percentiles"])]
    assert ps == sorted(ps), "percentiles must be non-decreasing"
    assert s["observations"] > 0 and s["avg_us"] > 0


def test_sockperf_without_summary_is_an_error():
    with pytest.raises(ParseError):
        sockperf_pingpong("sockperf: ERROR: connect() failed\n")


def test_perf_stat_csv_not_supported():
    ev = perf_stat_csv((FIX / "perf" / "stat-instructions-vm.txt").read_text())
    assert set(ev) == {"instructions", "cycles"}
    assert all(not e["supported"] and e["value"] is None for e in ev.values())


def test_json_line_requires_exactly_one():
    with pytest.raises(ParseError):
        json_line("TCP latency using 127.0.0.1: 1 microseconds\n", "lat_tcp")
    assert len(json_lines('{"tool": "x"}\n{"tool": "y"}\n')) == 2
    with pytest.raises(ParseError):
        json_line('{"tool": "x"}\n{"tool": "x"}\n', "x")


def test_folded_counts_and_share(tmp_path):
    folded = (FIX / "perf" / "lat_tcp-client.folded").read_text()
    n = folded_samples(folded)
    assert n > 0
    share = share_under(folded, ["tcp_sendmsg"])
    assert 0 < share < 1
    assert share_under(folded, ["no_such_function_here"]) == 0
