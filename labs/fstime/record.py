"""fstime lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Metrics:

``score`` (KiB/s)
    fstime's score per phase (``phase`` write, read, copy: the JSON lines of
    ``labs/fstime/fstime.c``; write and read are UnixBench's 2 s priming phases of ``-c``)
    and dd's copy rate (bytes / 1024 / seconds from its summary; ``tool = "dd"``).
    One sample per repetition. Cases (from each step's own case): ``experiment`` (copy, audit, dd), ``tool``,
    ``target`` (disk, tmpfs, ext4-on-tmpfs, xfs-on-tmpfs, xfs-on-disk), ``fs`` (the
    filesystem type findmnt reported), ``bufsize`` and ``max_blocks`` (fstime -b, -m),
    ``phase``, and for the audit steps ``audit`` (off, norules, nomatch, every; the
    suppression loop: contexts, task-never).
``pair_time`` (µs)
    The time of one read + write pair of the copy, from the same samples. fstime's copy loop
    reads ``bufsize`` bytes and writes them, one ``read`` and one ``write`` call a pair, and
    its score counts the bytes written: pairs per second = score · 1024 ÷ bufsize, so a
    pair takes bufsize ÷ (score · 1024) s (every ``max_blocks`` pairs it also rewinds both
    files: one short read and two ``lseek`` calls, under 0.2 % of the pairs). For every fstime
    copy phase (``phase`` copy: each target and buffer size of the copy group, each state of
    the audit group) and the audit group's system-call loop (``experiment`` suppress: dd bs=1
    from /dev/zero to /dev/null, one read and one write a byte: µs = seconds · 10⁶ ÷ bytes).
    Case: the score's, with ``audit`` the state.
``cpu_share`` (fraction)
    From two /proc/stat + /proc/<pid>/stat readings inside one copy phase: per CPU
    (``who`` = cpu0, cpu1, ...) the share of its time per ``mode`` (user, system, iowait,
    steal, idle), and for ``who = "fstime"`` its user and system time as a share of one CPU.
``cpu_ticks`` (ticks)
    The same readings in clock ticks (USER_HZ): ``who = "fstime"``, ``mode = "busy"``: its
    user + system ticks; ``who = "clock"``, ``mode = "elapsed"``: the wall-clock ticks between
    the readings; ``who = "all"``, ``mode = "iowait"``: the I/O-wait ticks of every CPU
    together. "One CPU at 100 %, no I/O wait" compares busy and iowait with elapsed.
``device_io`` (KiB/s) and ``device_ios`` (I/Os per second)
    What the block device under the cpu group's filesystem did (``device``:
    its /proc/diskstats name, e.g. vda) during the same copy phase, from two diskstats lines
    (:func:`diskstats_rates`) a step's duration apart: ``direction`` read or write (sectors of
    512 bytes; I/Os completed). Case: ``experiment`` cpu, ``target``, ``fs``, ``device``,
    ``direction``.
``kernel_sample_share`` (fraction)
    Of the perf samples of a copy phase, those whose innermost frame is in the kernel.
``audit_sample_share`` (fraction)
    Of the same samples, those with a kernel audit function (``audit_*``, ``__audit_*``)
    on the stack: audit's own cost, nonzero once audit has been enabled since boot.
``syscalls`` (calls)
    ``strace -c`` calls per system call during D seconds of one copy phase (strace attached, then stopped with SIGINT).
``audit_log`` (bytes)
    Bytes in the lab's auditd directory after the audit steps (log files, rotated at 8 MiB).
"""

from __future__ import annotations

from collections import defaultdict

from labkit.parsers.dd import dd_summary
from labkit.parsers.jsonline import json_lines
from labkit.parsers.perf import share_under
from labkit.parsers.procstat import cpu_shares, elapsed_ticks, process_shares, snapshots
from labkit.parsers.strace import strace_summary


def _targets(run) -> dict[str, dict]:
    """targets.tsv (name, dir, fstype, source, backing) → name → fields."""
    path = run.dir / "targets.tsv"
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                name, d, fstype, source, backing = (line.split("\t") + [""] * 5)[:5]
                out[name] = {"dir": d, "fs": fstype, "source": source, "backing": backing}
    return out


def _leaf_in_kernel(folded_text: str) -> tuple[int, int]:
    """(samples whose innermost frame is a kernel function, all samples) of folded stacks
    made by ``inferno-collapse-perf --all`` (kernel frames end in ``_[k]``)."""
    kernel = total = 0
    for line in folded_text.splitlines():
        if not line.strip():
            continue
        stack, count = line.rsplit(" ", 1)
        n = int(count)
        total += n
        if stack.rsplit(";", 1)[-1].endswith("_[k]"):
            kernel += n
    return kernel, total


