"""``perf sched timehist --state`` output: one row per context switch, and from those rows the
wait from each wake-up to running, per command.

Source: perf-sched(1) and ``tools/perf/builtin-sched.c`` of Linux (``timehist_sched_change_event``,
``timehist_update_runtime_stats``; the command's introduction, commit 49394a2a24c7 by David
Ahern, 2016). A row is printed when a task is switched *out*; it describes the run that just
ended: the task's wait before that run ("wait time"), its scheduling delay ("sch delay": from
the ``sched_wakeup`` that made it runnable to the ``sched_switch`` that ran it, zero when no
wake-up preceded the run) and the run's length ("run time"), in milliseconds with three decimals
(a microsecond's resolution); with ``--state``, the state the task was left in (``S`` asleep,
``D`` uninterruptible, ``R`` still runnable: preempted, ``I`` the idle task). A row looks like::

   50732.830511 [0000]  lat_tcp[28949]                      0.000      1.889      0.263      S

So the run that a row describes began with a wake-up exactly when the same thread's previous
row left it asleep (``S`` or ``D``); after an ``R`` row the thread was preempted and ran again
without one, and its "sch delay" is zero by construction. :func:`wakeup_delays` counts only the
former. (``perf sched latency`` reports the same delay per task, but on a cross-CPU ping-pong
it keeps a handful of the wake-ups and reports most switches as "context switch bugs": 55 of
about 18,000 in a run of this lab's wakeup group, so the lab does not use it.)

Run as ``python -m labkit.parsers.perf_sched_timehist --comm lat_tcp FILE``: one JSON line,
:func:`wakeup_delays` of FILE's rows.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from .jsonline import ParseError

_ROW = re.compile(
    r"^\s*(?P<time>\d+\.\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<task>\S.*?)\[(?P<tid>\d+)(?:/(?P<pid>\d+))?\]\s+"
    r"(?P<wait>\d+\.\d+)\s+(?P<delay>\d+\.\d+)\s+(?P<run>\d+\.\d+)(?:\s+(?P<state>[A-Z+]+))?\s*$")
TOOL = "perf-sched-timehist"
"""The ``tool`` of the JSON line :func:`main` prints."""
ASLEEP = ("S", "D")
"""States after which the thread's next run begins with a wake-up."""


@dataclass(frozen=True)
class Switch:
    """One row: ``time`` (s, perf's clock), ``cpu``, ``comm``, ``tid``, ``pid`` (``tid`` for a
    single-threaded process), ``wait_ms``, ``sch_delay_ms``, ``run_ms``, ``state`` ("" without
    ``--state``)."""

    time: float
    cpu: int
    comm: str
    tid: int
    pid: int
    wait_ms: float
    sch_delay_ms: float
    run_ms: float
    state: str


def switches(text: str) -> list[Switch]:
    """Every row of ``perf sched timehist`` text, in its order (the header, the idle task's
    ``<idle>`` rows and any summary are skipped).

    Raises:
        ParseError: no row at all (an empty recording, or not timehist output).
    """
    out = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        tid = int(m["tid"])
        out.append(Switch(float(m["time"]), int(m["cpu"]), m["task"], tid, int(m["pid"] or tid),
                          float(m["wait"]), float(m["delay"]), float(m["run"]), m["state"] or ""))
    if not out:
        raise ParseError("no perf sched timehist row (is this `perf sched timehist` output?)")
    return out


def wakeup_delays(rows: list[Switch], comm: str) -> dict:
    """The scheduling delays of the runs of ``comm``'s threads that began with a wake-up (the
    thread's previous row left it in ``S`` or ``D``; a thread's first row is not counted, its
    state before is unknown), all threads together.

    Returns ``{"comm", "threads", "wakeups", "preempted", "mean_us", "p50_us", "p99_us",
    "max_us"}``: the number of threads seen, of wake-ups counted and of runs that ended with the
    thread preempted (left in ``R``: runnable, not asleep), and the delays' mean, median, 99th
    percentile (``statistics.quantiles`` with ``method="inclusive"``) and largest, in µs
    (perf prints ms with three decimals: whole µs). The statistics are None when no wake-up was
    counted.

    Raises:
        ValueError: the rows have no ``--state`` column, without which a wake-up cannot be told
        from a preemption.
    """
    if any(r.state == "" for r in rows):
        raise ValueError("perf sched timehist ran without --state: a wake-up cannot be told from a preemption")
    last: dict[int, str] = {}
    delays: list[float] = []
    preempted = 0
    for r in rows:
        if r.comm != comm:
            continue
        if last.get(r.tid) in ASLEEP:
            delays.append(round(r.sch_delay_ms * 1000, 3))
        preempted += r.state == "R"
        last[r.tid] = r.state
    out = {"comm": comm, "threads": len(last), "wakeups": len(delays), "preempted": preempted,
           "mean_us": None, "p50_us": None, "p99_us": None, "max_us": None}
    if delays:
        q = statistics.quantiles(delays, n=100, method="inclusive") if len(delays) > 1 else [delays[0]] * 99
        out.update(mean_us=round(statistics.fmean(delays), 3), p50_us=q[49], p99_us=q[98], max_us=max(delays))
    return out


def main(argv: list[str] | None = None) -> int:
    """``--comm COMM FILE``: print :func:`wakeup_delays` of FILE's rows as one JSON line, with
    ``"tool": "perf-sched-timehist"``. Exit
    status 1 with one line on stderr when FILE has no row or no ``--state`` column, 2 on bad
    usage (argparse)."""
    p = argparse.ArgumentParser(prog="python -m labkit.parsers.perf_sched_timehist",
                                description="Wake-up to run delays of one command's threads, from "
                                            "`perf sched timehist --state` output: one JSON line.")
    p.add_argument("--comm", required=True, help="the command name (as perf prints it, before [tid])")
    p.add_argument("file", type=Path, help="perf sched timehist --state output")
    a = p.parse_args(argv)
    try:
        print(json.dumps({"tool": TOOL, **wakeup_delays(switches(a.file.read_text(errors="replace")), a.comm)}))
    except (OSError, ParseError, ValueError) as e:
        print(f"perf_sched_timehist: {a.file}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
