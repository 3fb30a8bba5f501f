"""nvme_swiotlb lab: raw outputs → measurements (called by ``labkit record``).

Every measuring step carries its case as data: ``lab_run --case KEY=VALUE`` on the host (the step
record's ``case``), and inside the guests ``guest_job.sh``'s steps, recorded by the same writer
in the guest's own run directory (read with :func:`labkit.record.read_steps`). Each step's ``tool`` says which parser reads it; ``rep``
(the repetition) orders samples and is not part of a measurement's case. No step name is parsed.

Metrics (every sample kept; one sample per repetition unless said otherwise, in repetition order):

``bandwidth`` (MB/s, 10^6 B/s as dd prints), from dd's summary line:
    ``experiment=dd``: ``target`` file|loop, ``io`` write|buffered|direct, ``cache`` cold|warm|-;
    ``experiment=read_ahead``: ``read_ahead_kb``, ``io``; ``experiment=scheduler``: ``scheduler``;
    ``experiment=nice``: ``nice`` (0 or -20).
``page_cache`` (bytes of the data file resident, fincore): ``after`` "direct read"|"buffered read".
``syscalls`` (calls) and ``time_per_call`` (µs), from ``strace -c -w``: ``io``, ``syscall``.
``accounted_time`` (s): ``io``, ``source`` "strace: read calls × time per call"|"dd: elapsed".
``read_latency`` (µs, every read(2) of the input that returned data, ``strace -T``): ``io``.
``read_latency_hist`` (calls per bin, one sample): ``io``, ``bin_us`` (upper edge, 4 bins per doubling).
``io_phase`` (µs, every request, tracefs events): ``phase`` service|wakeup|user.
``trace_events`` (events, one sample): ``event``.
``block_latency`` (µs, every I/O, btt -l/-q): ``phase`` D2C|Q2C, ``path`` blktrace|ftrace (the ftrace blk tracer).
``btt_avg`` (µs, one sample: btt's printed average) and ``btt_share`` (% of Q2C): ``phase``, ``path``.
``tracepoint_count`` (events during one direct read, perf stat -a, one sample per read): ``event``.
``ram_outside_dma_window`` (bytes, device tree hosts only).
``bounce_bandwidth`` (MB/s, bounce.c samples, direct and bounce alternating): ``target`` disk|tmpfs,
    ``block``, ``mode`` direct|bounce.
``bounce_slowdown`` (×, direct/bounce per sample pair): ``target``, ``block``, ``source``
    measured|copy-time model (1 + copy time per I/O / direct time per I/O).
``copy_time`` (µs per I/O, bounce mode): ``target``, ``block``.

Guest group (``experiment=guest``: an arm64 QEMU guest with an emulated NVMe drive, booted per
kernel × device tree (× boot-time knob); case keys ``guest_arch``, ``guest_kernel`` (uname -r and Debian version),
``kernel`` ("5.10" | "6.1": the series of the booted kernel's uname -r), ``dt`` ("plain" |
"dma-ranges" | "dma-ranges-wide", from the host step's case), ``accelerator`` ("tcg" | "kvm")):

``bandwidth`` (MB/s as dd prints, emulated): ``io`` direct|buffered (buffered after drop_caches);
    direct reads carry ``knob``: "none", or the boot-time knob of a boot whose case has
    ``boot_args`` ("threadirqs", "isolcpus").
``swiotlb_bounced`` (events per read, perf stat -a: only the NVMe drive is behind the PCIe host
    bridge) and ``rq_complete`` (the drive's block requests per read: block_rq_complete filtered on
    its dev_t): ``io``.
``read_events`` (the same two counts, per read, in repetition order, so that both events of one
    read pair by position): ``io``, ``event`` "swiotlb:swiotlb_bounced"|"block:block_rq_complete".
``swiotlb_pool`` (MiB: io_tlb_nslabs × 2 KiB slabs, debugfs) and ``swiotlb_used`` (slabs in use after the reads).
``alternating_bandwidth`` (MB/s, emulated; one sample per round of alternate.py): direct reads
    of the NVMe drive and of a control drive (a virtio disk outside the PCIe host bridge, same
    image), 1 MiB of each in alternation; ``io`` direct, ``drive`` nvme|control, ``knob`` as for
    ``bandwidth``, or, in the rounds of knobs (dma-ranges boots; one round per read, the knobs
    interleaved), a run-time knob the original tried ("read_ahead_kb", "scheduler", "nice",
    "transparent_hugepage", with its ``setting``) or "baseline" (the read without a knob that
    opens each round, ``setting`` "none").
    ``bandwidth_vs_control`` (×, per round): the drive's MB/s ÷ the control's in the same round:
    the emulator's speed, which drifts within a boot, cancels out.
``boot_time`` (s, one sample per boot): from QEMU's start to the guest's job starting (guest.json's
    ``boot_seconds``): about what a reader waits for the prompt of ``labkit guest shell``.
``boot_bandwidth`` (MB/s, emulated; one sample per boot, boots in run order): the median of the
    boot's direct dd reads; ``io`` direct, ``knob`` as for ``bandwidth``.
``boot_vs_control`` (×, one sample per boot): the median of the boot's ``bandwidth_vs_control``
    rounds (1b, not the rounds of run-time knobs); ``io`` direct, ``knob``. Each configuration
    boots several times (run.sh GUEST_BOOTS): the first boot gives every metric above, the
    others (host step case ``rep`` 2..) these two and ``boot_time`` only. Two boots of one
    configuration differ by more than the reads inside one boot do, so the claims that compare
    configurations read these, one value per boot.
``syscalls`` (calls) and ``time_per_call`` (µs) of read(2), strace -c -w of a direct read (under
    TCG ptrace's own stops dominate the time per call).
``read_time`` (µs, every read(2) of dd's input in direct reads, from the raw_syscalls sys_enter and
    sys_exit tracepoints; every repetition's calls pooled): ``io``.
``fgraph_swiotlb_calls`` (calls of swiotlb_* functions under one ksys_read of 1 MiB, function_graph).
``d2c`` and ``q2c`` (µs, every request of a direct read in 128 KiB requests, blktrace → btt),
    ``request_kib`` = 128; ``d2c_per_mib`` (µs/MiB: each request's D2C over its size).
``ram_outside_dma_window`` (bytes: the guest's RAM outside its PCIe DMA windows, from the device
    tree its kernel exported, decoded on the host by dt_dma_ranges.py; plain trees have no window).
Artifacts: folded stacks and a flame graph of every CPU during a direct read (perf record -g in the
guest, full runs, folded and drawn on the host with inferno, which has no Debian package).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import statistics
from pathlib import Path

from labkit.parsers.btt import btt_latencies, btt_summary
from labkit.parsers.dd import dd_summary
from labkit.parsers.ftrace import io_cycle, trace_events
from labkit.parsers.jsonline import json_lines
from labkit.parsers.perf import flamegraph, fold, perf_stat_csv
from labkit.parsers.strace import strace_summary
from labkit.parsers.strace_t import log_histogram, strace_calls
from labkit.record import read_steps, rep_order

# Case keys that say how a step was run, not what it measured.
_RUN_KEYS = ("tool", "rep")


def _measured(case: dict) -> dict:
    """The measurement's case: the step's case less the keys that only say how it was run."""
    return {k: v for k, v in case.items() if k not in _RUN_KEYS}


def _tool_steps(run, tool: str) -> list[tuple[dict, dict]]:
    """(case, step) of the ok host steps whose case has ``tool``, in repetition order."""
    return [(s["case"], s) for s in run.steps_where(tool=tool, by_rep=True)]


def _samples(run, metric: str, unit: str, items: list[tuple[dict, float, str]], emulation: dict | None = None) -> None:
    """One measurement per case of ``items`` ((case, value, step), in repetition order), through
    :meth:`labkit.record.Run.add_sample`, emitted before whatever the collector adds next."""
    for case, value, step in items:
        run.add_sample(metric, unit, case, value, step, emulation)
    run.flush_samples()


def _dd(run, name: str) -> dict:
    return dd_summary(run.raw(name, "err").read_text())


def _dd_steps(run) -> None:
    """Every dd step (``tool=dd``: the dd group and the tried group): its bandwidth."""
    for case, s in _tool_steps(run, "dd"):
        run.add_sample("bandwidth", "MB/s", _measured(case), _dd(run, s["name"])["mb_per_s"], s["name"])
    run.flush_samples()
    for case, s in _tool_steps(run, "fincore"):
        run.add_sample("page_cache", "bytes", _measured(case),
                       json.loads(run.raw(s["name"]).read_text())["fincore"][0]["res"], s["name"])
    run.flush_samples()


def _strace_group(run) -> None:
    calls, per_call, accounted = [], [], []   # (case, value, step) per metric, emitted in this order
    for case, s in _tool_steps(run, "strace-c"):
        name, io = s["name"], case["io"]
        summ = strace_summary(run.raw(name, "err").read_text())
        for sc in ("read", "write"):
            row = summ["syscalls"].get(sc)
            if row:
                calls.append(({"io": io, "syscall": sc}, row["calls"], name))
                per_call.append(({"io": io, "syscall": sc}, row["seconds"] / row["calls"] * 1e6, name))
        read = summ["syscalls"].get("read")
        if read:
            accounted.append(({"io": io, "source": "strace: read calls × time per call"}, read["seconds"], name))
            accounted.append(({"io": io, "source": "dd: elapsed"}, _dd(run, name)["seconds"], name))
    _samples(run, "syscalls", "calls", calls)
    _samples(run, "time_per_call", "us", per_call)
    _samples(run, "accounted_time", "s", accounted)
    for case, s in _tool_steps(run, "strace-T"):
        name, io = s["name"], case["io"]
        found = strace_calls(run.raw(name, "calls").read_text(), "read")
        lat = [c["seconds"] * 1e6 for c in found if c["first_arg"] == "0" and (c["ret"] or 0) > 0]
        if lat:
            run.add("read_latency", "us", {"io": io}, lat, name)
            for edge, count in log_histogram(lat, per_octave=4):
                run.add("read_latency_hist", "calls", {"io": io, "bin_us": edge}, [count], name)


def _events_group(run) -> None:
    for _, s in _tool_steps(run, "tracefs-events"):
        name = s["name"]
        events = trace_events(run.raw(name).read_text())
        pids = {e["pid"] for e in events if e["event"] == "block_rq_issue" and e["task"] == "dd"}
        counts: dict[str, int] = {}
        for e in events:
            counts[e["event"]] = counts.get(e["event"], 0) + 1
        for ev in ("block_rq_issue", "block_rq_complete", "sched_switch", "swiotlb_bounced"):
            run.add("trace_events", "events", {"event": ev}, [counts.get(ev, 0)], name)
        if len(pids) != 1:
            continue
        cyc = io_cycle(events, pids.pop())
        for phase in ("service", "wakeup", "user"):
            if cyc[phase]:
                run.add("io_phase", "us", {"phase": phase}, [x * 1e6 for x in cyc[phase]], name)


# Where btt writes the per-I/O latencies (btt -l and -q: <prefix>_<dev>_d2c.dat), as run.sh names them.
_BTT_FILES = (("D2C", "btt.d2c"), ("Q2C", "btt.q2c"))


def _btt_group(run) -> None:
    for case, s in _tool_steps(run, "btt"):
        name = s["name"]
        path = case["path"]  # the step's value: blktrace | ftrace (the ftrace blk tracer)
        summ = btt_summary(run.raw(name).read_text())
        for phase in ("Q2G", "G2I", "I2D", "D2C", "Q2C"):
            row = summ["all"].get(phase)
            if row:
                run.add("btt_avg", "us", {"phase": phase, "path": path}, [row["avg"] * 1e6], name)
        for dev, shares in summ["overhead"].items():
            for phase, pct in shares.items():
                run.add("btt_share", "%", {"phase": phase, "path": path, "dev": dev}, [pct], name)
        for phase, prefix in _BTT_FILES:
            files = sorted((run.dir / "raw").glob(f"{prefix}_*.dat"))
            lat = [x[1] * 1e6 for f in files for x in btt_latencies(f.read_text())]
            if lat:
                run.add("block_latency", "us", {"phase": phase, "path": path}, lat, name)


def _swiotlb_group(run) -> None:
    for _, s in _tool_steps(run, "perf-stat"):
        stat = perf_stat_csv(run.raw(s["name"], "csv").read_text())
        for ev in ("swiotlb:swiotlb_bounced", "block:block_rq_complete"):
            row = stat.get(ev)
            if row and row["counted"]:
                run.add_sample("tracepoint_count", "events", {"event": ev}, row["value"], s["name"])
    run.flush_samples()
    for case, s in _tool_steps(run, "dt_dma_ranges"):
        if case.get("experiment") == "guest":
            continue  # a guest's device tree: see _guest_group
        dt = json_lines(run.raw(s["name"]).read_text(), "dt_dma_ranges")[0]
        if dt.get("ram_outside_pci_windows") is not None:
            run.add("ram_outside_dma_window", "bytes", {}, [dt["ram_outside_pci_windows"]], s["name"])


def _bounce_group(run) -> None:
    for case, s in _tool_steps(run, "bounce"):
        step, target = s["name"], case["target"]
        rows = json_lines(run.raw(step).read_text(), "bounce")
        by = {(r["block"], r["mode"]): r for r in rows}
        for r in rows:
            run.add("bounce_bandwidth", "MB/s", {"target": target, "block": r["block"], "mode": r["mode"]}, r["samples"], step)
        for block in sorted({r["block"] for r in rows}):
            d, b = by.get((block, "direct")), by.get((block, "bounce"))
            if not d or not b:
                continue
            measured = [x / y for x, y in zip(d["samples"], b["samples"])]
            # Model: an I/O takes block/direct_bandwidth; bouncing adds the measured copy time.
            model = [1 + (c / 1e3) / (block / x) for x, c in zip(d["samples"], b["copy_ns_per_io"])]
            run.add("bounce_slowdown", "x", {"target": target, "block": block, "source": "measured"}, measured, step)
            run.add("bounce_slowdown", "x", {"target": target, "block": block, "source": "copy-time model"}, model, step)
            run.add("copy_time", "us", {"target": target, "block": block}, [c / 1e3 for c in b["copy_ns_per_io"]], step)


# Entries (calls) of swiotlb functions in a function_graph trace: "swiotlb_map() {" or "swiotlb_bounce();".
_FG_SWIOTLB = re.compile(r"\|\s*(swiotlb_\w+)\(\)\s*(?:\{|;)")


def fgraph_excerpt(trace: str, before: int = 4, after: int = 14) -> str:
    """The lines of a function_graph trace (tracefs ``trace``, funcgraph-tail) around the first DMA
    mapping of the read: the first swiotlb_* entry when there is one, else the first
    dma_direct_map_* entry (the mapping that did not bounce). Header lines are kept."""
    lines = trace.splitlines()
    head = [ln for ln in lines[:8] if ln.startswith("#")]
    for pattern in (_FG_SWIOTLB, re.compile(r"\|\s*dma_direct_map_\w+\(\)")):
        hit = next((i for i, ln in enumerate(lines) if pattern.search(ln)), None)
        if hit is not None:
            start = max(0, hit - before)
            return "\n".join(head + lines[start:hit + after]) + "\n"
    return "\n".join(head + ["(no DMA mapping function in this trace)"]) + "\n"


_SYSCALL = re.compile(r"^NR (\d+) (?:\((\w+),|= (-?\d+))")
ARM64_NR_READ = 63


def read_times(trace: str, nr: int = ARM64_NR_READ, fd: int = 0) -> list[float]:
    """Durations (µs) of the read(2) calls on ``fd`` that returned data, from an ftrace text trace of
    the raw_syscalls events: ``sys_enter: NR 63 (0, buf, count, ...)`` (arguments in hex) then
    ``sys_exit: NR 63 = bytes`` of the same task (include/trace/events/syscalls.h). ``nr``: the
    system call number of read (63 on arm64, the guests' architecture)."""
    open_: dict[int, float] = {}
    out = []
    for e in trace_events(trace):
        m = _SYSCALL.match(e["body"])
        if not m or int(m[1]) != nr:
            continue
        if e["event"] == "sys_enter" and m[2] is not None:
            if int(m[2], 16) == fd:
                open_[e["pid"]] = e["ts"]
        elif e["event"] == "sys_exit" and m[3] is not None and e["pid"] in open_:
            t0 = open_.pop(e["pid"])
            if int(m[3]) > 0:
                out.append((e["ts"] - t0) * 1e6)
    return out


def kernel_series(uname_r: str) -> str:
    """The kernel series ("5.10", "6.1") of a ``uname -r`` string such as ``5.10.0-32-arm64``."""
    return ".".join(uname_r.strip().split("-")[0].split(".")[:2])


def guest_steps(d: Path, types: dict[str, str]) -> list[tuple[str, dict]]:
    """(name, case) of the steps a guest ran that have a case and succeeded, in repetition order:
    ``d`` is the guest's run directory (guest_job.sh's steps, recorded by labkit/guest/step.sh
    with lab.sh's writer: ``steps.tsv``, ``raw/``), read as a host run's
    (:func:`labkit.record.read_steps`, cases typed as lab.toml's ``[case]`` declares: ``types``)."""
    done = [s for s in read_steps(d, types) if s["status"] == "ok" and "case" in s]
    return [(s["name"], s["case"]) for s in sorted(done, key=lambda s: rep_order(s["case"]))]


def _guest_dt(run, step: dict) -> dict | None:
    """The dt_dma_ranges output of the host step that decoded this boot's device tree, if any."""
    c = step["case"]
    for case, s in _tool_steps(run, "dt_dma_ranges"):
        if case.get("experiment") == "guest" and case.get("release") == c["release"] and case.get("dt") == c["dt"]:
            return json_lines(run.raw(s["name"]).read_text(), "dt_dma_ranges")[0]
    return None


def guest_emulation(info: dict) -> dict:
    """A measurement's ``emulation`` (schema: measurements[].emulation) from the ``guest.json``
    that labkit.guest writes for each boot: how the guest's CPU was provided."""
    return {"emulator": f"QEMU {info['qemu_version']}", "accelerator": info["accelerator"],
            "machine": info.get("machine"), "guest_cpu": info.get("cpu"), "host_arch": info.get("host_arch"),
            "host_cpu": info.get("host_cpu")}


def _boot_values(case: dict, steps: list[tuple[str, dict]], d: Path) -> list[tuple[str, str, dict, float]]:
    """One boot's values of the metrics whose unit is the boot: (metric, unit, case, value) for
    ``boot_bandwidth`` (the median MB/s of the boot's direct dd reads, per ``knob``) and
    ``boot_vs_control`` (the median of the ratios of its rounds of alternate.py against the
    control drive, per ``knob``; the rounds of run-time knobs, whose case has a ``setting``, are
    not among them). ``case``: the boot's case; ``steps``: the guest's (name, case)."""
    reads: dict[tuple, list[float]] = {}
    for n, c in steps:
        where = {**case, **_measured(c)}
        if c.get("tool") == "dd" and c.get("io") == "direct":
            reads.setdefault(("boot_bandwidth", "MB/s", tuple(where.items())), []).append(
                dd_summary((d / "raw" / f"{n}.err").read_text())["mb_per_s"])
        elif c.get("tool") == "alternate" and "setting" not in c:
            reads.setdefault(("boot_vs_control", "x", tuple(where.items())), []).extend(
                r["ratio"] for r in json_lines((d / "raw" / f"{n}.out").read_text(), "alternate"))
    return [(metric, unit, dict(where), statistics.median(v)) for (metric, unit, where), v in reads.items() if v]


def _guest_one(run, host_step: dict, d: Path, per_boot: list) -> None:
    """Measurements of one guest boot (raw outputs in ``d``, brought back by labkit.guest); every
    one carries the guest's ``emulation``, so claims treat TCG samples as emulated. The boot's
    values of the metrics whose unit is the boot (``boot_time``, :func:`_boot_values`) are
    appended to ``per_boot`` as (metric, unit, case, value, step, emulation), one measurement per
    case across boots; a repeated boot (its host step's ``rep`` 2 or more) gives only those."""
    step = host_step["name"]
    info = json.loads((d / "guest.json").read_text())
    emu = guest_emulation(info)
    uname_r = (d / "uname-r.txt").read_text().strip()
    debian = (d / "uname-v.txt").read_text().split(" Debian ")[-1].split(" ")[0]
    case = {"experiment": "guest", "guest_arch": info["arch"], "guest_kernel": f"{uname_r} ({debian})",
            "kernel": kernel_series(uname_r), "dt": host_step["case"]["dt"], "accelerator": info["accelerator"]}
    if "boot_args" in host_step["case"]:  # a boot with one of the original's boot-time knobs
        case["boot_args"] = host_step["case"]["boot_args"]
    steps = guest_steps(d, run.case_types)
    if info.get("boot_seconds") is not None:   # QEMU started → the guest's job started (labkit.guest.qemu)
        per_boot.append(("boot_time", "s", case, info["boot_seconds"], step, emu))
    per_boot.extend((metric, unit, where, v, step, emu) for metric, unit, where, v in _boot_values(case, steps, d))
    if host_step["case"].get("rep", 1) >= 2:
        return

    def of(tool: str) -> list[tuple[str, dict]]:
        return [(n, c) for n, c in steps if c.get("tool") == tool]

    for n, c in of("dd"):
        run.add_sample("bandwidth", "MB/s", {**case, **_measured(c)}, dd_summary((d / "raw" / f"{n}.err").read_text())["mb_per_s"],
                       step, emu)
    run.flush_samples()
    # One step of many rounds (1b), or one round per step (a knob's read in each round of knobs,
    # the same case every round): the samples of one case gather in round and repetition order.
    for n, c in of("alternate"):
        where = {**case, **_measured(c)}
        for r in json_lines((d / "raw" / f"{n}.out").read_text(), "alternate"):
            for k, drive in enumerate(("nvme", "control")):
                run.add_sample("alternating_bandwidth", "MB/s", {**where, "drive": drive}, r["mb_per_s"][k], step, emu)
            run.add_sample("bandwidth_vs_control", "x", where, r["ratio"], step, emu)
    run.flush_samples()
    counts = {"swiotlb_bounced": [], "rq_complete": [], "read_events": []}   # (case, value, step) per metric
    for n, c in of("perf-stat"):
        stat = perf_stat_csv((d / f"{n}.csv").read_text())
        got = {ev: stat[ev]["value"] for ev in ("swiotlb:swiotlb_bounced", "block:block_rq_complete")
               if stat.get(ev) and stat[ev]["counted"]}
        where = {**case, **_measured(c)}
        for ev, metric in (("swiotlb:swiotlb_bounced", "swiotlb_bounced"), ("block:block_rq_complete", "rq_complete")):
            if ev in got:
                counts[metric].append((where, got[ev], step))
        if len(got) == 2:  # both events of the same read, so the two series pair by position
            for ev, v in got.items():
                counts["read_events"].append(({**where, "event": ev}, v, step))
    _samples(run, "swiotlb_bounced", "events", counts["swiotlb_bounced"], emu)
    _samples(run, "rq_complete", "requests", counts["rq_complete"], emu)
    _samples(run, "read_events", "events", counts["read_events"], emu)
    pool = dict(line.split(None, 1) for line in (d / "swiotlb-before.txt").read_text().splitlines() if " " in line)
    after = dict(line.split(None, 1) for line in (d / "swiotlb-after.txt").read_text().splitlines() if " " in line)
    if "io_tlb_nslabs" in pool:
        run.add("swiotlb_pool", "MiB", case, [int(pool["io_tlb_nslabs"]) * 2048 / 2**20], step, emu)
    if "io_tlb_used" in after:
        run.add("swiotlb_used", "slabs", case, [int(after["io_tlb_used"])], step, emu)
    calls, per_call = [], []
    for n, c in of("strace-c"):
        row = strace_summary((d / f"{n}.txt").read_text())["syscalls"].get("read")
        if row and row["calls"]:
            where = {**case, **_measured(c), "syscall": "read"}
            calls.append((where, row["calls"], step))
            per_call.append((where, row["seconds"] / row["calls"] * 1e6, step))
    _samples(run, "syscalls", "calls", calls, emu)
    _samples(run, "time_per_call", "us", per_call, emu)
    for n, c in of("syscall-trace"):
        lat = read_times((d / f"{n}.trace").read_text())
        if lat:
            run.add_samples("read_time", "us", {**case, **_measured(c)}, lat, step, emu)
    run.flush_samples()
    # A trace is gzipped once counted (2 MB of text each); record.py also runs on a partial run
    # after each group, so a later run reads the .gz it left.
    traces = [t for n, _ in of("function_graph") for t in (d / f"{n}.trace", d / f"{n}.trace.gz") if t.exists()]
    if traces:
        texts = [gzip.decompress(t.read_bytes()).decode() if t.suffix == ".gz" else t.read_text() for t in traces]
        run.add("fgraph_swiotlb_calls", "calls", case, [len(_FG_SWIOTLB.findall(t)) for t in texts], step, emu)
        (d / "fgraph.excerpt.txt").write_text(fgraph_excerpt(texts[0]))
        run.artifact("log", {"experiment": "guest", "kernel": case["kernel"], "dt": case["dt"], "what": "function_graph"},
                     f"{d.relative_to(run.dir)}/fgraph.excerpt.txt", "function_graph of one ksys_read: the DMA mapping")
        for t in (t for t in traces if t.suffix == ".trace"):  # pages use the count and the excerpt
            with open(t, "rb") as src, gzip.open(f"{t}.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            t.unlink()
    for _, c in of("btt"):
        kib = c["request_kib"]
        for phase, prefix in (("d2c", "btt.d2c"), ("q2c", "btt.q2c")):
            lat = [x[1] * 1e6 for f in sorted(d.glob(f"{prefix}_*.dat")) for x in btt_latencies(f.read_text())]
            if lat:
                run.add(phase, "us", {**case, "request_kib": kib}, lat, step, emu)
                if phase == "d2c":
                    run.add("d2c_per_mib", "us/MiB", {**case, "request_kib": kib}, [x * 1024 / kib for x in lat], step, emu)
    dt = _guest_dt(run, host_step)
    if dt and dt.get("ram_outside_pci_windows") is not None:
        run.add("ram_outside_dma_window", "bytes", case, [dt["ram_outside_pci_windows"]], step, emu)
    for n, _ in of("perf-script"):
        _guest_flamegraph(run, d, d / "raw" / f"{n}.out", case, info)
    for tool, what, title in (("thp-mode", "thp-before", "transparent_hugepage/enabled before the knob rounds"),
                              ("thp-rounds-mode", "thp-rounds", "transparent_hugepage/enabled in the knob rounds, but for the huge-page knob's reads")):
        for n, _ in of(tool):
            run.artifact("log", {"experiment": "guest", "kernel": case["kernel"], "dt": case["dt"], "what": what},
                         f"{d.relative_to(run.dir)}/raw/{n}.out", title)


def _guest_flamegraph(run, d: Path, script: Path, case: dict, info: dict) -> None:
    """Fold ``script`` (perf script of a guest's perf record -g) and draw its flame graph with inferno."""
    rel = d.relative_to(run.dir)
    folded, svg = d / "perf.folded", d / "perf.svg"
    if script.exists() and script.stat().st_size:
        try:
            fold(script, folded)
            flamegraph(folded, svg, f"arm64 guest (QEMU {info['accelerator']}), kernel {case['kernel']}, "
                                    f"device tree {case['dt']}: direct read of the NVMe drive")
        except FileNotFoundError:
            return  # inferno missing on this host: the folded stacks are not drawn (the page says so)
        script.unlink()  # the folded stacks keep what the page uses; perf script text is 10x their size
    elif not (folded.exists() and svg.exists()):
        return  # no profile; or an earlier record.py of this run (they run after each group) drew it
    fcase = {"experiment": "guest", "kernel": case["kernel"], "dt": case["dt"]}
    run.artifact("folded", fcase, f"{rel}/perf.folded", "folded stacks (inferno-collapse-perf on the host)")
    run.artifact("flamegraph", fcase, f"{rel}/perf.svg",
                 f"kernel {case['kernel']}, device tree {case['dt']} (emulated arm64)")


def _guest_group(run) -> None:
    per_boot: list = []
    for case, s in _tool_steps(run, "labkit.guest"):
        d = run.dir / case["out"]
        if (d / "guest.json").exists():
            _guest_one(run, s, d, per_boot)
    for metric, unit, case, value, step, emu in per_boot:
        run.add_sample(metric, unit, case, value, step, emu)
    run.flush_samples()


def collect(run) -> None:
    """Parse every group's raw outputs of ``run`` into measurements (see the module docstring)."""
    _dd_steps(run)
    _strace_group(run)
    _events_group(run)
    _btt_group(run)
    _swiotlb_group(run)
    _bounce_group(run)
    _guest_group(run)
