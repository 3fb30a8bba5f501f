"""``perf sched latency`` output: per task, how long it waited for a CPU after each wake-up.

Source: perf-sched(1) and ``tools/perf/builtin-sched.c`` of Linux (``latency_wakeup_event``,
``latency_switch_event``, ``output_lat_thread``): a ``sched_wakeup`` of a sleeping task
stamps its wake-up time, and the ``sched_switch`` that puts it on a CPU ends the delay; a
task's row has its run time, the number of those sched-ins ("Switches"), the average and the
largest delay. Threads with the same command name are merged into one row (``comm:(N)``, N
threads) unless perf ran with ``-p``; ``swapper`` (idle) has no row. A row looks like::

  lat_tcp:(3)           |   2305.413 ms |   138805 | avg:   0.007 ms | max:   2.104 ms | max start: 39629.560536 s | max end: 39629.562640 s
"""

from __future__ import annotations

import re
from typing import TypedDict

from .jsonline import ParseError

_ROW = re.compile(
    r"^\s+(?P<task>\S.*?)\s*\|\s*(?P<runtime>[\d.]+) ms\s*\|\s*(?P<switches>\d+)\s*\|\s*avg:\s*(?P<avg>[\d.]+) ms\s*"
    r"\|\s*max:\s*(?P<max>[\d.]+) ms")
_TASK = re.compile(r"^(?P<comm>.*?):(?:\((?P<merged>\d+)\)|(?P<tid>\d+))$")


class TaskLatency(TypedDict):
    """One row: ``comm``; ``threads`` merged into it (1 for a row of one ``tid``); ``tid`` or
    None for a merged row; ``runtime_ms``; ``switches`` (sched-ins counted); ``avg_delay_us``
    and ``max_delay_us``, from wake-up to running."""

    comm: str
    threads: int
    tid: int | None
    runtime_ms: float
    switches: int
    avg_delay_us: float
    max_delay_us: float


def sched_latency(text: str) -> list[TaskLatency]:
    """Every task row of ``perf sched latency`` text, in its order.

    Raises:
        ParseError: no task row at all (an empty recording, or not ``perf sched latency`` output).
    """
    rows: list[TaskLatency] = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        t = _TASK.match(m["task"])
        if not t:
            continue
        rows.append({"comm": t["comm"], "threads": int(t["merged"] or 1), "tid": int(t["tid"]) if t["tid"] else None,
                     "runtime_ms": float(m["runtime"]), "switches": int(m["switches"]),
                     "avg_delay_us": float(m["avg"]) * 1000, "max_delay_us": float(m["max"]) * 1000})
    if not rows:
        raise ParseError("no task row of perf sched latency")
    return rows
