"""fio_engines lab: raw outputs → measurements (called by ``labkit record``).

Sources, one per kind of number:

- fio's JSON report (``raw/<step>.out``): ``iops`` (IOPS), ``bandwidth`` (MiB/s, fio's
  ``bw_bytes`` / 2^20), ``clat_p50``/``clat_p99`` (µs, fio's ``clat_ns`` percentiles /
  1000), ``usr_cpu``/``sys_cpu`` (% of one CPU, as fio reports them) and ``job_cpu``
  (their sum: the CPU time of the job's own process over its run time, what htop shows on
  that process's line), ``slat_mean`` (µs, fio's mean submission latency, only for engines
  that submit apart from completing: libaio, io_uring; fio gives no percentiles of it by
  default);
- ``perf stat -x,`` (``raw/<step>.perf``): ``rq_issue``, ``rq_complete``, ``bio_queue``
  (counts of the block tracepoints during the step, case ``phase`` = ``job`` or ``sync``,
  and ``job+sync``: the job's count plus that of the ``sync`` after it, same repetition),
  and derived from them with fio's byte and I/O counts: ``completions_per_gib``
  (rq_complete per GiB fio moved) and ``requests_per_io`` (rq_complete per fio I/O); and
  ``bios_per_request`` (bio_queue ÷ rq_issue: the bios the block layer received per request it
  issued to the device, 1 when none merged into another's request: the merges iostat counts
  as rrqm/s and wrqm/s, over the job's exact window);
- ``iostat -x -y -o JSON 1`` (``raw/<step>.iostat.out``): per job the mean of its
  one-second intervals after the first (which includes the job's start-up; a job of
  1 s, as in quick mode, leaves none): ``util`` (%), ``aqu_sz`` (requests), ``await`` (ms, r_await or
  w_await), ``areq_sz`` (KiB, rareq-sz or wareq-sz), ``device_rps`` (r/s or w/s), ``rqm``
  (rrqm/s or wrqm/s: requests merged into another per second); and, over every interval
  (a ratio of two counts of the same intervals, so the start-up does not bias it),
  ``ios_per_request``: (r/s + rrqm/s) ÷ r/s summed over the intervals (w for writes), the
  requests the block layer made (one per bio: per fio I/O for 4 KiB direct I/O) per request
  the device completed after merging, 1 when nothing merges;
- ``stat -c '%s %b %B'`` (layout steps): ``allocated`` (MiB of blocks allocated to the file);
- ``grep -H . /sys/class/block/DISK/queue/...`` (setup, tool ``sysfs``): ``max_sectors_kb``,
  ``max_segments``, ``nr_requests`` of the target disk, one sample each, the disk's I/O
  scheduler (the bracketed name) in their case as ``scheduler``;
- ``labkit flame`` (profile group, tool ``inferno``): the buffered job's flame graph and folded
  stacks, as artifacts;
- ``strace -c -f`` (strace steps, table on standard error): ``strace_calls`` per system call,
  and for the original group's steps (experiment ``original strace``) ``strace_usecs``
  (strace's ``usecs/call``: system CPU time per call, which is what ``-c`` measures without
  ``-w``) and the traced job's ``iops``, and the same for experiment ``strace threads`` (the
  1 KiB job with fio's ``--thread``: its job a thread of fio's main process, not a child); for
  experiment ``strace clock`` (profile group, case
  ``clock`` = ``system`` for ``strace -c``, ``wall`` for ``strace -c -w``) ``strace_usecs`` of
  every listed call; for all three, ``strace_seconds`` (the table's seconds column: a call's total
  system CPU time, or with ``-w`` its total wall-clock time) and ``job_system_seconds`` (fio's
  ``sys_cpu`` share times its ``job_runtime``: the system CPU time of the job itself, from its own
  ``getrusage``);
- ``pidstat -u -r -h -H -l -C 'aux-path=SCRATCH ' 1`` (original group,
  ``raw/<step>.pidstat.out``; the job's fio processes, found by their command line): per job
  ``cpu_pct`` (%CPU, % of one CPU) of the busiest fio process (case ``process`` =
  ``busiest``: the job's own process) and summed over every fio process (``all``), and
  ``rss`` (MiB) of the busiest one; means of the 1-s intervals after each process's first
  (its first interval holds its start-up). pidstat leaves out a process with nothing to
  report in an interval, and a process that has exited.

Every case comes from the step's own case (``lab_run --case``, ``step["case"]``): its
``tool`` (fio, sync, stat, strace) says which output it is, ``rep`` which repetition (not
part of a measurement's case: the repetitions of one case are its samples, kept in run
order), the rest is the measurement's case, plus the scratch filesystem (``fs``, from the
run's ``target.txt``). A fio job's case is checked against fio's own report of the options
it ran with (after ``${VAR}`` substitution). No step name is parsed.
"""

