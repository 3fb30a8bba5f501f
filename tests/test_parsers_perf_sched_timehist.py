"""labkit.parsers.perf_sched_timehist on the lab's own kind of output: ``perf sched timehist
--state`` of the wakeup group's runs (tests/fixtures/perf/lat_tcp-sched-timehist.*.txt.gz,
captured with the commands in lat_tcp-sched-timehist.cmd), and on rows written here to pin the
rule that tells a wake-up from a preemption."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from labkit.parsers import perf_sched_timehist as th
from labkit.parsers.jsonline import ParseError

FIX = Path(__file__).parent / "fixtures" / "perf"


def text(pin: str) -> str:
    return gzip.decompress((FIX / f"lat_tcp-sched-timehist.{pin}.txt.gz").read_bytes()).decode()


@pytest.mark.parametrize("pin", ["same", "other"])
def test_every_row_but_the_idle_tasks_is_read(pin):
    t = text(pin)
    rows = th.switches(t)
    lines = [ln for ln in t.splitlines() if re.match(r"^\s*\d+\.\d+ \[\d+\]", ln)]
    assert len(rows) == len(lines) - sum("<idle>" in ln for ln in lines)
    assert all(r.state for r in rows)
    assert [r.time for r in rows] == sorted(r.time for r in rows)


@pytest.mark.parametrize("pin", ["same", "other"])
def test_the_lat_tcp_threads_wake_ups_are_nearly_all_their_sleeps(pin):
    """A 10 ms ping-pong: three lat_tcp threads (the server, its connection child, the client);
    every sleep but each thread's last ends in a counted wake-up."""
    rows = th.switches(text(pin))
    d = th.wakeup_delays(rows, "lat_tcp")
    mine = [r for r in rows if r.comm == "lat_tcp"]
    sleeps = sum(r.state in th.ASLEEP for r in mine)
    assert d["threads"] == len({r.tid for r in mine}) == 3
    assert sleeps - d["threads"] <= d["wakeups"] <= sleeps
    assert d["wakeups"] > 1000
    assert d["preempted"] == sum(r.state == "R" for r in mine)
    assert 0 <= d["p50_us"] <= d["p99_us"] <= d["max_us"] and d["mean_us"] <= d["max_us"]
    assert th.wakeup_delays(rows, "no-such-command") == {
        "comm": "no-such-command", "threads": 0, "wakeups": 0, "preempted": 0, "mean_us": None, "p50_us": None, "p99_us": None,
        "max_us": None}


# Rows written for the rule (not measured): thread 7 sleeps, is woken (12 µs to run), is
# preempted (R), runs again without a wake-up, sleeps, is woken (3 µs). Thread 8's first row
# has no known state before it.
RULE = """\
           time    cpu  task name                       wait time  sch delay   run time  state
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------  -----
     100.000010 [0000]  demo[7]                             0.000      0.000      0.010      S
     100.000100 [0000]  demo[8/7]                           0.000      0.050      0.010      S
     100.000200 [0000]  demo[7]                             0.080      0.012      0.010      R
     100.000300 [0001]  <idle>                              0.000      0.000      0.100      I
     100.000400 [0000]  demo[7]                             0.190      0.000      0.010      S
     100.000500 [0000]  demo[7]                             0.090      0.003      0.010      S
"""


def test_only_runs_after_a_sleep_are_wake_ups():
    d = th.wakeup_delays(th.switches(RULE), "demo")
    assert (d["threads"], d["wakeups"], d["preempted"], d["max_us"], d["mean_us"]) == (2, 2, 1, 12.0, 7.5)


def test_rows_without_state_cannot_tell_a_wake_up_from_a_preemption():
    bare = re.sub(r"\s+[A-Z]\s*$", "", text("other"), flags=re.M)
    with pytest.raises(ValueError, match="--state"):
        th.wakeup_delays(th.switches(bare), "lat_tcp")


def test_text_without_rows_is_an_error():
    with pytest.raises(ParseError):
        th.switches("Samples do not have callchains.\n")


def test_the_module_prints_one_json_line(tmp_path, capsys):
    f = tmp_path / "rows.txt"
    f.write_text(text("same"))
    assert th.main(["--comm", "lat_tcp", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"tool": th.TOOL, **th.wakeup_delays(th.switches(text("same")), "lat_tcp")}
    (tmp_path / "empty.txt").write_text("")
    assert th.main(["--comm", "lat_tcp", str(tmp_path / "empty.txt")]) == 1
    assert capsys.readouterr().err.count("\n") == 1
