"""sysbench 1.0 ``cpu`` test report (``sysbench cpu run``). sysbench 1.0 prints only this
text report for its built-in tests (no JSON), so this parser reads its labelled lines:

    CPU speed:
        events per second:  4450.82
    General statistics:
        total time:                          2.0002s
        total number of events:              8905
    Latency (ms):
             min:                                    0.22
             avg:                                    0.22
             max:                                    1.29
             95th percentile:                        0.24
             sum:                                 1996.84

Each label is looked up in its own section, so ``min:`` of the latency section is never
confused with another section's line.
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_SECTIONS = {"CPU speed:": "cpu", "General statistics:": "general", "Latency (ms):": "latency",
             "Threads fairness:": "fairness"}
_NUM = re.compile(r"^\s*([^:]+):\s+([0-9.]+)s?\s*$")


def sysbench_cpu(text: str) -> dict:
    """Parse a ``sysbench cpu run`` report.

    Returns ``{"events_per_s", "total_time_s", "events", "latency_min_ms",
    "latency_avg_ms", "latency_max_ms", "latency_p_ms" (the percentile line, whichever
    percentile ``--percentile`` chose; None if absent), "percentile" (that percentile,
    e.g. 95), "latency_sum_ms"}``. sysbench prints latencies in milliseconds with two
    decimals, so the resolution is 10 µs.

    Raises:
        ParseError: the report lacks events per second or the latency section.
    """
    section = None
    found: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        head = line.strip()
        if head in _SECTIONS:
            section = _SECTIONS[head]
            continue
        m = _NUM.match(line)
        if m and section:
            found.setdefault(section, {})[m.group(1).strip()] = float(m.group(2))
    cpu, gen, lat = found.get("cpu", {}), found.get("general", {}), found.get("latency", {})
    if "events per second" not in cpu or "min" not in lat:
        raise ParseError("not a sysbench cpu report (no 'events per second' or no latency section)")
    pkey = next((k for k in lat if k.endswith("th percentile")), None)
    return {
        "events_per_s": cpu["events per second"],
        "total_time_s": gen.get("total time"),
        "events": int(gen["total number of events"]) if "total number of events" in gen else None,
        "latency_min_ms": lat["min"],
        "latency_avg_ms": lat.get("avg"),
        "latency_max_ms": lat.get("max"),
        "latency_p_ms": lat.get(pkey) if pkey else None,
        "percentile": float(pkey.split("th")[0]) if pkey else None,
        "latency_sum_ms": lat.get("sum"),
    }
