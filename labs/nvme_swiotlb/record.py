"""nvme_swiotlb lab: raw outputs → measurements (called by ``labkit record``).

Metrics (every sample kept; one sample per repetition unless said otherwise):

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
``block_latency`` (µs, every I/O, btt -l/-q): ``phase`` D2C|Q2C, ``path`` blktrace|ftrace blk tracer.
``btt_avg`` (µs, one sample: btt's printed average) and ``btt_share`` (% of Q2C): ``phase``, ``path``.
``tracepoint_count`` (events during one direct read, perf stat -a): ``event``.
``ram_outside_dma_window`` (bytes, device tree hosts only).
``bounce_bandwidth`` (MB/s, bounce.c samples): ``target`` disk|tmpfs, ``block``, ``mode`` direct|bounce.
``bounce_slowdown`` (×, direct/bounce per sample pair): ``target``, ``block``, ``source``
    measured|copy-time model (1 + copy time per I/O / direct time per I/O).
``copy_time`` (µs per I/O, bounce mode): ``target``, ``block``.

Guest group (``experiment=guest``: an arm64 QEMU guest with an emulated NVMe drive, one boot per
kernel × device tree; case keys ``guest_arch``, ``guest_kernel`` (uname -r and Debian version),
``kernel`` ("5.10" | "6.1"), ``dt`` ("plain" | "dma-ranges"), ``accelerator`` ("tcg" | "kvm")):

``bandwidth`` (MB/s as dd prints, emulated): ``io`` direct|buffered (buffered after drop_caches).
``swiotlb_bounced`` (events per read, perf stat -a) and ``rq_complete`` (block requests per read): ``io``.
``swiotlb_pool`` (MiB: io_tlb_nslabs × 2 KiB slabs, debugfs) and ``swiotlb_used`` (slabs in use after the reads).
``syscalls`` (calls) and ``time_per_call`` (µs) of read(2), strace -c -w of a direct read.
``fgraph_swiotlb_calls`` (calls of swiotlb_* functions under one ksys_read of 1 MiB, function_graph).
``d2c`` and ``q2c`` (µs, every request of a direct read in 128 KiB requests, blktrace → btt),
    ``request_kib`` = 128; ``d2c_per_mib`` (µs/MiB: each request's D2C over its size).
Artifacts: folded stacks and a flame graph of every CPU during a direct read (perf record -g in the
guest, folded and drawn on the host with inferno, which has no Debian package).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

from labkit.parsers.btt import btt_latencies, btt_summary
from labkit.parsers.dd import dd_summary
from labkit.parsers.ftrace import io_cycle, trace_events
from labkit.parsers.jsonline import json_lines
from labkit.parsers.perf import flamegraph, fold, perf_stat_csv
from labkit.parsers.strace import strace_summary
from labkit.parsers.strace_t import log_histogram, strace_calls


def _dd(run, name: str) -> dict:
    return dd_summary(run.raw(name, "err").read_text())


def _series(run, pattern: str) -> list[str]:
    """Names of ok steps matching regex ``pattern`` (full match), in run order."""
    rx = re.compile(pattern)
    return [s["name"] for s in run.steps if s["status"] == "ok" and rx.fullmatch(s["name"])]


def _add_bw(run, case: dict, steps: list[str]) -> None:
    if steps:
        run.add("bandwidth", "MB/s", case, [_dd(run, n)["mb_per_s"] for n in steps], steps[0])


def _dd_group(run) -> None:
    _add_bw(run, {"experiment": "dd", "target": "file", "io": "write", "cache": "-"}, _series(run, r"dd\.\d+\.write"))
    for kind, io, cache in (("direct-cold", "direct", "cold"), ("buffered-cold", "buffered", "cold"),
                            ("buffered-warm", "buffered", "warm"), ("direct-warm", "direct", "warm")):
        _add_bw(run, {"experiment": "dd", "target": "file", "io": io, "cache": cache}, _series(run, rf"dd\.\d+\.{kind}"))
    _add_bw(run, {"experiment": "dd", "target": "loop", "io": "direct", "cache": "-"}, _series(run, r"dd\.\d+\.loop-direct"))
    for kind, after in (("fincore-direct", "direct read"), ("fincore-buffered", "buffered read")):
        steps = _series(run, rf"dd\.\d+\.{kind}")
        if steps:
            res = [json.loads(run.raw(n).read_text())["fincore"][0]["res"] for n in steps]
            run.add("page_cache", "bytes", {"after": after}, res, steps[0])


def _strace_group(run) -> None:
    for io in ("buffered", "direct"):
        name = f"strace.c.{io}"
        if run.ok(name):
            summ = strace_summary(run.raw(name, "err").read_text())
            for sc in ("read", "write"):
                row = summ["syscalls"].get(sc)
                if row:
                    run.add("syscalls", "calls", {"io": io, "syscall": sc}, [row["calls"]], name)
                    run.add("time_per_call", "us", {"io": io, "syscall": sc}, [row["seconds"] / row["calls"] * 1e6], name)
            read = summ["syscalls"].get("read")
            if read:
                run.add("accounted_time", "s", {"io": io, "source": "strace: read calls × time per call"},
                        [read["seconds"]], name)
                run.add("accounted_time", "s", {"io": io, "source": "dd: elapsed"}, [_dd(run, name)["seconds"]], name)
        name = f"strace.T.{io}"
        if run.ok(name):
            calls = strace_calls((run.dir / "raw" / f"{name}.calls").read_text(), "read")
            lat = [c["seconds"] * 1e6 for c in calls if c["first_arg"] == "0" and (c["ret"] or 0) > 0]
            if lat:
                run.add("read_latency", "us", {"io": io}, lat, name)
                for edge, count in log_histogram(lat, per_octave=4):
                    run.add("read_latency_hist", "calls", {"io": io, "bin_us": edge}, [count], name)


def _events_group(run) -> None:
    if not run.ok("events.trace"):
        return
    events = trace_events(run.raw("events.trace").read_text())
    pids = {e["pid"] for e in events if e["event"] == "block_rq_issue" and e["task"] == "dd"}
    counts: dict[str, int] = {}
    for e in events:
        counts[e["event"]] = counts.get(e["event"], 0) + 1
    for ev in ("block_rq_issue", "block_rq_complete", "sched_switch", "swiotlb_bounced"):
        run.add("trace_events", "events", {"event": ev}, [counts.get(ev, 0)], "events.trace")
    if len(pids) != 1:
        return
    cyc = io_cycle(events, pids.pop())
    for phase in ("service", "wakeup", "user"):
        if cyc[phase]:
            run.add("io_phase", "us", {"phase": phase}, [x * 1e6 for x in cyc[phase]], "events.trace")


def _btt_group(run) -> None:
    if not run.ok("btt.btt"):
        return
    path = (run.dir / "btt.path").read_text().strip()
    path = {"ftrace": "ftrace blk tracer", "blktrace": "blktrace"}[path]
    summ = btt_summary(run.raw("btt.btt").read_text())
    for phase in ("Q2G", "G2I", "I2D", "D2C", "Q2C"):
        row = summ["all"].get(phase)
        if row:
            run.add("btt_avg", "us", {"phase": phase, "path": path}, [row["avg"] * 1e6], "btt.btt")
    for dev, shares in summ["overhead"].items():
        for phase, pct in shares.items():
            run.add("btt_share", "%", {"phase": phase, "path": path, "dev": dev}, [pct], "btt.btt")
    for phase, prefix in (("D2C", "btt.d2c"), ("Q2C", "btt.q2c")):
        files = sorted((run.dir / "raw").glob(f"{prefix}_*.dat"))
        lat = [x[1] * 1e6 for f in files for x in btt_latencies(f.read_text())]
        if lat:
            run.add("block_latency", "us", {"phase": phase, "path": path}, lat, "btt.btt")


def _swiotlb_group(run) -> None:
    if run.ok("swiotlb.perf"):
        stat = perf_stat_csv((run.dir / "raw" / "swiotlb.perf.csv").read_text())
        for ev in ("swiotlb:swiotlb_bounced", "block:block_rq_complete"):
            row = stat.get(ev)
            if row and row["counted"]:
                run.add("tracepoint_count", "events", {"event": ev}, [row["value"]], "swiotlb.perf")
    if run.ok("swiotlb.dt"):
        dt = json_lines(run.raw("swiotlb.dt").read_text(), "dt_dma_ranges")[0]
        if dt.get("ram_outside_pci_windows") is not None:
            run.add("ram_outside_dma_window", "bytes", {}, [dt["ram_outside_pci_windows"]], "swiotlb.dt")


def _bounce_group(run) -> None:
    for step, target in (("bounce.disk", "disk"), ("bounce.tmpfs", "tmpfs")):
        if not run.ok(step):
            continue
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


def _tried_group(run) -> None:
    ras = sorted({int(m.group(1)) for s in run.steps if (m := re.fullmatch(r"tried\.ra(\d+)\.\d+\.buffered", s["name"]))})
    for v in ras:
        for io in ("buffered", "direct"):
            _add_bw(run, {"experiment": "read_ahead", "read_ahead_kb": v, "io": io}, _series(run, rf"tried\.ra{v}\.\d+\.{io}"))
    for s in ("none", "mq-deadline"):
        _add_bw(run, {"experiment": "scheduler", "scheduler": s}, _series(run, rf"tried\.sched-{re.escape(s)}\.\d+"))
    for label, nice in (("nice0", 0), ("nice-20", -20)):
        _add_bw(run, {"experiment": "nice", "nice": nice}, _series(run, rf"tried\.{label}\.\d+"))


GUEST_KERNELS = {"bullseye": "5.10", "bookworm": "6.1"}
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


def _guest_dd(path: Path) -> float:
    return dd_summary(path.read_text())["mb_per_s"]


def _guest_one(run, step: str, d: Path) -> None:
    """Measurements of one guest boot (raw outputs in ``d``, brought back by labkit.guest)."""
    info = json.loads((d / "guest.json").read_text())
    release = step.split(".")[1]
    case = {"experiment": "guest", "guest_arch": info["arch"],
            "guest_kernel": f"{(d / 'uname-r.txt').read_text().strip()} ({(d / 'uname-v.txt').read_text().split(' Debian ')[-1].split(' ')[0]})",
            "kernel": GUEST_KERNELS.get(release, release), "dt": info["dt"], "accelerator": info["accelerator"]}

    def ok(name: str) -> bool:
        rc = d / f"{name}.rc"
        return rc.exists() and rc.read_text().strip() == "0"

    def series(pattern: str) -> list[str]:
        names = sorted({p.name[:-3] for p in d.glob("*.rc")})
        return sorted((n for n in names if re.fullmatch(pattern, n) and ok(n)), key=lambda n: int(n.split(".")[1]))

    for io in ("direct", "buffered"):
        names = series(rf"dd\.\d+\.{io}")
        if names:
            run.add("bandwidth", "MB/s", {**case, "io": io}, [_guest_dd(d / f"{n}.err") for n in names], step)
        counts = [perf_stat_csv((d / f"{n}.csv").read_text()) for n in series(rf"count\.\d+\.{io}")]
        for ev, metric, unit in (("swiotlb:swiotlb_bounced", "swiotlb_bounced", "events"),
                                 ("block:block_rq_complete", "rq_complete", "requests")):
            vals = [c[ev]["value"] for c in counts if c.get(ev) and c[ev]["counted"]]
            if vals:
                run.add(metric, unit, {**case, "io": io}, vals, step)
    pool = dict(line.split(None, 1) for line in (d / "swiotlb-before.txt").read_text().splitlines() if " " in line)
    after = dict(line.split(None, 1) for line in (d / "swiotlb-after.txt").read_text().splitlines() if " " in line)
    if "io_tlb_nslabs" in pool:
        run.add("swiotlb_pool", "MiB", case, [int(pool["io_tlb_nslabs"]) * 2048 / 2**20], step)
    if "io_tlb_used" in after:
        run.add("swiotlb_used", "slabs", case, [int(after["io_tlb_used"])], step)
    if ok("strace.direct"):
        row = strace_summary((d / "strace.direct.txt").read_text())["syscalls"].get("read")
        if row and row["calls"]:
            run.add("syscalls", "calls", {**case, "io": "direct", "syscall": "read"}, [row["calls"]], step)
            run.add("time_per_call", "us", {**case, "io": "direct", "syscall": "read"},
                    [row["seconds"] / row["calls"] * 1e6], step)
    traces = [d / f"{n}.trace" for n in series(r"fgraph\.\d+")]
    if traces:
        run.add("fgraph_swiotlb_calls", "calls", case, [len(_FG_SWIOTLB.findall(t.read_text())) for t in traces], step)
        (d / "fgraph.excerpt.txt").write_text(fgraph_excerpt(traces[0].read_text()))
        run.artifact("log", {"experiment": "guest", "kernel": case["kernel"], "dt": case["dt"], "what": "function_graph"},
                     f"{d.relative_to(run.dir)}/fgraph.excerpt.txt", "function_graph of one ksys_read: the DMA mapping")
        for t in traces:  # a whole trace is 2 MB of text; the count and the excerpt are what pages use
            with open(t, "rb") as src, gzip.open(f"{t}.gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            t.unlink()
    if ok("btt.btt"):
        for phase, prefix in (("d2c", "btt.d2c"), ("q2c", "btt.q2c")):
            lat = [x[1] * 1e6 for f in sorted(d.glob(f"{prefix}_*.dat")) for x in btt_latencies(f.read_text())]
            if lat:
                run.add(phase, "us", {**case, "request_kib": 128}, lat, step)
                if phase == "d2c":
                    run.add("d2c_per_mib", "us/MiB", {**case, "request_kib": 128}, [x * 1024 / 128 for x in lat], step)
    script = d / "perf.script.out"
    if ok("perf.script") and script.stat().st_size:
        rel = d.relative_to(run.dir)
        folded, svg = d / "perf.folded", d / "perf.svg"
        try:
            fold(script, folded)
            flamegraph(folded, svg, f"arm64 guest (QEMU {info['accelerator']}), kernel {case['kernel']}, "
                                    f"device tree {case['dt']}: direct read of the NVMe drive")
        except FileNotFoundError:
            return  # inferno missing on this host: the folded stacks are not drawn (the page says so)
        script.unlink()  # the folded stacks keep what the page uses; perf script text is 10x their size
        fcase = {"experiment": "guest", "kernel": case["kernel"], "dt": case["dt"]}
        run.artifact("folded", fcase, f"{rel}/perf.folded", "folded stacks (inferno-collapse-perf on the host)")
        run.artifact("flamegraph", fcase, f"{rel}/perf.svg",
                     f"kernel {case['kernel']}, device tree {case['dt']} (emulated arm64)")


def _guest_group(run) -> None:
    for s in run.steps:
        m = re.fullmatch(r"guest\.(\w+)\.(plain|dma-ranges)", s["name"])
        d = run.dir / "raw" / "guest" / f"{m.group(1)}-{m.group(2)}" if m else None
        if m and s["status"] == "ok" and (d / "guest.json").exists():
            _guest_one(run, s["name"], d)


def collect(run) -> None:
    """Parse every group's raw outputs of ``run`` into measurements (see the module docstring)."""
    _dd_group(run)
    _strace_group(run)
    _events_group(run)
    _btt_group(run)
    _swiotlb_group(run)
    _bounce_group(run)
    _tried_group(run)
    _guest_group(run)
