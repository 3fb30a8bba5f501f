"""``btt`` reports (blktrace's "block trace timeline" analyser, btt(1), blktrace 1.x/2.x).

btt reads a blkparse binary dump (``blkparse -d FILE``) and prints, first, the
"All Devices" table of per-I/O phase times::

                ALL           MIN           AVG           MAX           N
    --------------- ------------- ------------- ------------- -----------
    Q2Q               0.000436429   0.000536571   0.004037754         255
    D2C               0.000383306   0.000455069   0.000723481         256
    Q2C               0.000397026   0.000469665   0.000755989         256

Times are seconds. The phases (btt guide, "Major Areas of Interest"): **Q** the
block layer is told about an I/O (queued), **G** a request structure is got, **I**
inserted into the scheduler, **D** dispatched (issued) to the driver, **C**
completed. ``Q2C`` is the whole life of an I/O in the block layer and below;
``D2C`` the part spent in the driver and the device; ``Q2D`` (= Q2G+G2I+I2D, or
Q2M for merged I/Os) the part before dispatch. ``Q2Q`` is the time between
successive I/Os arriving. btt only prints rows it could compute: an I/O that the
block layer split (``X`` events) is not followed through, so a trace of split
I/Os can lack D2C and Q2C altogether.

``-l NAME`` / ``-q NAME`` make btt also write every I/O's D2C / Q2C latency to
``NAME_<maj>,<min>_d2c.dat`` / ``..._q2c.dat`` (one "time latency" pair per line,
seconds), which :func:`btt_latencies` reads.
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_NUM = r"(\d+\.\d+)"
_ROW = re.compile(rf"^(?P<name>[A-Z]2[A-Z]\w*)\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+(\d+)\s*$")
_OVERHEAD_HEAD = re.compile(r"^\s*DEV \|\s+(.*)$")
_DEV = re.compile(r"^\s*\(\s*(\d+),\s*(\d+)\)\s*\|(.*)$")


def _section(text: str, title: str) -> list[str]:
    """Lines of the ``=== title ===`` section (up to the next section)."""
    lines = text.splitlines()
    out, inside = [], False
    for line in lines:
        if line.startswith("====="):
            if inside:
                break
            inside = title in line
            continue
        if inside:
            out.append(line)
    return out


def btt_summary(text: str) -> dict:
    """Parse btt's standard report.

    Returns ``{"all": {phase: {"min", "avg", "max" (seconds), "n" (I/Os)}},
    "overhead": {"maj,min": {phase: percent of Q2C}}}``; phases are those btt
    printed (e.g. Q2Q, Q2G, G2I, Q2M, I2D, D2C, Q2C).

    Raises:
        ParseError: no "All Devices" section (not btt output, or btt found no trace).
    """
    if "All Devices" not in text:
        raise ParseError("no 'All Devices' section: not btt output?")
    all_rows: dict[str, dict] = {}
    for line in _section(text, "All Devices"):
        m = _ROW.match(line)
        if m:
            all_rows[m["name"]] = {"min": float(m.group(2)), "avg": float(m.group(3)),
                                   "max": float(m.group(4)), "n": int(m.group(5))}
    overhead: dict[str, dict[str, float]] = {}
    cols: list[str] = []
    for line in _section(text, "Device Overhead"):
        h = _OVERHEAD_HEAD.match(line)
        if h:
            cols = [c.strip() for c in h.group(1).split()]
            continue
        d = _DEV.match(line)
        if d and cols:
            vals = [v.strip().rstrip("%") for v in d.group(3).split()]
            overhead[f"{d.group(1)},{d.group(2)}"] = {c: float(v) for c, v in zip(cols, vals)}
    return {"all": all_rows, "overhead": overhead}


def btt_latencies(text: str) -> list[tuple[float, float]]:
    """Per-I/O latencies from a ``btt -l``/``-q`` .dat file: ``[(time_s, latency_s), ...]``.

    Raises:
        ParseError: a line that is not two numbers.
    """
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ParseError(f"line {i}: expected 'time latency', got {line!r}")
        try:
            out.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise ParseError(f"line {i}: not numbers: {line!r}") from None
    return out
