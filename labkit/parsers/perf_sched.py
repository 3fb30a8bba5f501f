"""``perf script`` output of scheduler tracepoints (``sched:*``): where tasks ran, over time.

Source: perf-script(1) and perf-record(1) of linux-perf 6.1 (``man perf-script``: for a
tracepoint the default fields are comm, tid, ``[cpu]`` (with ``-a``), time, event, then the
event's own fields as the kernel's format prints them), and the events' formats in
``/sys/kernel/tracing/events/sched/*/format``. A line looks like::

         lat_tcp 30697 [001]  4427.386533: sched:sched_process_exec: filename=./lat_tcp pid=30697 old_pid=30697
         lat_tcp 29892 [001]  4427.387278: sched:sched_process_fork: comm=lat_tcp pid=29892 child_comm=lat_tcp child_pid=30733
         lat_tcp 29892 [001]  4427.387283:   sched:sched_wakeup_new: comm=lat_tcp pid=30733 prio=120 target_cpu=001
     migration/0    18 [000]  4413.990069: sched:sched_migrate_task: comm=perf pid=29895 prio=120 orig_cpu=0 dest_cpu=1
         lat_tcp 31702 [001]  4441.748661: sched:sched_switch: prev_comm=lat_tcp prev_pid=31702 prev_prio=120 prev_state=S ==> next_comm=lat_tcp next_pid=31681 next_prio=120

The leading comm/tid/[cpu] are the task and CPU *in whose context* the event fired (a
migration is often done by another task, on another CPU); the fields say which task it is
about. A command name may contain spaces, in the leading column and in ``comm=`` fields.

Where a task is (:func:`cpu_timeline`): the CPU a task runs on, or last ran on and will run on
next, is ``task_cpu()``, what ``ps -o psr`` prints. The kernel changes it in
``set_task_cpu()``, which fires ``sched_migrate_task`` (orig_cpu → dest_cpu) whenever it is
called, for a wake-up placed on another CPU as for a load-balancing move; a new task gets its
first CPU without that event, and ``sched_wakeup_new`` says which (``target_cpu``); a task
that execs fires ``sched_process_exec`` on its CPU after exec balancing. So those events and
``sched_switch`` (the CPU a task is switched in or out on) give a task's CPU at every instant,
not at 50 ms snapshots.

A recording can still lack a move: one of our reference captures shows a server child running
on CPU 1 (an event fired in its context there, and its later ``sched_migrate_task`` says
``orig_cpu=1``) with no event that took it from CPU 0, where ``sched_wakeup_new`` had put it.
So every event that *shows* where a task is counts as well: one fired in the task's own context
(it runs on that CPU) and a migration's ``orig_cpu`` (where it was). A move the recording
lacks is then placed at the first event that shows the task on its new CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .jsonline import ParseError

_LINE = re.compile(
    r"^\s*(?P<comm>\S.*?)\s+(?P<tid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<time>\d+\.\d+):\s+"
    r"(?P<event>[\w-]+:[\w-]+):\s*(?P<fields>.*)$")
# key=value, the value running to the next " key=" (values may hold spaces: comm=Web Content)
_FIELD = re.compile(r"(\w+)=(.*?)(?=\s+\w+=|\s*$)")


@dataclass(frozen=True)
class SchedEvent:
    """One tracepoint hit: ``comm``/``tid``/``cpu`` of the context it fired in, ``time`` in
    seconds of perf's clock, ``event`` as perf names it (``sched:sched_switch``), ``fields``
    the event's own fields (strings; digits-only values as ints, ``target_cpu=001`` → 1)."""

    comm: str
    tid: int
    cpu: int
    time: float
    event: str
    fields: dict = field(hash=False, compare=False)


def _value(v: str):
    return int(v) if v.isdigit() else v


def sched_events(text: str) -> list[SchedEvent]:
    """Every tracepoint line of ``perf script`` text (default fields, recorded with ``-a``), in
    file order. Lines starting with ``#`` and blank lines are skipped; so are perf's own
    lines of other shapes (``[ perf record: ...]`` when stderr was mixed in).

    Raises:
        ParseError: no tracepoint line at all (an empty recording, or not perf script output).
    """
    out = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            continue
        raw = m["fields"].replace(" ==> ", " ")   # sched_switch: prev_* ==> next_*
        fields = {k: _value(v.strip()) for k, v in _FIELD.findall(raw)}
        out.append(SchedEvent(m["comm"].strip(), int(m["tid"]), int(m["cpu"]), float(m["time"]),
                              m["event"], fields))
    if not out:
        raise ParseError("no tracepoint line in perf script output")
    return out


def cpu_timeline(events: list[SchedEvent], tid: int) -> list[tuple[float, int]]:
    """``[(time, cpu), ...]``: from each time on, the CPU task ``tid`` is on or last ran on
    (``task_cpu()``; module docstring), one entry per event that sets or shows it:
    ``sched_process_exec`` of the task (its CPU), ``sched_wakeup_new`` (``target_cpu``),
    ``sched_migrate_task`` (``orig_cpu`` just before, ``dest_cpu`` from then on),
    ``sched_switch`` in or out (the CPU it fired on), and any event fired in the task's own
    context (the CPU it fired on: the task was running there). Entries that repeat the CPU
    already held are dropped. Empty when no event names ``tid``."""
    out: list[tuple[float, int]] = []

    def hold(t: float, cpu) -> None:
        if isinstance(cpu, int) and (not out or out[-1][1] != cpu):
            out.append((t, cpu))

    for e in events:
        f = e.fields
        if e.tid == tid:
            hold(e.time, e.cpu)
        if e.event == "sched:sched_process_exec" and f.get("pid") == tid:
            hold(e.time, e.cpu)
        elif e.event == "sched:sched_wakeup_new" and f.get("pid") == tid:
            hold(e.time, f.get("target_cpu"))
        elif e.event == "sched:sched_migrate_task" and f.get("pid") == tid:
            if out:   # before its first placement, orig_cpu says nothing the window needs
                hold(e.time, f.get("orig_cpu"))
            hold(e.time, f.get("dest_cpu"))
        elif e.event == "sched:sched_switch" and tid in (f.get("prev_pid"), f.get("next_pid")):
            hold(e.time, e.cpu)
    return out


def cpu_at(timeline: list[tuple[float, int]], t: float) -> int | None:
    """The CPU of a :func:`cpu_timeline` at time ``t`` (None before its first entry)."""
    cpu = None
    for when, c in timeline:
        if when > t:
            break
        cpu = c
    return cpu


def same_cpu_time(a: list[tuple[float, int]], b: list[tuple[float, int]], start: float, end: float) -> float:
    """Seconds within [start, end] during which timelines ``a`` and ``b`` (:func:`cpu_timeline`)
    hold the same CPU. Time before either has an entry counts as not the same."""
    changes = sorted([(t, 0, c) for t, c in a] + [(t, 1, c) for t, c in b])
    cur: list[int | None] = [None, None]
    same, last = 0.0, start
    for t, who, c in changes:
        if t > last:
            hi = min(t, end)
            if hi > last and cur[0] is not None and cur[0] == cur[1]:
                same += hi - last
            last = max(last, hi)
        cur[who] = c
    if end > last and cur[0] is not None and cur[0] == cur[1]:
        same += end - last
    return same
