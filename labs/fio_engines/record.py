"""fio_engines lab: raw outputs → measurements (called by ``labkit record``).

Sources, one per kind of number:

- fio's JSON report (``raw/<step>.out``): ``iops`` (IOPS), ``bandwidth`` (MiB/s, fio's
  ``bw_bytes`` / 2^20), ``clat_p50``/``clat_p99`` (µs, fio's ``clat_ns`` percentiles /
  1000), ``usr_cpu``/``sys_cpu`` (% of one CPU, as fio reports them), ``slat_mean`` (µs,
  fio's mean submission latency, only for engines that submit apart from completing:
  libaio, io_uring; fio gives no percentiles of it by default);
- ``perf stat -x,`` (``raw/<step>.perf``): ``rq_issue``, ``rq_complete``, ``bio_queue``
  (counts of the block tracepoints during the step, case ``phase`` = ``job`` or ``sync``,
  and ``job+sync``: the job's count plus that of the ``sync`` after it, same repetition),
  and derived from them with fio's byte and I/O counts: ``completions_per_gib``
  (rq_complete per GiB fio moved) and ``requests_per_io`` (rq_complete per fio I/O);
- ``iostat -x -y -o JSON 1`` (``raw/<step>.iostat.out``): per job the mean of its
  one-second intervals after the first (which includes the job's start-up; a job of
  1 s, as in quick mode, leaves none): ``util`` (%), ``aqu_sz`` (requests), ``await`` (ms, r_await or
  w_await), ``areq_sz`` (KiB, rareq-sz or wareq-sz), ``device_rps`` (r/s or w/s);
- ``stat -c '%s %b %B'`` (layout steps): ``allocated`` (MiB of blocks allocated to the file);
- ``strace -c -f`` (strace steps, table on standard error): ``strace_calls`` per system call,
  and for the original group's steps (experiment ``original strace``) ``strace_usecs``
  (strace's ``usecs/call``) and the traced job's ``iops``;
- ``pidstat -u -r -h -H -l -C 'aux-path=SCRATCH ' 1`` (original group,
  ``raw/<step>.pidstat.out``; the job's fio processes, found by their command line): per job
  ``cpu_pct`` (%CPU, % of one CPU) of the busiest fio process (case ``process`` =
  ``busiest``: the job's own process) and summed over every fio process (``all``), and
  ``rss`` (MiB) of the busiest one; means of the 1-s intervals after each process's first
  (its first interval holds its start-up). pidstat leaves out a process with nothing to
  report in an interval, and a process that has exited.

One sample per repetition (steps ``<...>.r<k>``); every sample kept. The case of a job
comes from fio's own report of the options it ran with (after ``${VAR}`` substitution),
plus the experiment (the step's group) and, for the layout group, the file's layout.
"""

from __future__ import annotations

import re

from labkit.parsers.fio import fio_job, fio_json
from labkit.parsers.iostat import device_means, iostat_json
from labkit.parsers.perf import perf_stat_csv
from labkit.parsers.strace import strace_summary

GIB = 2**30
MIB = 2**20
PERF_METRICS = {"block:block_rq_issue": "rq_issue", "block:block_rq_complete": "rq_complete",
                "block:block_bio_queue": "bio_queue"}
STRACE_SYSCALLS = ("pread64", "pwrite64", "io_submit", "io_getevents", "io_uring_enter", "nanosleep",
                   "clock_nanosleep", "pselect6", "wait4", "shmat", "shmdt", "shmget", "futex")
_REP = re.compile(r"\.r(\d+)$")
ORIGINAL_STRACE = ("nanosleep", "clock_nanosleep", "shmdt")


def fio_size(text: str) -> int:
    """fio size string → bytes, with fio's default kb_base=1024: ``4k`` → 4096, ``1g`` → 2^30."""
    m = re.fullmatch(r"(\d+)([kmgt]?)(i?b)?", text.strip().lower())
    if not m:
        raise ValueError(f"not a fio size: {text!r}")
    return int(m.group(1)) * 1024 ** "_kmgt".index(m.group(2) or "_")


def _target(run) -> dict:
    path = run.dir / "target.txt"
    if not path.exists():
        return {}
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _direction(rw: str) -> str:
    return "read" if "read" in rw else "write"


