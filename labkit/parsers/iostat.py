"""sysstat's ``iostat -x -o JSON`` report (iostat(1), options ``-x`` extended statistics
and ``-o JSON``).

Each report of ``iostat -x -y -o JSON INTERVAL DEVICE`` covers one interval (``-y``
omits the first report, which covers the time since boot). The JSON document is closed
only when iostat ends normally: after its COUNT reports, or on SIGINT. A SIGTERM leaves
it truncated, which ``iostat_json`` reports as an error instead of guessing.

Device fields, as iostat names them (sysstat 12): ``r/s``, ``w/s`` (completed requests
per second), ``rkB/s``, ``wkB/s``, ``rrqm/s``, ``wrqm/s`` (merges per second),
``r_await``, ``w_await`` (ms, from queueing to completion), ``rareq-sz``, ``wareq-sz``
(KiB per request), ``aqu-sz`` (average number of requests in flight), ``util`` (percent
of the interval the device had at least one request in flight).
"""

from __future__ import annotations

import json
import statistics

from .jsonline import ParseError


def iostat_json(text: str) -> dict:
    """Parse the output of ``iostat -o JSON`` (with or without ``-x``).

    Returns ``{"host": {"nodename", "sysname", "release", "machine", "number-of-cpus",
    "date"}, "intervals": [{"avg_cpu": {"user", "nice", "system", "iowait", "steal",
    "idle"} | None, "disks": {device: {field: number}}}, ...]}``; ``intervals`` is empty
    when iostat stopped before its first report.

    Raises:
        ParseError: not JSON (e.g. truncated by SIGTERM), or not iostat's shape.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"iostat output is not a complete JSON document ({exc}); stopped by SIGTERM?") from None
    try:
        host = doc["sysstat"]["hosts"][0]
        stats = host["statistics"]
    except (KeyError, IndexError, TypeError):
        raise ParseError("iostat JSON has no sysstat.hosts[0].statistics") from None
    intervals = []
    for entry in stats:
        if not entry:
            continue
        disks = {}
        for d in entry.get("disk", []):
            name = d.get("disk_device")
            if name is None:
                raise ParseError("iostat JSON disk entry without disk_device")
            disks[name] = {k: float(v) for k, v in d.items() if k != "disk_device"}
        cpu = entry.get("avg-cpu")
        intervals.append({"avg_cpu": {k: float(v) for k, v in cpu.items()} if cpu else None, "disks": disks})
    return {"host": {k: v for k, v in host.items() if k != "statistics"}, "intervals": intervals}


def device_means(parsed: dict, device: str, skip: int = 0) -> tuple[dict[str, float], int]:
    """Mean of every field of ``device`` over the intervals of ``parsed`` (``iostat_json``),
    leaving out the first ``skip`` intervals.

    Returns ``(means, n)``: ``n`` is the number of intervals averaged (0 gives ``{}``).
    The mean of equal-length intervals is what one report over their whole span would
    show. ``skip=1`` drops the interval in which the measured job was still starting.

    Raises:
        ParseError: ``device`` is missing from an interval (iostat was asked about
        another device).
    """
    rows = []
    for i, interval in enumerate(parsed["intervals"][skip:], start=skip):
        if device not in interval["disks"]:
            raise ParseError(f"iostat interval {i} has no device {device!r} (has {sorted(interval['disks'])})")
        rows.append(interval["disks"][device])
    if not rows:
        return {}, 0
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0]}, len(rows)
