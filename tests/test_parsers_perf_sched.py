"""labkit.parsers.perf_sched on a real capture (tests/fixtures/perf/lat_tcp-sched-free.script.*)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from labkit.parsers.jsonline import ParseError
from labkit.parsers.perf_sched import cpu_at, cpu_timeline, same_cpu_time, sched_events

FIX = Path(__file__).parent / "fixtures" / "perf"


def _events():
    return sched_events(gzip.decompress((FIX / "lat_tcp-sched-free.script.gz").read_bytes()).decode())


def _pair(events):
    """The client (exec'd lat_tcp) and the server's connection child (forked after it)."""
    ex = next(e for e in events if e.event == "sched:sched_process_exec" and str(e.fields["filename"]).endswith("lat_tcp"))
    fork = next(e for e in events if e.event == "sched:sched_process_fork" and e.fields["child_comm"] == "lat_tcp"
                and e.time >= ex.time)
    return ex.fields["pid"], fork.fields["child_pid"]


def test_fields_of_each_event():
    ev = _events()
    kinds = {e.event for e in ev}
    assert {"sched:sched_switch", "sched:sched_migrate_task", "sched:sched_wakeup_new", "sched:sched_process_fork",
            "sched:sched_process_exec", "sched:sched_process_exit"} <= kinds
    sw = next(e for e in ev if e.event == "sched:sched_switch")
    assert {"prev_comm", "prev_pid", "prev_state", "next_comm", "next_pid"} <= set(sw.fields)
    assert "==>" not in str(sw.fields["prev_state"]) and isinstance(sw.fields["next_pid"], int)
    new = next(e for e in ev if e.event == "sched:sched_wakeup_new")
    assert isinstance(new.fields["target_cpu"], int)   # printed 001
    mig = next(e for e in ev if e.event == "sched:sched_migrate_task")
    assert isinstance(mig.fields["orig_cpu"], int) and isinstance(mig.fields["dest_cpu"], int)
    assert all(e.cpu in (0, 1) for e in ev)   # the capture's VM has 2 CPUs
    assert [e.time for e in ev] == sorted(e.time for e in ev)


def test_timeline_without_switches_matches_every_switch():
    """The module's method: exec, wakeup_new and migrate_task alone place each task of the pair
    on the CPU of every sched_switch that names it (the lab records no sched_switch)."""
    ev = _events()
    client, child = _pair(ev)
    quiet = [e for e in ev if e.event != "sched:sched_switch"]
    lines = {client: cpu_timeline(quiet, client), child: cpu_timeline(quiet, child)}
    assert len(lines[client]) > 1, "the fixture was kept because the client migrated"
    checked = 0
    for e in ev:
        if e.event != "sched:sched_switch":
            continue
        for tid in (client, child):
            if tid in (e.fields["prev_pid"], e.fields["next_pid"]):
                assert cpu_at(lines[tid], e.time) == e.cpu, (tid, e)
                checked += 1
    assert checked > 100


def test_same_cpu_time_share():
    ev = _events()
    client, child = _pair(ev)
    a, b = cpu_timeline(ev, client), cpu_timeline(ev, child)
    start = b[0][0]
    end = next(e.time for e in ev if e.event == "sched:sched_process_exit" and e.fields["pid"] == client)
    same = same_cpu_time(a, b, start, end)
    assert 0 < same < end - start   # the client left the child's CPU for a while in this capture
    # Hand-made timelines: a on 0 then 1 at t=2; b on 1 throughout; window [0, 4] -> 2 s the same.
    assert same_cpu_time([(0.0, 0), (2.0, 1)], [(0.0, 1)], 0.0, 4.0) == pytest.approx(2.0)
    assert same_cpu_time([(0.0, 0)], [(1.0, 0)], 0.0, 4.0) == pytest.approx(3.0)   # b unknown before 1
    assert same_cpu_time([(0.0, 0)], [(0.0, 0)], 1.0, 3.0) == pytest.approx(2.0)


def test_comm_with_spaces_and_no_events():
    line = ("     Web Content  812 [001]  10.000001: sched:sched_migrate_task: comm=Web Content pid=812 "
            "prio=120 orig_cpu=1 dest_cpu=0")
    (e,) = sched_events(line)
    assert e.comm == "Web Content" and e.fields["comm"] == "Web Content" and e.fields["dest_cpu"] == 0
    with pytest.raises(ParseError):
        sched_events("[ perf record: Woken up 1 times to write data ]\n")


def test_a_move_the_recording_lacks_is_placed_where_an_event_shows_the_task():
    """The lab's own capture in which the server's child runs on CPU 1 with no event that moved
    it there from CPU 0 (tests/fixtures/perf/lat_tcp-sched-missing-move.script.cmd): the first
    event fired in its context on CPU 1 places it there, and a later migration's orig_cpu agrees."""
    ev = sched_events((FIX / "lat_tcp-sched-missing-move.script.out").read_text())
    client, child = _pair(ev)
    new = next(e for e in ev if e.event == "sched:sched_wakeup_new" and e.fields["pid"] == child)
    shown = next(e for e in ev if e.tid == child and e.cpu != new.fields["target_cpu"])
    tl = cpu_timeline(ev, child)
    assert tl[0] == (new.time, new.fields["target_cpu"])
    assert (shown.time, shown.cpu) in tl
    assert cpu_at(tl, shown.time) == shown.cpu
    # From there to the client's exit the two are on different CPUs almost the whole time.
    end = next(e.time for e in ev if e.event == "sched:sched_process_exit" and e.fields["pid"] == client)
    share = same_cpu_time(cpu_timeline(ev, client), tl, tl[0][0], end) / (end - tl[0][0])
    assert share < 0.01
