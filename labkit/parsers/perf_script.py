"""``perf script`` output: the header line of each sample (who, where, when), for
time-based views such as FlameScope's subsecond-offset heat map.

A sample as the labs print it (perf-script(1) ``-F comm,tid[,cpu],time,period,event,ip,sym,
symoff,dso``, labs/lib/lab.sh ``LAB_PERF_STACKS`` and ``LAB_PERF_STACKS_ALL``: perf 6.1's
default fields for a ``perf record -g`` file, cpu with ``-a``) looks like::

    fio 23690 [001]  1339.923730:    1003009 cpu-clock:ppp:
    \tffffffff821c7bbd mas_wr_store_type+0xdd ([kernel.kallsyms])
    \t           20ca3 mmap64+0x13 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)

The header line starts in the first column (the command name may be padded with
spaces and may itself contain spaces); stack lines start with a tab. The time is in
seconds of perf's clock: ``perf_clock`` by default, the given clock with
``perf record -k CLOCK_MONOTONIC``. Stacks are left to inferno (``labkit flame``);
this module only reads headers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .jsonline import ParseError

# comm, pid[/tid], optional [cpu], time:, optional period, event:  (the rest of the line is ignored)
_HEADER = re.compile(
    r"^\s*(?P<comm>\S.*?)\s+(?P<pid>\d+)(?:/(?P<tid>\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?P<time>\d+\.\d+):\s+(?:(?P<period>\d+)\s+)?(?P<event>\S+?):(?:\s|$)")


@dataclass(frozen=True)
class SampleHeader:
    """One sample's header. ``time`` in seconds (float), ``period`` in the event's unit
    (ns of CPU time for ``cpu-clock``; None if perf did not print it), ``cpu`` None
    when the recording was not per-CPU, ``tid`` equal to ``pid`` when perf printed one id
    (that id is the thread id). ``idle`` is True for pid 0 (the per-CPU idle task,
    ``swapper``)."""

    comm: str
    pid: int
    tid: int
    cpu: int | None
    time: float
    period: int | None
    event: str

    @property
    def idle(self) -> bool:
        return self.pid == 0


def sample_headers(text: str) -> list[SampleHeader]:
    """Every sample header in ``perf script`` text, in file order.

    Lines starting with ``#`` (``perf script --header``) and stack lines (starting with a
    tab) are skipped.

    Raises:
        ParseError: no sample header at all (an empty recording, or not perf script output).
    """
    found = []
    for line in text.splitlines():
        if not line or line[0] in "#\t":
            continue
        m = _HEADER.match(line)
        if not m:
            continue
        ids = int(m["pid"]), int(m["tid"]) if m["tid"] else int(m["pid"])
        found.append(SampleHeader(
            comm=m["comm"].strip(), pid=ids[0], tid=ids[1],
            cpu=int(m["cpu"]) if m["cpu"] is not None else None,
            time=float(m["time"]), period=int(m["period"]) if m["period"] else None, event=m["event"]))
    if not found:
        raise ParseError("no perf script sample header lines")
    return found


def sample_times(text: str, *, include_idle: bool = False, event: str | None = None) -> list[float]:
    """Timestamps (s) of the samples in ``perf script`` text.

    ``include_idle=False`` drops samples of the idle task (pid 0), as FlameScope does for
    its heat map (it drops ``swapper`` stacks in idle functions): an idle CPU sampled by
    ``cpu-clock`` is not load. ``event`` keeps only samples of that event (e.g.
    ``"cpu-clock:ppp"``; a prefix before ``:`` also matches, so ``"cpu-clock"`` works).

    Raises:
        ParseError: as ``sample_headers``.
    """
    out = []
    for s in sample_headers(text):
        if s.idle and not include_idle:
            continue
        if event is not None and s.event != event and s.event.split(":")[0] != event:
            continue
        out.append(s.time)
    return out