def pair_us(bufsize: int, score_kibps: float) -> float:
    """µs per read + write pair of fstime's copy loop from its score (KiB/s) and buffer size
    (bytes): the loop writes ``bufsize`` bytes a pair, so it runs score · 1024 ÷ bufsize pairs
    a second (see ``pair_time`` above)."""
    return bufsize / (score_kibps * 1024) * 1e6


def iowait_ticks(before, after) -> dict[str, int]:
    """Per CPU (``cpu0``, ``cpu1``, ...), its I/O-wait ticks between two /proc/stat snapshots
    (the fifth value of its line, proc(5))."""
    return {cpu: after.cpus[cpu][4] - b[4] for cpu, b in before.cpus.items()
            if cpu != "cpu" and cpu in after.cpus and len(b) > 4 and len(after.cpus[cpu]) > 4}


def diskstats_rates(text: str, seconds: float) -> dict[str, dict[str, float]]:
    """From the first and last line of one device in /proc/diskstats (Documentation/admin-guide/
    iostats.rst: after major, minor and name, field 1 reads completed, 3 sectors read, 5 writes
    completed, 7 sectors written; a sector is 512 bytes) taken ``seconds`` apart: per direction
    ``{"kib_per_s", "ios_per_s"}``.

    Raises:
        ValueError: fewer than two lines, or lines of two devices.
    """
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0][2] != lines[-1][2] or seconds <= 0:
        raise ValueError(f"diskstats: need two lines of one device and a duration, got {text!r}")
    a, b = [int(x) for x in lines[0][3:10]], [int(x) for x in lines[-1][3:10]]
    d = [y - x for x, y in zip(a, b)]
    return {"read": {"kib_per_s": d[2] * 512 / 1024 / seconds, "ios_per_s": d[0] / seconds},
            "write": {"kib_per_s": d[6] * 512 / 1024 / seconds, "ios_per_s": d[4] / seconds}}