def _case(step: dict, opts: dict, fs: str) -> dict:
    """The case of one fio job: from the step's group and name, checked against fio's options."""
    group, name = step["group"], step["name"]
    parts = _REP.sub("", name).split(".")
    rw = opts["rw"]
    direct = opts.get("direct", "0") == "1"
    if group == "engines":
        case = {"engine": opts["ioengine"], "iodepth": int(opts["iodepth"]), "rw": rw}
    elif group == "buffered":
        if not direct:
            mode = "buffered" if rw == "randwrite" else (
                "buffered cold" if opts.get("invalidate", "1") == "1" else "buffered warm")
        else:
            mode = "direct"
        case = {"rw": rw, "mode": mode}
    elif group == "blocksize":
        case = {"rw": rw, "io": "direct" if direct else "buffered", "bs": fio_size(opts["bs"])}
    elif group == "layout":
        case = {"layout": parts[1], "rw": rw, "fsync": int(opts.get("fsync", "0"))}
    elif group == "numjobs":
        case = {"numjobs": int(opts["numjobs"]), "rw": rw}
    elif group == "original":
        case = {"engine": opts["ioengine"], "iodepth": int(opts["iodepth"]), "bs": fio_size(opts["bs"]),
                "io": "direct" if direct else "buffered", "rw": rw}
        if case["engine"] not in parts or case["io"] not in parts:
            raise ValueError(f"{name}: step name and fio's ioengine/direct disagree")
    else:
        raise ValueError(f"{name}: no case rule for group {group}")
    if parts[-1] != "warmup" and rw not in parts:
        raise ValueError(f"{name}: step name and fio's rw={rw} disagree")
    return {"experiment": group, **case, "fs": fs}


class _Samples:
    """(metric, unit, case) → samples in repetition order, then added to the run."""

    def __init__(self):
        self.data: dict = {}

    def add(self, metric: str, unit: str, case: dict, value: float, step: str):
        key = (metric, unit, tuple(case.items()))
        self.data.setdefault(key, {"samples": [], "step": step})["samples"].append(value)

    def flush(self, run):
        for (metric, unit, case), v in self.data.items():
            run.add(metric, unit, dict(case), v["samples"], v["step"])


def _perf_counts(run, step: str) -> dict | None:
    path = run.raw(step, "perf")
    if not path.exists():
        return None
    events = perf_stat_csv(path.read_text())
    return {PERF_METRICS[e]: v["value"] for e, v in events.items() if e in PERF_METRICS and v["counted"]}


def pidstat_lines(text: str) -> list[dict]:
    """``pidstat -u -r -h -H [-l]`` output → one dict per process line, in order: ``time``
    (Unix seconds, the end of the interval), ``pid``, ``cpu`` (%CPU: % of one CPU),
    ``rss_kib``, ``command`` (with ``-l`` the whole command line, spaces and all). Columns
    are found by the ``#`` header line pidstat repeats before each interval; the banner
    line before the first header is skipped.

    Raises:
        ValueError: a data line before any header, or with fewer fields than the header.
    """
    cols: list[str] | None = None
    rows = []
    for line in text.splitlines():
        if line.startswith("#"):
            cols = line[1:].split()
            continue
        if not line.strip() or line.startswith("Linux "):
            continue
        fields = line.split()
        if cols is None or cols[-1] != "Command" or len(fields) < len(cols):
            raise ValueError(f"pidstat: unexpected line {line!r}")
        d = dict(zip(cols[:-1], fields))
        rows.append({"time": int(d["Time"]), "pid": int(d["PID"]), "cpu": float(d["%CPU"]),
                     "rss_kib": int(d["RSS"]), "command": " ".join(fields[len(cols) - 1:])})
    return rows