from __future__ import annotations

import re

from labkit.parsers.fio import fio_job, fio_json
from labkit.parsers.iostat import device_means, iostat_json
from labkit.parsers.jsonline import ParseError
from labkit.parsers.perf import perf_stat_csv
from labkit.parsers.strace import strace_summary

GIB = 2**30
MIB = 2**20
PERF_METRICS = {"block:block_rq_issue": "rq_issue", "block:block_rq_complete": "rq_complete",
                "block:block_bio_queue": "bio_queue"}
STRACE_SYSCALLS = ("pread64", "pwrite64", "io_submit", "io_getevents", "io_uring_enter", "nanosleep",
                   "clock_nanosleep", "pselect6", "wait4", "shmat", "shmdt", "shmget", "futex")
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


# Case key → how fio's report (its options, as strings) must agree with it.
_FIO_OPTION = {
    "engine": lambda v, o: o.get("ioengine") == v,
    "iodepth": lambda v, o: int(o.get("iodepth", "1")) == v,
    "rw": lambda v, o: o.get("rw") == v,
    "bs": lambda v, o: fio_size(o.get("bs", "4k")) == v,
    "io": lambda v, o: (o.get("direct", "0") == "1") == (v == "direct"),
    "mode": lambda v, o: ((o.get("direct", "0") == "1") == (v == "direct")
                          and (o.get("invalidate", "1") == "0") == (v == "buffered warm")),
    "fsync": lambda v, o: int(o.get("fsync", "0")) == v,
    "numjobs": lambda v, o: int(o.get("numjobs", "1")) == v,
    # fio reports iodepth_batch_submit by its alias iodepth_batch
    "batch": lambda v, o: (int(o.get("iodepth_batch_submit", o.get("iodepth_batch", "1"))) == v
                           and int(o.get("iodepth_batch_complete_min", "1")) == v),
    "end_fsync": lambda v, o: int(o.get("end_fsync", "0")) == v,
}
QUEUE_LIMITS = {"max_sectors_kb": "KiB", "max_segments": "segments", "nr_requests": "requests"}


def queue_sysfs(text: str) -> dict:
    """``grep -H . /sys/class/block/DISK/queue/{scheduler,max_sectors_kb,...}`` → ``{"disk":
    DISK, "scheduler": the bracketed one (``none`` if the queue has none to choose),
    "max_sectors_kb": int, ...}`` for the files listed.

    Raises:
        ValueError: a line that is not ``/sys/class/block/DISK/queue/FILE:VALUE``, or one
            whose value is not the file's kind.
    """
    out: dict = {}
    for line in text.splitlines():
        m = re.fullmatch(r"/sys/class/block/([^/]+)/queue/(\w+):(.*)", line.strip())
        if not m:
            raise ValueError(f"queue sysfs: unexpected line {line!r}")
        out["disk"] = m.group(1)
        name, value = m.group(2), m.group(3).strip()
        if name == "scheduler":
            chosen = re.search(r"\[([^\]]+)\]", value)
            out[name] = chosen.group(1) if chosen else value
        elif name in QUEUE_LIMITS:
            out[name] = int(value)
    return out


def _measured(case: dict, fs: str) -> dict:
    """A step's case (``lab_run --case``) → the case of its measurements: without ``tool``
    and ``rep`` (the repetitions of one case are the samples of one measurement), with the
    scratch filesystem ``fs``."""
    return {**{k: v for k, v in case.items() if k not in ("tool", "rep")}, "fs": fs}


def check_fio_case(name: str, case: dict, opts: dict) -> None:
    """Check a fio step's case against the options fio reports it ran with (``opts``: fio's
    ``global options`` merged with its ``job options``, strings, after ``${VAR}``
    substitution). Keys fio has no option for (experiment, layout, rep, tool, ...) pass.

    Raises:
        ValueError: naming the step, when a case value and fio's option disagree.
    """
    for key, agrees in _FIO_OPTION.items():
        if key in case and not agrees(case[key], opts):
            raise ValueError(f"{name}: its case says {key}={case[key]!r}, fio ran with {opts}")


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


