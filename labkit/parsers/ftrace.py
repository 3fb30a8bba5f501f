"""ftrace text output (``/sys/kernel/tracing[/instances/NAME]/trace``) of trace events.

Each event line has the default ftrace prefix (Documentation/trace/ftrace.rst,
"Output format")::

              dd-736     [001] d..2.  1725.340173: sched_switch: prev_comm=dd prev_pid=736 ...
      lto cgu.10-734     [001] ..s..  1725.340932: block_rq_complete: 7,1 RS () 0 + 1024 be,0,4 [0]

TASK-PID (a task name may contain spaces), [CPU], the irq/preempt flags, the
timestamp in seconds, the event name and the event's own text (its ``print fmt``
in ``events/<system>/<event>/format``). Lines starting with ``#`` are headers.

The block events' text (include/trace/events/block.h)::

    block_rq_issue:    MAJ,MIN RWBS BYTES (CMD) SECTOR + NR_SECTORS IOPRIO [COMM]
    block_rq_complete: MAJ,MIN RWBS (CMD) SECTOR + NR_SECTORS IOPRIO [ERROR]

(kernels before 6.x print no IOPRIO field; both forms are accepted).
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_LINE = re.compile(
    r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+(?:\(\s*[\d-]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:(?P<flags>[^\s]{4,6})\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?P<event>\w+):\s?(?P<body>.*)$")
_RQ = re.compile(
    r"^(?P<maj>\d+),(?P<min>\d+)\s+(?P<rwbs>\S+)\s+(?:(?P<bytes>\d+)\s+)?\((?P<cmd>[^)]*)\)\s+"
    r"(?P<sector>\d+)\s+\+\s+(?P<nr>\d+)(?:\s+\S+)?\s+\[(?P<last>[^\]]*)\]\s*$")
_KV = re.compile(r"(\w+)=(.*?)(?=\s+\w+=|\s+==>|$)")


def trace_events(text: str) -> list[dict]:
    """Every event line of an ftrace text trace, in file order.

    Returns dicts ``{"task", "pid", "cpu", "flags", "ts" (seconds), "event", "body"}``.

    Raises:
        ParseError: the text has no event line at all and no ftrace header either
            (not a trace file). A trace with a header and no events returns [].
    """
    events = []
    header = False
    for line in text.splitlines():
        if line.startswith("#"):
            header = True
            continue
        m = _LINE.match(line)
        if m:
            events.append({"task": m["task"].strip(), "pid": int(m["pid"]), "cpu": int(m["cpu"]),
                           "flags": m["flags"] or "", "ts": float(m["ts"]), "event": m["event"],
                           "body": m["body"]})
    if not events and not header:
        raise ParseError("no ftrace event lines and no '# tracer:' header: not an ftrace text trace")
    return events


def block_rq(body: str) -> dict:
    """Fields of a block_rq_issue / block_rq_complete / block_rq_insert event text.

    Returns ``{"dev": "MAJ,MIN", "rwbs", "bytes" (issue only, else None), "sector",
    "nr_sector", "last"}`` (``last`` is the comm for issue, the error for complete).

    Raises:
        ParseError: the text does not have the block request shape.
    """
    m = _RQ.match(body.strip())
    if not m:
        raise ParseError(f"not a block request event: {body!r}")
    return {"dev": f"{m['maj']},{m['min']}", "rwbs": m["rwbs"], "bytes": int(m["bytes"]) if m["bytes"] else None,
            "sector": int(m["sector"]), "nr_sector": int(m["nr"]), "last": m["last"]}


def sched_switch(body: str) -> dict:
    """Fields of a sched_switch event text: prev_comm, prev_pid (int), prev_prio,
    prev_state, next_comm, next_pid (int), next_prio."""
    left, sep, right = body.partition(" ==> ")
    if not sep:
        raise ParseError(f"not a sched_switch event: {body!r}")
    out: dict = {}
    for part in (left, right):
        for k, v in _KV.findall(part):
            out[k] = v.strip()
    for k in ("prev_pid", "next_pid", "prev_prio", "next_prio"):
        if k in out:
            out[k] = int(out[k])
    if "prev_pid" not in out or "next_pid" not in out:
        raise ParseError(f"sched_switch without pids: {body!r}")
    return out


def io_cycle(events: list[dict], pid: int, dev: str | None = None) -> dict:
    """Split a synchronous reader's I/O loop into its three phases, from block and
    sched_switch events (one request in flight at a time, as dd with ``iflag=direct``).

    For each request issued on ``dev`` (all devices if None):

    - ``service``: block_rq_issue → block_rq_complete of the same sector (the
      driver and device: what blktrace calls D2C);
    - ``wakeup``: block_rq_complete → the next sched_switch that puts ``pid`` on a
      CPU, counted only if ``pid`` was off CPU (it blocked after the issue);
    - ``user``: ``pid`` back on CPU → the next block_rq_issue (finishing the
      system call, the copy out, dd's write to /dev/null, the next read call).

    Returns ``{"service": [s...], "wakeup": [s...], "user": [s...], "requests": n,
    "switches_out": number of times pid left a CPU}``; times in seconds.
    """
    inflight: dict[tuple[str, int], float] = {}
    out = {"service": [], "wakeup": [], "user": [], "requests": 0, "switches_out": 0}
    on_cpu = True
    waiting_since: float | None = None   # completion time while pid was off CPU
    running_since: float | None = None   # when pid came back after a completion
    for e in events:
        name = e["event"]
        if name == "sched_switch":
            s = sched_switch(e["body"])
            if s["prev_pid"] == pid:
                on_cpu = False
                out["switches_out"] += 1
            if s["next_pid"] == pid:
                on_cpu = True
                if waiting_since is not None:
                    out["wakeup"].append(e["ts"] - waiting_since)
                    running_since = e["ts"]
                    waiting_since = None
        elif name in ("block_rq_issue", "block_rq_complete"):
            r = block_rq(e["body"])
            if dev is not None and r["dev"] != dev:
                continue
            key = (r["dev"], r["sector"])
            if name == "block_rq_issue":
                out["requests"] += 1
                inflight[key] = e["ts"]
                if running_since is not None:
                    out["user"].append(e["ts"] - running_since)
                    running_since = None
            else:
                t0 = inflight.pop(key, None)
                if t0 is not None:
                    out["service"].append(e["ts"] - t0)
                if not on_cpu:
                    waiting_since = e["ts"]
                else:
                    running_since = None
    return out
