"""labkit.parsers.perf_sched_latency on the lat_tcp lab's own ``perf sched latency`` outputs
(tests/fixtures/perf/lat_tcp-sched-latency-*.txt, with their .cmd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.parsers.jsonline import ParseError
from labkit.parsers.perf_sched_latency import sched_latency

FIX = Path(__file__).resolve().parent / "fixtures" / "perf"


@pytest.mark.parametrize("pin", ["same", "other"])
def test_every_task_row_is_read_with_its_units(pin):
    text = (FIX / f"lat_tcp-sched-latency-{pin}.txt").read_text()
    rows = sched_latency(text)
    body = [ln for ln in text.splitlines() if ln.count("|") >= 6 and "Task" not in ln and "TOTAL" not in ln]
    assert len(rows) == len(body)
    lat = [r for r in rows if r["comm"] == "lat_tcp"]
    # client, server and its connection child share the command name: one merged row
    assert len(lat) == 1 and lat[0]["threads"] == 3 and lat[0]["tid"] is None
    line = next(ln for ln in body if ln.lstrip().startswith("lat_tcp:(3)"))
    fields = [f.strip() for f in line.split("|")]
    assert lat[0]["runtime_ms"] == float(fields[1].split()[0])
    assert lat[0]["switches"] == int(fields[2])
    assert lat[0]["avg_delay_us"] == pytest.approx(1000 * float(fields[3].split()[1]))
    assert lat[0]["max_delay_us"] == pytest.approx(1000 * float(fields[4].split()[1]))
    assert lat[0]["max_delay_us"] >= lat[0]["avg_delay_us"] > 0
    one = [r for r in rows if r["tid"] is not None]       # a row of one thread: comm:tid
    assert one and all(r["threads"] == 1 for r in one)


def test_a_comm_with_a_colon_keeps_it():
    rows = sched_latency(next(ln for ln in (FIX / "lat_tcp-sched-latency-other.txt").read_text().splitlines()
                              if "memfd:" in ln) + "\n")
    assert rows[0]["comm"] == "memfd:sealed-91" and rows[0]["tid"] == 27953


def test_text_without_a_task_row_is_refused():
    with pytest.raises(ParseError):
        sched_latency("perf: no sched events\n")