def fio_process_means(rows: list[dict]) -> dict | None:
    """Means over the pidstat intervals of one job, from :func:`pidstat_lines` rows.

    Only lines of fio itself count (the command's first word is ``fio`` or ends in ``/fio``):
    ``pidstat -l -C`` also matches ``perf stat``, whose command line holds fio's. The
    busiest process is the one with the most %CPU summed over its lines (the job's own
    process; fio's main process mostly sleeps). Each process's first line is left out
    (that interval holds its start-up). Over the intervals where the busiest process has a line
    after its first: ``busiest_cpu`` (its mean %CPU), ``all_cpu`` (mean of the per-interval
    sum of %CPU over every process listed), ``busiest_rss_mib``, ``intervals`` (count).
    None when no such interval remains (a job shorter than about two intervals).
    """
    rows = [r for r in rows if r["command"].split()[0].rsplit("/", 1)[-1] == "fio"]
    if not rows:
        return None
    first: dict[int, int] = {}
    total: dict[int, float] = {}
    for r in rows:
        first.setdefault(r["pid"], r["time"])
        total[r["pid"]] = total.get(r["pid"], 0.0) + r["cpu"]
    top = max(total, key=total.get)
    times = [r["time"] for r in rows if r["pid"] == top and r["time"] != first[top]]
    if not times:
        return None
    busiest, allcpu, rss = [], [], []
    for t in times:
        lines = [r for r in rows if r["time"] == t and r["time"] != first[r["pid"]]]
        mine = next(r for r in lines if r["pid"] == top)
        busiest.append(mine["cpu"])
        rss.append(mine["rss_kib"] / 1024)
        allcpu.append(sum(r["cpu"] for r in lines))
    n = len(times)
    return {"busiest_cpu": sum(busiest) / n, "all_cpu": sum(allcpu) / n, "busiest_rss_mib": sum(rss) / n,
            "intervals": n}