def _fio_step(run, s: dict, case: dict, disk: str) -> dict:
    """Measurements of one fio job step (``case``: its measurement case); returns its perf
    counts ({} without perf)."""
    name = s["name"]
    text = run.raw(name).read_text()
    job = fio_job(text)
    check_fio_case(name, s["case"], job["options"])
    direction = _direction(case["rw"])
    d = job[direction]
    if d is None:
        raise ValueError(f"{name}: fio moved no bytes in the {direction} direction")
    run.add_sample("iops", "IOPS", case, d["iops"], name)
    run.add_sample("bandwidth", "MiB/s", case, d["bw_bytes"] / MIB, name)
    pct = d["clat_ns"]["percentiles"]
    if 50.0 in pct and 99.0 in pct:
        run.add_sample("clat_p50", "us", case, pct[50.0] / 1000, name)
        run.add_sample("clat_p99", "us", case, pct[99.0] / 1000, name)
    run.add_sample("usr_cpu", "%", case, job["usr_cpu"], name)
    run.add_sample("sys_cpu", "%", case, job["sys_cpu"], name)
    run.add_sample("job_cpu", "%", case, job["usr_cpu"] + job["sys_cpu"], name)
    slat = fio_json(text)["report"]["jobs"][0][direction].get("slat_ns") or {}
    if slat.get("N", 0) > 0 and slat.get("mean", 0) > 0:
        run.add_sample("slat_mean", "us", case, slat["mean"] / 1000, name)
    pid_out = run.raw(f"{name}.pidstat")
    if pid_out.exists():
        means = fio_process_means(pidstat_lines(pid_out.read_text()))
        if means:
            run.add_sample("cpu_pct", "%", {**case, "process": "busiest"}, means["busiest_cpu"], name)
            run.add_sample("cpu_pct", "%", {**case, "process": "all"}, means["all_cpu"], name)
            run.add_sample("rss", "MiB", {**case, "process": "busiest"}, means["busiest_rss_mib"], name)
    counts = _perf_counts(run, name) or {}
    for metric, value in counts.items():
        run.add_sample(metric, "requests" if metric != "bio_queue" else "bios", {**case, "phase": "job"}, value, name)
    if "rq_complete" in counts:
        run.add_sample("completions_per_gib", "requests/GiB", case, counts["rq_complete"] / (d["io_bytes"] / GIB), name)
        run.add_sample("requests_per_io", "requests/I/O", case, counts["rq_complete"] / d["total_ios"], name)
    if counts.get("rq_issue") and "bio_queue" in counts:
        run.add_sample("bios_per_request", "bios/request", case, counts["bio_queue"] / counts["rq_issue"], name)
    io_out = run.raw(f"{name}.iostat")
    if disk and io_out.exists():
        parsed = iostat_json(io_out.read_text())
        r = "r" if direction == "read" else "w"
        merged = ios_per_request(parsed, disk, r)
        if merged is not None:
            run.add_sample("ios_per_request", "I/Os/request", case, merged, name)
        # The first interval began before fio did (iostat starts first; perf and fio
        # need a moment to start): only the intervals after it are all job.
        means, n = device_means(parsed, disk, skip=1)
        if n:
            run.add_sample("util", "%", case, means["util"], name)
            run.add_sample("aqu_sz", "requests", case, means["aqu-sz"], name)
            run.add_sample("await", "ms", case, means[f"{r}_await"], name)
            run.add_sample("areq_sz", "KiB", case, means[f"{r}areq-sz"], name)
            run.add_sample("device_rps", "requests/s", case, means[f"{r}/s"], name)
            run.add_sample("rqm", "requests/s", case, means[f"{r}rqm/s"], name)
    return counts


def ios_per_request(parsed: dict, device: str, r: str) -> float | None:
    """I/Os per completed request on ``device`` over every interval of an iostat report
    (``iostat_json``): (Σ ``r/s`` + Σ ``rrqm/s``) ÷ Σ ``r/s`` for ``r`` = ``"r"``, likewise
    ``w/s`` and ``wrqm/s`` for ``"w"``. Every interval is one second long, so the sums are
    counts: requests completed, and requests merged into another before it was sent
    (iostat(1): rrqm/s, wrqm/s; the kernel's diskstats merge counts, one per bio merged).
    1.0 when nothing merged; None when no request completed. Device-wide: other I/O on the
    device in those seconds counts too.

    Raises:
        ParseError: ``device`` is missing from an interval (as ``device_means``).
    """
    done = merged = 0.0
    for i, interval in enumerate(parsed["intervals"]):
        if device not in interval["disks"]:
            raise ParseError(f"iostat interval {i} has no device {device!r} (has {sorted(interval['disks'])})")
        done += interval["disks"][device][f"{r}/s"]
        merged += interval["disks"][device][f"{r}rqm/s"]
    return (done + merged) / done if done > 0 else None


