"""fio's JSON report (``fio --output-format=json``; fio(1), "OUTPUT", and fio's HOWTO,
"Interpreting the output"). fio's human-readable text output is never parsed.

fio prints informational notes on standard output before the JSON document, for example
``note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be
capped at 1``; they are returned as ``notes``, not discarded.

Units as fio reports them: ``bw`` in KiB/s (1024 bytes), ``bw_bytes`` in bytes/s,
``iops`` in I/Os per second, latencies (``clat_ns``, ``slat_ns``, ``lat_ns``) in
nanoseconds, ``runtime`` and ``job_runtime`` in milliseconds, ``usr_cpu``/``sys_cpu`` in
percent of one CPU (with ``group_reporting``, summed CPU time over summed run time: the
average per job process).
"""

from __future__ import annotations

import json

from .jsonline import ParseError

DIRECTIONS = ("read", "write", "trim")


def fio_json(text: str) -> dict:
    """Split fio's standard output into its notes and its JSON report.

    Returns ``{"notes": [str, ...], "report": dict}``: ``notes`` are the non-empty lines
    before the JSON document (fio's ``note:``/``fio:`` messages), ``report`` the decoded
    document (keys ``fio version``, ``global options``, ``jobs``, ``disk_util``...).
    Text after the document (fio may print warnings on exit) is ignored.

    Raises:
        ParseError: no JSON document (fio failed before reporting, or text output was
        requested), or it has no ``jobs`` list.
    """
    lines = text.splitlines(keepends=True)
    offset = 0
    notes = []
    for line in lines:
        if line.rstrip("\r\n") == "{":
            break
        if line.strip():
            notes.append(line.strip())
        offset += len(line)
    else:
        raise ParseError("no JSON document in fio output (was --output-format=json given?)")
    try:
        report, _ = json.JSONDecoder().raw_decode(text[offset:])
    except json.JSONDecodeError as exc:
        raise ParseError(f"fio JSON report is not valid JSON: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("jobs"), list):
        raise ParseError("fio JSON report has no jobs list")
    return {"notes": notes, "report": report}


def _percentiles(lat: dict) -> dict[float, float]:
    """fio's ``{"50.000000": ns, ...}`` → ``{50.0: ns, ...}`` (empty when fio kept none)."""
    return {float(p): float(v) for p, v in (lat.get("percentile") or {}).items()}


def _direction(d: dict) -> dict:
    clat = d.get("clat_ns") or {}
    return {
        "io_bytes": int(d["io_bytes"]),
        "bw_kib": float(d["bw"]),              # KiB/s
        "bw_bytes": float(d["bw_bytes"]),      # bytes/s
        "iops": float(d["iops"]),
        "runtime_ms": float(d["runtime"]),
        "total_ios": int(d["total_ios"]),
        "clat_ns": {
            "mean": float(clat.get("mean", 0.0)),
            "stddev": float(clat.get("stddev", 0.0)),
            "min": float(clat.get("min", 0.0)),
            "max": float(clat.get("max", 0.0)),
            "n": int(clat.get("N", 0)),
            "percentiles": _percentiles(clat),
        },
    }


def fio_jobs(text: str) -> list[dict]:
    """The per-job summaries of one fio run (one per job, or one per group with
    ``group_reporting``).

    Each summary: ``{"jobname", "error", "options", "read", "write", "trim", "usr_cpu",
    "sys_cpu", "ctx", "job_runtime_ms", "notes"}``. ``options`` merges fio's ``global
    options`` with the job's ``job options`` (the values after ``${VAR}`` substitution;
    options left at fio's defaults are absent). Each direction is ``None`` when the job
    moved no bytes that way, else ``{"io_bytes", "bw_kib" (KiB/s), "bw_bytes" (B/s),
    "iops", "runtime_ms", "total_ios", "clat_ns": {"mean", "stddev", "min", "max", "n",
    "percentiles": {50.0: ns, 99.0: ns, ...}}}``.

    Raises:
        ParseError: as ``fio_json``; a job is missing a required field.
    """
    parsed = fio_json(text)
    report = parsed["report"]
    glob = report.get("global options") or {}
    out = []
    for job in report["jobs"]:
        try:
            summary = {
                "jobname": job["jobname"],
                "error": int(job.get("error", 0)),
                "options": {**glob, **(job.get("job options") or {})},
                "usr_cpu": float(job["usr_cpu"]),
                "sys_cpu": float(job["sys_cpu"]),
                "ctx": int(job.get("ctx", 0)),
                "job_runtime_ms": float(job.get("job_runtime", 0)),
                "notes": parsed["notes"],
            }
            for d in DIRECTIONS:
                summary[d] = _direction(job[d]) if d in job and int(job[d]["io_bytes"]) > 0 else None
        except (KeyError, TypeError, ValueError) as exc:
            raise ParseError(f"fio job {job.get('jobname', '?')!r}: missing or bad field {exc}") from None
        out.append(summary)
    if not out:
        raise ParseError("fio JSON report has no jobs")
    return out


def fio_job(text: str) -> dict:
    """The single job summary of a one-job run (see ``fio_jobs``).

    Raises:
        ParseError: as ``fio_jobs``; more than one job (use ``group_reporting``), or the
        job reports an error.
    """
    jobs = fio_jobs(text)
    if len(jobs) != 1:
        raise ParseError(f"expected one fio job report, found {len(jobs)}: run with group_reporting for one summary")
    if jobs[0]["error"]:
        raise ParseError(f"fio job {jobs[0]['jobname']!r} reports error {jobs[0]['error']}")
    return jobs[0]


def disk_util(text: str) -> list[dict]:
    """fio's own disk statistics for the run (``disk_util``: ``name``, ``read_ios``,
    ``write_ios``, ``util`` in percent...), read from /sys/block by fio; empty when fio
    found no block device under the file."""
    return list(fio_json(text)["report"].get("disk_util") or [])


def fio_summary(text: str, rw: str = "read") -> dict:
    """One job's (or one ``group_reporting`` group's) numbers for direction ``rw``, flat and
    in microseconds: a view of ``fio_job`` for latency tables.

    Returns ``{"jobname", "iops", "bw_bytes" (B/s), "total_ios", "runtime_ms",
    "clat_mean_us", "clat_stddev_us", "clat_min_us", "clat_max_us", "clat_p50_us",
    "clat_p99_us", "clat_p99_9_us" (None when fio did not report that percentile),
    "usr_cpu", "sys_cpu" (percent), "ctx" (context switches), "error"}``.

    Raises:
        ParseError: as ``fio_job``; or no I/O in direction ``rw``.
    """
    job = fio_job(text)
    d = job.get(rw)
    if not d or not d["total_ios"]:
        raise ParseError(f"fio job {job['jobname']!r} did no {rw} I/O")
    clat = d["clat_ns"]
    pct = clat["percentiles"]

    def p_us(p: float) -> float | None:
        v = next((v for k, v in pct.items() if abs(k - p) < 1e-9), None)
        return None if v is None else v / 1000.0

    return {
        "jobname": job["jobname"], "iops": d["iops"], "bw_bytes": d["bw_bytes"], "total_ios": d["total_ios"],
        "runtime_ms": d["runtime_ms"], "clat_mean_us": clat["mean"] / 1000.0, "clat_stddev_us": clat["stddev"] / 1000.0,
        "clat_min_us": clat["min"] / 1000.0, "clat_max_us": clat["max"] / 1000.0, "clat_p50_us": p_us(50.0),
        "clat_p99_us": p_us(99.0), "clat_p99_9_us": p_us(99.9), "usr_cpu": job["usr_cpu"], "sys_cpu": job["sys_cpu"],
        "ctx": job["ctx"], "error": job["error"],
    }