def collect(run) -> None:
    """Parse every fio, perf, iostat, stat and strace output of ``run`` into measurements."""
    target = _target(run)
    fs = target.get("fs", "unknown")
    disk = target.get("disk", "")
    acc = _Samples()
    job_cases: dict[str, dict] = {}
    for s in run.steps:
        name, group = s["name"], s["group"]
        if s["status"] != "ok" or group not in ("original", "engines", "buffered", "blocksize", "layout", "numjobs"):
            continue
        if group == "layout" and name.endswith((".make", ".before", ".after")):
            continue
        if name.startswith("original.strace."):
            continue
        if name.endswith(".sync"):
            continue
        job = fio_job(run.raw(name).read_text())
        if name.startswith("buffered.warmup."):
            continue
        case = _case(s, job["options"], fs)
        job_cases[name] = case
        d = job[_direction(case["rw"])]
        if d is None:
            raise ValueError(f"{name}: fio moved no bytes in the {_direction(case['rw'])} direction")
        acc.add("iops", "IOPS", case, d["iops"], name)
        acc.add("bandwidth", "MiB/s", case, d["bw_bytes"] / MIB, name)
        pct = d["clat_ns"]["percentiles"]
        if 50.0 in pct and 99.0 in pct:
            acc.add("clat_p50", "us", case, pct[50.0] / 1000, name)
            acc.add("clat_p99", "us", case, pct[99.0] / 1000, name)
        acc.add("usr_cpu", "%", case, job["usr_cpu"], name)
        acc.add("sys_cpu", "%", case, job["sys_cpu"], name)
        slat = fio_json(run.raw(name).read_text())["report"]["jobs"][0][_direction(case["rw"])].get("slat_ns") or {}
        if slat.get("N", 0) > 0 and slat.get("mean", 0) > 0:
            acc.add("slat_mean", "us", case, slat["mean"] / 1000, name)
        pid_out = run.raw(f"{name}.pidstat")
        if pid_out.exists():
            means = fio_process_means(pidstat_lines(pid_out.read_text()))
            if means:
                acc.add("cpu_pct", "%", {**case, "process": "busiest"}, means["busiest_cpu"], name)
                acc.add("cpu_pct", "%", {**case, "process": "all"}, means["all_cpu"], name)
                acc.add("rss", "MiB", {**case, "process": "busiest"}, means["busiest_rss_mib"], name)
        counts = _perf_counts(run, name)
        if counts:
            for metric, value in counts.items():
                acc.add(metric, "requests" if metric != "bio_queue" else "bios", {**case, "phase": "job"}, value, name)
            if "rq_complete" in counts:
                acc.add("completions_per_gib", "requests/GiB", case, counts["rq_complete"] / (d["io_bytes"] / GIB), name)
                acc.add("requests_per_io", "requests/I/O", case, counts["rq_complete"] / d["total_ios"], name)
        io_out = run.raw(f"{name}.iostat")
        if disk and io_out.exists():
            # The first interval began before fio did (iostat starts first; perf and fio
            # need a moment to start): only the intervals after it are all job.
            means, n = device_means(iostat_json(io_out.read_text()), disk, skip=1)
            if n:
                r = "r" if _direction(case["rw"]) == "read" else "w"
                acc.add("util", "%", case, means["util"], name)
                acc.add("aqu_sz", "requests", case, means["aqu-sz"], name)
                acc.add("await", "ms", case, means[f"{r}_await"], name)
                acc.add("areq_sz", "KiB", case, means[f"{r}areq-sz"], name)
                acc.add("device_rps", "requests/s", case, means[f"{r}/s"], name)

    # sync after a buffered write job: the block requests the job left behind.
    for s in run.steps:
        name = s["name"]
        if s["status"] != "ok" or not name.endswith(".sync"):
            continue
        job_name = name[: -len(".sync")]
        counts = _perf_counts(run, name)
        if counts and job_name in job_cases:
            job_counts = _perf_counts(run, job_name) or {}
            for metric, value in counts.items():
                unit = "requests" if metric != "bio_queue" else "bios"
                acc.add(metric, unit, {**job_cases[job_name], "phase": "sync"}, value, name)
                if metric in job_counts:
                    acc.add(metric, unit, {**job_cases[job_name], "phase": "job+sync"}, job_counts[metric] + value, name)

    # Layout: blocks allocated to the file when made and after the random-write job.
    for s in run.steps:
        name = s["name"]
        if s["status"] != "ok" or s["group"] != "layout" or not name.endswith((".before", ".after")):
            continue
        size, blocks, unit = (int(x) for x in run.raw(name).read_text().split())
        job_name, when = name.rsplit(".", 1)
        parts = _REP.sub("", job_name).split(".")
        case = {"experiment": "layout", "layout": parts[1], "fsync": int(parts[3].removeprefix("fsync")),
                "when": "made" if when == "before" else "after randwrite", "fs": fs}
        acc.add("allocated", "MiB", case, blocks * unit / MIB, name)
        if when == "before":
            acc.add("file_size", "MiB", {k: v for k, v in case.items() if k != "when"}, size / MIB, name)

    # strace -c -f of fio: system calls by name.
    for s in run.steps:
        name = s["name"]
        if s["status"] != "ok" or not name.startswith("original.strace."):
            continue
        job = fio_job(run.raw(name).read_text())
        untraced = {**s, "name": name.replace(".strace", "", 1)}  # the step name _case expects
        # Its own experiment, so that no selector of the untraced jobs pools these samples.
        case = {**_case(untraced, job["options"], fs), "experiment": "original strace"}
        summary = strace_summary(run.raw(name, "err").read_text())
        for sc, row in summary["syscalls"].items():
            if sc in STRACE_SYSCALLS:
                acc.add("strace_calls", "calls", {**case, "syscall": sc}, row["calls"], name)
            if sc in ORIGINAL_STRACE:
                acc.add("strace_usecs", "us/call", {**case, "syscall": sc}, row["usecs_per_call"], name)
        acc.add("iops", "IOPS", case, job["write"]["iops"], name)
    for s in run.steps:
        name = s["name"]
        if s["status"] != "ok" or s["group"] != "strace":
            continue
        engine = name.split(".", 1)[1]
        summary = strace_summary(run.raw(name, "err").read_text())
        for sc, row in summary["syscalls"].items():
            if sc in STRACE_SYSCALLS:
                acc.add("strace_calls", "calls", {"experiment": "strace", "engine": engine, "syscall": sc}, row["calls"], name)
        acc.add("strace_calls", "calls", {"experiment": "strace", "engine": engine, "syscall": "total"},
                summary["total"]["calls"], name)
        job = fio_job(run.raw(name).read_text())
        acc.add("iops", "IOPS", {"experiment": "strace", "engine": engine, "traced": "strace -c -f", "fs": fs},
                job["read"]["iops"], name)
    acc.flush(run)
