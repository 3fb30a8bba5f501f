"""``dd`` transfer summary (GNU coreutils dd(1), printed on standard error at the end).

GNU dd ends with three lines (``status=none`` suppresses them)::

    64+0 records in
    64+0 records out
    67108864 bytes (67 MB, 64 MiB) copied, 0.0531981 s, 1.3 GB/s

The rate dd prints is rounded to two or three digits, so we recompute it from the
exact byte count and seconds. MB/s here is 10^6 bytes per second, as dd's own "MB/s".
Older coreutils print ``(67 MB) copied``; one byte is ``1 byte copied``; a locale
with a decimal comma prints ``0,0531981 s``: all are accepted (run dd with
``LC_ALL=C`` to get the form above).
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_RECORDS = re.compile(r"^(\d+)\+(\d+) records (in|out)\s*$", re.M)
_SUMMARY = re.compile(
    r"^(?P<bytes>\d+) bytes?(?: \([^)]*\))? copied, (?P<secs>[\d.,]+(?:e[-+]?\d+)?) s, "
    r"(?P<rate>[\d.,]+(?:e[-+]?\d+)?) (?P<unit>[kMGTPEZY]?i?B)/s\s*$", re.M)


def _num(s: str) -> float:
    return float(s.replace(",", "."))


def dd_summary(text: str) -> dict:
    """Parse dd's final summary (its standard error).

    Returns ``{"bytes": int, "seconds": float, "mb_per_s": float (10^6 B/s, from
    bytes/seconds; 0.0 when seconds is 0), "printed_rate": str (dd's own rounded rate
    with unit, e.g. "1.3 GB/s"), "records_in": (full, partial), "records_out": (full,
    partial)}``. Records are None if dd did not print them.

    If dd printed several summaries (``status=progress`` or a ``USR1`` signal), the
    last one is the final one and is returned.

    Raises:
        ParseError: no summary line (dd failed before copying, or ``status=none``).
    """
    matches = list(_SUMMARY.finditer(text))
    if not matches:
        first = text.strip().splitlines()[0] if text.strip() else "no output"
        raise ParseError(f"no dd summary line ('N bytes ... copied, S s, R unit/s'); dd said: {first}")
    m = matches[-1]
    nbytes = int(m["bytes"])
    secs = _num(m["secs"])
    records = {"in": None, "out": None}
    for r in _RECORDS.finditer(text):
        records[r.group(3)] = (int(r.group(1)), int(r.group(2)))
    return {
        "bytes": nbytes,
        "seconds": secs,
        "mb_per_s": nbytes / secs / 1e6 if secs > 0 else 0.0,
        "printed_rate": f"{m['rate']} {m['unit']}/s",
        "records_in": records["in"],
        "records_out": records["out"],
    }
