"""``strace -c`` summary table (strace(1), "-c: count time, calls, and errors for each system call")."""

from __future__ import annotations

import re

from .jsonline import ParseError

_ROW = re.compile(
    r"^\s*(?P<pct>[\d.]+)\s+(?P<seconds>[\d.]+)\s+(?P<usecs>\d+)\s+(?P<calls>\d+)\s+(?P<errors>\d+)?\s*(?P<syscall>\S+)\s*$"
)


def strace_summary(text: str) -> dict:
    """Parse the table ``strace -c`` prints.

    Returns ``{"syscalls": {name: {"pct_time", "seconds", "usecs_per_call", "calls",
    "errors"}}, "total": {...same keys...}}``. Seconds are system time strace measured
    per syscall (strace >= 5 prints ``usecs/call`` as an integer).

    Raises:
        ParseError: no table header or no total line.
    """
    lines = text.splitlines()
    if not any(l.lstrip().startswith("% time") for l in lines):
        raise ParseError("no strace -c table header")
    rows, total = {}, None
    for line in lines:
        m = _ROW.match(line)
        if not m:
            continue
        row = {
            "pct_time": float(m["pct"]),
            "seconds": float(m["seconds"]),
            "usecs_per_call": int(m["usecs"]),
            "calls": int(m["calls"]),
            "errors": int(m["errors"] or 0),
        }
        if m["syscall"] == "total":
            total = row
        else:
            rows[m["syscall"]] = row
    if total is None:
        raise ParseError("no total line in strace -c table")
    return {"syscalls": rows, "total": total}
