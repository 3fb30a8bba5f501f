"""CPU time from ``/proc/stat`` and ``/proc/<pid>/stat`` snapshots (proc(5)).

What ``htop`` draws in its CPU meters is the difference of two readings of
``/proc/stat``: each ``cpuN`` line holds the time that CPU spent in each mode since
boot, in clock ticks (``USER_HZ``, 100 per second on Linux)::

    cpu  2255 34 2290 22625563 6290 127 456 0 0 0
    cpu0 1132 34 1441 11311718 3675 127 438 0 0 0

The fields are user, nice, system, idle, iowait, irq, softirq, steal, guest,
guest_nice. ``guest`` and ``guest_nice`` are already counted in ``user`` and ``nice``
(proc(5)), so a CPU's elapsed ticks are the sum of the first eight deltas. A process's
own line in ``/proc/<pid>/stat`` holds its ``utime`` and ``stime`` (fields 14 and 15,
the same ticks) after the command name in parentheses, which may itself contain spaces
and parentheses.

A text with several snapshots, as printed by::

    sh -c 'cat /proc/stat /proc/PID/stat; sleep 1; cat /proc/stat /proc/PID/stat'

(or with ``grep '^cpu' /proc/stat`` for the CPU lines only) is split at each aggregate
``cpu`` line: every snapshot starts with one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .jsonline import ParseError

_CPU = re.compile(r"^(cpu\d*)\s+(\d+(?:\s+\d+)*)\s*$")
_PID = re.compile(r"^(\d+) \((.*)\) (\S) (.*)$")
MODES = ("user", "system", "iowait", "steal", "idle")


@dataclass(frozen=True)
class ProcTimes:
    """One process's line: ``comm``, ``state`` (R running, S sleeping, D disk wait, ...),
    ``utime`` and ``stime`` in clock ticks."""

    pid: int
    comm: str
    state: str
    utime: int
    stime: int


@dataclass
class Snapshot:
    """One reading: ``cpus`` maps "cpu" (all CPUs) and "cpu0", "cpu1", ... to their tick
    fields as printed; ``procs`` maps PID to :class:`ProcTimes`."""

    cpus: dict[str, list[int]] = field(default_factory=dict)
    procs: dict[int, ProcTimes] = field(default_factory=dict)


def snapshots(text: str) -> list[Snapshot]:
    """Split ``text`` (concatenated ``/proc/stat`` and ``/proc/<pid>/stat`` readings) into
    snapshots, in order. Other ``/proc/stat`` lines (intr, ctxt, btime, ...) are ignored.

    Raises:
        ParseError: no ``cpu`` line at all, or a process line before the first one.
    """
    snaps: list[Snapshot] = []
    for line in text.splitlines():
        m = _CPU.match(line)
        if m:
            if m.group(1) == "cpu":
                snaps.append(Snapshot())
            elif not snaps:
                raise ParseError(f"/proc/stat text starts with {m.group(1)}, not the aggregate cpu line")
            snaps[-1].cpus[m.group(1)] = [int(x) for x in m.group(2).split()]
            continue
        p = _PID.match(line)
        if p:
            if not snaps:
                raise ParseError("a /proc/<pid>/stat line before any /proc/stat snapshot")
            rest = p.group(4).split()
            # rest[0] is field 4 (ppid); utime and stime are fields 14 and 15.
            if len(rest) < 12:
                raise ParseError(f"short /proc/<pid>/stat line for pid {p.group(1)}")
            pid = int(p.group(1))
            snaps[-1].procs[pid] = ProcTimes(pid, p.group(2), p.group(3), int(rest[10]), int(rest[11]))
    if not snaps:
        raise ParseError("no /proc/stat snapshot (no aggregate 'cpu' line)")
    return snaps


def _modes(before: list[int], after: list[int]) -> tuple[dict[str, int], int]:
    d = [a - b for a, b in zip(after[:8], before[:8])] + [0] * (8 - min(len(before), len(after), 8))
    user, nice, system, idle, iowait, irq, softirq, steal = d[:8]
    ticks = {"user": user + nice, "system": system + irq + softirq, "iowait": iowait, "steal": steal, "idle": idle}
    return ticks, sum(d[:8])


def cpu_shares(before: Snapshot, after: Snapshot) -> dict[str, dict[str, float]]:
    """Per CPU ("cpu0", "cpu1", ...; the aggregate as "all"), the fraction of its elapsed
    ticks spent in each mode between two snapshots, as htop's CPU meters show it:

    ``user`` = user + nice, ``system`` = system + irq + softirq (htop's "kernel"),
    ``iowait``, ``steal`` (time a hypervisor gave to someone else), ``idle``. The five add
    up to 1. A CPU with no elapsed ticks (offline) is left out.

    Raises:
        ParseError: the two snapshots share no CPU line.
    """
    out = {}
    for name, b in before.cpus.items():
        a = after.cpus.get(name)
        if a is None:
            continue
        ticks, total = _modes(b, a)
        if total <= 0:
            continue
        out["all" if name == "cpu" else name] = {k: v / total for k, v in ticks.items()}
    if not out:
        raise ParseError("the two /proc/stat snapshots have no CPU line in common")
    return out


def elapsed_ticks(before: Snapshot, after: Snapshot) -> float:
    """Wall-clock ticks between two snapshots: the aggregate line's elapsed ticks divided by
    the number of per-CPU lines (every CPU's ticks advance with the clock).

    Raises:
        ParseError: no per-CPU lines.
    """
    ncpu = sum(1 for k in after.cpus if k != "cpu")
    if ncpu == 0 or "cpu" not in before.cpus or "cpu" not in after.cpus:
        raise ParseError("snapshots without per-CPU lines")
    _, total = _modes(before.cpus["cpu"], after.cpus["cpu"])
    return total / ncpu


def process_shares(before: Snapshot, after: Snapshot, pid: int) -> dict:
    """One process between two snapshots: ``{"user", "system"}`` as fractions of the wall
    time (so 1.0 is one CPU fully busy; a multi-threaded process can exceed 1),
    ``"cpu"`` (user + system), ``"comm"`` and the ``"states"`` seen (before, after).

    Raises:
        ParseError: the process is missing from either snapshot, or no time elapsed.
    """
    if pid not in before.procs or pid not in after.procs:
        raise ParseError(f"pid {pid} is not in both snapshots")
    wall = elapsed_ticks(before, after)
    if wall <= 0:
        raise ParseError("no time elapsed between the snapshots")
    b, a = before.procs[pid], after.procs[pid]
    user = (a.utime - b.utime) / wall
    system = (a.stime - b.stime) / wall
    return {"user": user, "system": system, "cpu": user + system, "comm": a.comm, "states": (b.state, a.state)}