def collect(run) -> None:
    """Parse every fstime, dd, /proc/stat, perf and strace step of ``run``. Each step's case
    comes from its record (``lab_run --case``); no step name is parsed."""
    targets = _targets(run)

    def fs_of(target: str) -> str:
        return targets.get(target, {}).get("fs") or "unknown"

    # fstime runs (experiment copy or audit): one JSON line per phase.
    samples: dict[tuple, list[float]] = defaultdict(list)
    first_step: dict[tuple, str] = {}
    for s in run.steps:
        case = s.get("case") or {}
        if s["status"] != "ok" or case.get("tool") not in ("fstime", "dd") or case.get("experiment") == "suppress":
            continue
        base = {k: v for k, v in case.items() if k not in ("rep", "max_blocks")}
        if case["tool"] == "fstime":
            for rec in json_lines(run.raw(s["name"]).read_text(), "fstime"):
                key = tuple(sorted({**base, "bufsize": rec["bufsize"], "max_blocks": rec["max_blocks"],
                                    "phase": rec["phase"]}.items()))
                samples[key].append(rec["score_kibps"])
                first_step.setdefault(key, s["name"])
        else:
            d = dd_summary(run.raw(s["name"], "err").read_text())
            key = tuple(sorted({**base, "phase": "copy"}.items()))
            samples[key].append(d["bytes"] / 1024 / d["seconds"])
            first_step.setdefault(key, s["name"])

    for key, values in samples.items():
        run.add("score", "KiB/s", dict(key), values, first_step[key])

    # Every fstime copy, and the audit group's system-call loop, as the time of one read + write pair.
    for key, values in samples.items():
        case = dict(key)
        if case.get("phase") == "copy" and case.get("tool") == "fstime":
            run.add("pair_time", "µs", case, [pair_us(case["bufsize"], v) for v in values], first_step[key])
    suppress: dict[tuple, list[float]] = defaultdict(list)
    for s in run.steps:
        case = s.get("case") or {}
        if s["status"] == "ok" and case.get("experiment") == "suppress" and case.get("tool") == "dd":
            d = dd_summary(run.raw(s["name"], "err").read_text())
            key = tuple(sorted({**{k: v for k, v in case.items() if k != "rep"}, "phase": "copy"}.items()))
            suppress[key].append(d["seconds"] * 1e6 / d["bytes"])
            first_step.setdefault(key, s["name"])
    for key, values in suppress.items():
        run.add("pair_time", "µs", dict(key), values, first_step[key])

    # What htop would show: two readings inside one copy phase, once per repetition.
    per_cpu: dict[tuple, list[float]] = defaultdict(list)
    ticks: dict[tuple, list[float]] = defaultdict(list)
    cpu_step: dict[tuple, str] = {}
    for s in run.steps:
        case = s.get("case") or {}
        if s["status"] != "ok" or case.get("tool") != "proc-stat":
            continue
        snaps = snapshots(run.raw(s["name"]).read_text())
        before, after = snaps[0], snaps[-1]
        where = {"experiment": "cpu", "target": case["target"], "fs": case["fs"]}
        for cpu, shares in sorted(cpu_shares(before, after).items()):
            if cpu == "all":
                continue
            for mode, v in shares.items():
                key = tuple(sorted({**where, "who": cpu, "mode": mode}.items()))
                per_cpu[key].append(v)
                cpu_step.setdefault(key, s["name"])
        p = process_shares(before, after, int(case["pid"]))
        for mode in ("user", "system"):
            key = tuple(sorted({**where, "who": "fstime", "mode": mode}.items()))
            per_cpu[key].append(p[mode])
            cpu_step.setdefault(key, s["name"])
        wall = elapsed_ticks(before, after)
        for who, mode, v in (("fstime", "busy", p["cpu"] * wall), ("clock", "elapsed", wall),
                             ("all", "iowait", sum(iowait_ticks(before, after).values()))):
            key = tuple(sorted({**where, "who": who, "mode": mode}.items()))
            ticks[key].append(v)
            cpu_step.setdefault(("ticks", key), s["name"])
    # What the device under that filesystem did in the same copy phases (iostat's counters).
    for s in run.steps_where(tool="diskstats", by_rep=True):
        case = s["case"]
        rates = diskstats_rates(run.raw(s["name"]).read_text(), s["seconds"])
        for direction, r in rates.items():
            where = {"experiment": "cpu", "target": case["target"], "fs": case["fs"], "device": case["device"],
                     "direction": direction}
            run.add_sample("device_io", "KiB/s", where, r["kib_per_s"], s["name"])
            run.add_sample("device_ios", "I/Os/s", where, r["ios_per_s"], s["name"])
    for key, values in per_cpu.items():
        run.add("cpu_share", "fraction", dict(key), values, cpu_step[key])
    for key, values in ticks.items():
        run.add("cpu_ticks", "ticks", dict(key), values, cpu_step[("ticks", key)])

    # perf: flame graphs per target, the differential one, kernel share of samples.
    for s in run.steps:
        case = s.get("case") or {}
        if s["status"] != "ok" or case.get("tool") != "inferno":
            continue
        t = case["target"]
        case = {"target": t, "fs": case["fs"]}
        run.artifact("flamegraph", case, f"flame-{t}.svg", f"fstime copy phase on {t} ({fs_of(t)}), 1 KiB buffers")
        run.artifact("folded", case, f"flame-{t}.folded", f"folded stacks, copy phase on {t}")
        folded = (run.dir / f"flame-{t}.folded").read_text()
        kernel, total = _leaf_in_kernel(folded)
        if total:
            run.add("kernel_sample_share", "fraction", {"experiment": "perf", **case}, [kernel / total], s["name"])
            run.add("audit_sample_share", "fraction", {"experiment": "perf", **case},
                    [share_under(folded, ["audit_", "__audit_"])], s["name"])
    if run.ok("perf.diff"):
        run.artifact("diff_flamegraph", {"before": "tmpfs", "after": "xfs-on-tmpfs"}, "flame-diff.svg",
                     "differential flame graph: xfs image on tmpfs against tmpfs")
    if run.ok("perf.diff-negated"):
        # drawn on the tmpfs profile's stacks (inferno-diff-folded -n xfs tmpfs, --negate)
        run.artifact("diff_flamegraph", {"before": "tmpfs", "after": "xfs-on-tmpfs", "drawn_on": "tmpfs"},
                     "flame-diff-negated.svg", "differential flame graph drawn on tmpfs's stacks: what xfs does not run")

    # strace -c: calls per system call.
    if run.ok("strace"):
        summary = strace_summary(run.raw("strace", "err").read_text())
        target = run.step("strace")["case"]["target"]
        for name, row in summary["syscalls"].items():
            run.add("syscalls", "calls", {"experiment": "strace", "target": target, "syscall": name},
                    [row["calls"]], "strace")

    # How much the audit daemon wrote (du -b prints "<bytes>\t<dir>").
    if run.ok("audit.during.log"):
        lines = run.raw("audit.during.log").read_text().splitlines()
        if lines:  # du lists subdirectories first, the directory's total last
            run.add("audit_log", "bytes", {"experiment": "audit"}, [int(lines[-1].split()[0])], "audit.during.log")
