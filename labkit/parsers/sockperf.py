"""``sockperf ping-pong`` summary (sockperf 3.x).

sockperf reports *latency* as half the measured round trip unless ``--full-rtt``
is given (sockperf --help: "--full-rtt: Show results in round-trip-time instead
of latency"); ``half_rtt`` in the result says which one the numbers are.
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def sockperf_pingpong(text: str) -> dict:
    """Parse a ping-pong run's summary.

    Returns ``{"avg_us", "std_dev_us", "observations", "percentiles": {50.0: us, ...},
    "min_us", "max_us", "half_rtt": bool, "valid_runtime_s"}``. All times in µs.

    Raises:
        ParseError: no ``avg-latency``/``avg-rtt`` line (e.g. no server answered).
    """
    text = _ANSI.sub("", text)
    m = re.search(r"====> avg-(latency|rtt)=([\d.]+) \(std-dev=([\d.]+)", text)
    if not m:
        raise ParseError("no avg-latency line in sockperf output")
    out = {
        "half_rtt": m.group(1) == "latency",
        "avg_us": float(m.group(2)),
        "std_dev_us": float(m.group(3)),
        "percentiles": {},
    }
    for p, v in re.findall(r"---> percentile\s+([\d.]+)\s*=\s*([\d.]+)", text):
        out["percentiles"][float(p)] = float(v)
    mx = re.search(r"---> <MAX> observation\s*=\s*([\d.]+)", text)
    mn = re.search(r"---> <MIN> observation\s*=\s*([\d.]+)", text)
    obs = re.search(r"Total (\d+) observations", text)
    run = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec", text)
    out["max_us"] = float(mx.group(1)) if mx else None
    out["min_us"] = float(mn.group(1)) if mn else None
    out["observations"] = int(obs.group(1)) if obs else None
    out["valid_runtime_s"] = float(run.group(1)) if run else None
    if 50.0 not in out["percentiles"]:
        raise ParseError("no 50th percentile in sockperf output")
    return out
