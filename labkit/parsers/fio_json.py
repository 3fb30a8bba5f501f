"""fio's JSON output (``fio --output-format=json``; fio(1), "OUTPUT"; HOWTO, "Terse and
JSON output"). We read the numbers fio computed; fio's text output is never scraped.

Shape used here: ``{"jobs": [{"jobname", "job options", "read": {...}, "write": {...},
"usr_cpu", "sys_cpu", "ctx", ...}]}``, where each direction has ``iops``, ``bw_bytes``,
``total_ios``, ``runtime`` (ms) and ``clat_ns`` (``mean``, ``stddev``, ``N``, ``min``,
``max`` and ``percentile`` keyed like ``"99.900000"``, present when fio computed
completion-latency percentiles, the default).
"""

from __future__ import annotations

import json

from .jsonline import ParseError


def fio_document(text: str) -> dict:
    """The JSON document fio printed. Text before the first ``{`` (fio sometimes prints a
    warning line on stdout first) is ignored.

    Raises:
        ParseError: no JSON object, or one without a ``jobs`` list.
    """
    start = text.find("{")
    if start < 0:
        raise ParseError("no fio JSON output (was --output-format=json given?)")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError(f"fio JSON output does not parse: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list) or not doc["jobs"]:
        raise ParseError("fio JSON output has no jobs")
    return doc


def _pct(percentiles: dict, p: float) -> float | None:
    for key, value in percentiles.items():
        if abs(float(key) - p) < 1e-9:
            return value / 1000.0
    return None


def fio_summary(text: str, rw: str = "read") -> dict:
    """One fio job's (or one ``--group_reporting`` group's) numbers for direction ``rw``.

    Returns ``{"jobname", "iops", "bw_bytes" (B/s), "total_ios", "runtime_ms",
    "clat_mean_us", "clat_stddev_us", "clat_min_us", "clat_max_us", "clat_p50_us",
    "clat_p99_us", "clat_p99_9_us" (None when fio did not report that percentile),
    "usr_cpu", "sys_cpu" (percent), "ctx" (context switches), "error" (fio's error code)}``.
    Latencies are converted from fio's nanoseconds to microseconds.

    Raises:
        ParseError: not fio JSON; more than one job (use ``--group_reporting``); fio
        reported an error for the job; or no I/O in direction ``rw``.
    """
    doc = fio_document(text)
    jobs = doc["jobs"]
    if len(jobs) != 1:
        raise ParseError(f"fio printed {len(jobs)} jobs; run with --group_reporting for one summary")
    job = jobs[0]
    if job.get("error"):
        raise ParseError(f"fio job {job.get('jobname')!r} reported error {job['error']}")
    d = job.get(rw)
    if not d or not d.get("total_ios"):
        raise ParseError(f"fio job {job.get('jobname')!r} did no {rw} I/O")
    clat = d["clat_ns"]
    pct = clat.get("percentile", {})
    return {
        "jobname": job.get("jobname"),
        "iops": float(d["iops"]),
        "bw_bytes": float(d["bw_bytes"]),
        "total_ios": int(d["total_ios"]),
        "runtime_ms": float(d["runtime"]),
        "clat_mean_us": clat["mean"] / 1000.0,
        "clat_stddev_us": clat["stddev"] / 1000.0,
        "clat_min_us": clat["min"] / 1000.0,
        "clat_max_us": clat["max"] / 1000.0,
        "clat_p50_us": _pct(pct, 50.0),
        "clat_p99_us": _pct(pct, 99.0),
        "clat_p99_9_us": _pct(pct, 99.9),
        "usr_cpu": float(job.get("usr_cpu", 0.0)),
        "sys_cpu": float(job.get("sys_cpu", 0.0)),
        "ctx": int(job.get("ctx", 0)),
        "error": int(job.get("error", 0)),
    }