def collect(run) -> None:
    """Parse every fio, perf, iostat, pidstat, stat and strace output of ``run`` into
    measurements. Which output a step holds and what it measured come from its case
    (``step["case"]``); a step without a case (making a file, the page-cache warm-up, a
    probe) measures nothing."""
    target = _target(run)
    fs = target.get("fs", "unknown")
    disk = target.get("disk", "")
    ok = [s for s in run.steps if s["status"] == "ok" and s.get("case")]

    # The flame graph of the buffered job (profile group): an artifact, no measurement.
    for s in ok:
        if s["case"].get("tool") == "inferno":
            art = {k: v for k, v in s["case"].items() if k != "tool"}
            run.artifact("flamegraph", art, "flame-buffered.svg",
                         "fio, buffered 4 KiB sequential writes (libaio, iodepth 1, no flush): fio's processes")
            run.artifact("folded", art, "flame-buffered.folded", "folded stacks of the buffered job")
    jobs: dict[tuple, tuple[dict, dict]] = {}   # a job's step case less tool → (measurement case, perf counts)

    for s in ok:
        if s["case"].get("tool") == "fio":
            case = _measured(s["case"], fs)
            counts = _fio_step(run, s, case, disk)
            jobs[_key(s["case"])] = (case, counts)

    # sync after a buffered write job (same case, tool=sync): the block requests the job left behind.
    for s in ok:
        if s["case"].get("tool") != "sync" or _key(s["case"]) not in jobs:
            continue
        job_case, job_counts = jobs[_key(s["case"])]
        for metric, value in (_perf_counts(run, s["name"]) or {}).items():
            unit = "requests" if metric != "bio_queue" else "bios"
            run.add_sample(metric, unit, {**job_case, "phase": "sync"}, value, s["name"])
            if metric in job_counts:
                run.add_sample(metric, unit, {**job_case, "phase": "job+sync"}, job_counts[metric] + value, s["name"])

    # Layout: blocks allocated to the file when made and after the random-write job.
    for s in ok:
        if s["case"].get("tool") != "stat":
            continue
        size, blocks, unit = (int(x) for x in run.raw(s["name"]).read_text().split())
        case = _measured(s["case"], fs)
        run.add_sample("allocated", "MiB", case, blocks * unit / MIB, s["name"])
        if case["when"] == "made":
            run.add_sample("file_size", "MiB", {k: v for k, v in case.items() if k != "when"}, size / MIB, s["name"])

    # The target disk's scheduler and queue limits (setup group): one sample each, the
    # scheduler's name in their case.
    for s in ok:
        if s["case"].get("tool") != "sysfs":
            continue
        q = queue_sysfs(run.raw(s["name"]).read_text())
        case = {**_measured(s["case"], fs), "scheduler": q.get("scheduler", "unknown")}
        for metric, unit in QUEUE_LIMITS.items():
            if metric in q:
                run.add_sample(metric, unit, case, q[metric], s["name"])

    # strace -c -f of fio: system calls by name, and the traced job's IOPS.
    for s in ok:
        if s["case"].get("tool") != "strace":
            continue
        name, experiment = s["name"], s["case"]["experiment"]
        job = fio_job(run.raw(name).read_text())
        check_fio_case(name, s["case"], job["options"])
        summary = strace_summary(run.raw(name, "err").read_text())
        if experiment in ("original strace", "strace threads", "strace clock"):
            # Their own experiments, so that no selector of the untraced jobs pools these
            # samples. "strace threads": the original's 1 KiB job run with fio --thread.
            # "strace clock": strace -c (clock=system) beside strace -c -w (wall).
            # strace_seconds: the table's seconds column, the call's total (system CPU time
            # without -w, wall-clock time with it).
            case = _measured(s["case"], fs)
            usecs = STRACE_SYSCALLS if experiment == "strace clock" else ORIGINAL_STRACE
            for sc, row in summary["syscalls"].items():
                if sc in STRACE_SYSCALLS:
                    run.add_sample("strace_calls", "calls", {**case, "syscall": sc}, row["calls"], name)
                    run.add_sample("strace_seconds", "s", {**case, "syscall": sc}, row["seconds"], name)
                if sc in usecs:
                    run.add_sample("strace_usecs", "us/call", {**case, "syscall": sc}, row["usecs_per_call"], name)
            run.add_sample("iops", "IOPS", case, job[_direction(case["rw"])]["iops"], name)
            run.add_sample("job_system_seconds", "s", case, job["sys_cpu"] / 100 * job["job_runtime_ms"] / 1000, name)
        else:
            engine = s["case"]["engine"]
            for sc, row in summary["syscalls"].items():
                if sc in STRACE_SYSCALLS:
                    run.add_sample("strace_calls", "calls", {"experiment": experiment, "engine": engine, "syscall": sc},
                            row["calls"], name)
            run.add_sample("strace_calls", "calls", {"experiment": experiment, "engine": engine, "syscall": "total"},
                    summary["total"]["calls"], name)
            run.add_sample("iops", "IOPS", {"experiment": experiment, "engine": engine, "traced": "strace -c -f", "fs": fs},
                    job[_direction(s["case"]["rw"])]["iops"], name)


def _key(case: dict) -> tuple:
    """A step's case less its ``tool``: what a job and the sync after it share."""
    return tuple(sorted((k, v) for k, v in case.items() if k != "tool"))
