"""optane_kyber lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Metrics and their cases (every sample kept; one sample per repetition unless said):

``clat`` (µs)         fio completion latency; ``experiment`` sched|overhead, ``scheduler``,
                      ``stat`` mean|p50|p99|p99.9 (sched) or mean (overhead), ``io_poll``
``iops`` (IOPS)       fio; sched: ``scheduler``; overhead: ``numjobs``, ``profiler``
``iops_ratio`` (ratio) overhead: IOPS under a profiler ÷ IOPS of the plain run of the same
                      repetition and numjobs (the plain run's ratio is 1 by definition);
                      ``profiler``: plain | perf stat | record (defaults) | record 997 Hz |
                      record 9973 Hz (record (defaults) = plain ``perf record``, as the original
                      ran it: no call graphs, perf's default rate; the others perf record -g -F N)
``share`` (%)         of the flame graph's samples (period-weighted) whose stack holds a
                      frame of ``under`` (kyber, polling, io wait, burn); flame: ``scheduler``,
                      one sample per repetition (repetition 1 is the profile drawn);
                      heat: ``profile`` hottest range|whole recording
``perf_samples``      samples perf record wrote (its own summary line)
``count`` (events)    trace: fio's total I/Os and each tracepoint's count, ``source``
``per_io`` (events)   trace: tracepoint count ÷ fio's total I/Os, ``event``; ``event`` "fio I/Os"
                      is fio's own count ÷ itself (1 by definition: the reference for "once per I/O")
``ipc``, ``cache_misses_per_io``, ``instructions_per_io``: ipc (PMU only)
``subsecond_offset`` (ms) heat: offset within the second of the hottest slice's centre (rows
                      summed over every second: one sample), of the hottest slice of each
                      second that had a burst (one sample per burst), of each burst's start and
                      end (one sample per burst), of the selected range
``heat_samples`` (samples per slice) heat: mean samples per 20 ms slice inside the burst
                      window vs in the rest of the same second, one sample per burst (slices
                      straddling an edge left out)
``events_per_s``, ``latency_min``/``latency_avg``/``latency_p95`` (µs): sysbench cpu
"""

from __future__ import annotations

import json
import math
import re

from labkit.parsers.fio import fio_summary
from labkit.parsers.jsonline import json_line
from labkit.parsers.perf import perf_stat_csv, share_under
from labkit.parsers.sysbench import sysbench_cpu

# Frames (prefixes of kernel function names) that mark a path in the folded stacks.
UNDER = {
    "kyber": ["kyber_"],
    # bio_poll/blk_mq_poll (6.x), blk_poll (5.x), iocb_bio_iopoll (io_uring/aio polling)
    "polling": ["bio_poll", "blk_mq_poll", "blk_hctx_poll", "blk_poll", "iocb_bio_iopoll"],
    # sleeping until the completion arrives (submit_bio_wait → io_schedule_timeout)
    "io wait": ["io_schedule"],
}
# Case labels of the profiler a run was under (run.sh step names → page labels), in page order.
PROFILERS = {"none": "plain", "stat": "perf stat", "rec": "record (defaults)", "rec997": "record 997 Hz",
             "rec9973": "record 9973 Hz"}
SAMPLES_RE = re.compile(r"\((\d+) samples\)")


def _read_int(run, step):
    if not run.ok(step):
        return None
    try:
        return int(run.raw(step).read_text().strip())
    except ValueError:
        return None


def _default_scheduler(run):
    if not run.ok("device.schedulers"):
        return None
    m = re.search(r"\[([^\]]+)\]", run.raw("device.schedulers").read_text())
    return m.group(1) if m else None


def _perf_samples(run, step):
    m = SAMPLES_RE.search(run.raw(step, "err").read_text())
    return int(m.group(1)) if m else None


def _sched(run, io_poll):
    by: dict[str, list[dict]] = {}
    first_step: dict[str, str] = {}
    for s in run.steps:
        parts = s["name"].split(".")
        if s["group"] != "sched" or s["status"] != "ok" or len(parts) != 3:
            continue
        sched = parts[1]
        by.setdefault(sched, []).append(fio_summary(run.raw(s["name"]).read_text()))
        first_step.setdefault(sched, s["name"])
    for sched, runs in by.items():
        base = {"experiment": "sched", "scheduler": sched}
        if io_poll is not None:
            base["io_poll"] = io_poll
        for stat, key in (("mean", "clat_mean_us"), ("p50", "clat_p50_us"), ("p99", "clat_p99_us"),
                          ("p99.9", "clat_p99_9_us")):
            vals = [r[key] for r in runs if r[key] is not None]
            if vals:
                run.add("clat", "us", {**base, "stat": stat}, vals, first_step[sched])
        run.add("iops", "IOPS", base, [r["iops"] for r in runs], first_step[sched])


def _flame_reps(run, sched: str) -> list[tuple[str, str, str]]:
    """(folded file, step that wrote it, perf record step) of every repetition of ``sched``
    that ran, repetition 1 (the drawn profile) first."""
    reps = []
    if run.ok(f"flame.{sched}.flame"):
        reps.append((f"flame-{sched}.folded", f"flame.{sched}.flame", f"flame.{sched}.record"))
    later = sorted((int(m.group(1)), s["name"]) for s in run.steps
                   if (m := re.fullmatch(rf"flame\.{re.escape(sched)}\.(\d+)\.fold", s["name"])) and s["status"] == "ok")
    for i, step in later:
        reps.append((f"flame-{sched}.{i}.folded", step, f"flame.{sched}.{i}.record"))
    return reps


def _flame(run):
    for sched in ("none", "kyber"):
        reps = _flame_reps(run, sched)
        if not reps:
            continue
        case = {"experiment": "flame", "scheduler": sched}
        folded = [(run.dir / f).read_text() for f, _, _ in reps]
        for name, frames in UNDER.items():
            run.add("share", "%", {**case, "under": name}, [100.0 * share_under(t, frames) for t in folded],
                    reps[0][1])
        counts = [n for _, _, rec in reps if (n := _perf_samples(run, rec)) is not None]
        if counts:
            run.add("perf_samples", "samples", case, counts, reps[0][2])
        if not run.ok(f"flame.{sched}.flame"):
            continue
        run.artifact("flamegraph", case, f"flame-{sched}.svg",
                     f"fio 4k random read, QD1, pvsync2 --hipri, scheduler {sched}: perf record -g -F 997")
        run.artifact("folded", case, f"flame-{sched}.folded", f"folded stacks, scheduler {sched}")
    if run.ok("flame.diff"):
        case = {"experiment": "flame", "diff": "none to kyber"}
        run.artifact("diff_flamegraph", case, "flame-diff.svg",
                     "Differential flame graph, none → kyber: shapes from kyber's profile; red grew with kyber, blue shrank")
        run.artifact("folded", case, "flame-diff.folded", "differential folded stacks (none, kyber counts)")


def _trace(run):
    rows: dict[tuple[str, str], list[float]] = {}
    per_io: dict[tuple[str, str], list[float]] = {}
    first: dict[str, str] = {}
    for s in run.steps:
        parts = s["name"].split(".")
        if s["group"] != "trace" or s["status"] != "ok" or len(parts) != 3:
            continue
        sched = parts[1]
        ios = fio_summary(run.raw(s["name"]).read_text())["total_ios"]
        events = perf_stat_csv(run.raw(s["name"], "csv").read_text())
        first.setdefault(sched, s["name"])
        rows.setdefault((sched, "fio total_ios"), []).append(float(ios))
        per_io.setdefault((sched, "fio I/Os"), []).append(1.0)
        for ev, row in events.items():
            if row["value"] is None:
                continue
            rows.setdefault((sched, ev), []).append(row["value"])
            per_io.setdefault((sched, ev), []).append(row["value"] / ios)
    for (sched, src), vals in rows.items():
        run.add("count", "events", {"experiment": "trace", "scheduler": sched, "source": src}, vals, first[sched])
    for (sched, ev), vals in per_io.items():
        run.add("per_io", "events per I/O", {"experiment": "trace", "scheduler": sched, "event": ev}, vals, first[sched])


def _ipc(run):
    for sched in ("none", "kyber"):
        if not run.ok(f"ipc.{sched}"):
            continue
        ev = perf_stat_csv(run.raw(f"ipc.{sched}", "csv").read_text())
        ios = fio_summary(run.raw(f"ipc.{sched}").read_text())["total_ios"]
        case = {"experiment": "ipc", "scheduler": sched}

        def v(name):
            row = next((r for k, r in ev.items() if k.split(":")[0] == name), None)
            return row["value"] if row else None
        ins, cyc, miss = v("instructions"), v("cycles"), v("cache-misses")
        if ins and cyc:
            run.add("ipc", "instructions/cycle", case, [ins / cyc], f"ipc.{sched}")
            run.add("instructions_per_io", "instructions", case, [ins / ios], f"ipc.{sched}")
        if miss is not None:
            run.add("cache_misses_per_io", "misses", case, [miss / ios], f"ipc.{sched}")


def _heat(run):
    if not run.ok("heat.map"):
        return
    hm = json.loads((run.dir / "heatmap.json").read_text())
    burst = json_line(run.raw("heat.record").read_text(), "burst")
    rows, origin = hm["rows"], hm["origin"]
    ms = 1000.0 / rows
    windows = burst["bursts"]
    off = lambda t: (t - math.floor(t)) * 1000.0  # noqa: E731  offset within its second, ms
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "hottest slice (centre)"},
            [hm["hottest_slice"]["center_ms"]], "heat.map")
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "burst start"}, [off(a) for a, _ in windows],
            "heat.record")
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "burst end"}, [off(b) for _, b in windows],
            "heat.record")
    rng = hm["range"]
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "selected range start"}, [rng["start_ms"]], "heat.map")
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "selected range end"}, [rng["end_ms"]], "heat.map")
    inside, outside, hottest = [], [], []
    for a, b in windows:
        col = math.floor(a) - origin
        if not 0 <= col < hm["cols"] or math.floor(b) != math.floor(a):
            continue
        counts = hm["counts"][col]
        hottest.append((max(range(rows), key=lambda r: counts[r]) + 0.5) * ms)
        lo, hi = off(a), off(b)
        ins = [c for row, c in enumerate(counts) if row * ms >= lo and (row + 1) * ms <= hi]
        outs = [c for row, c in enumerate(counts) if (row + 1) * ms <= lo or row * ms >= hi]
        if ins and outs:
            inside.append(sum(ins) / len(ins))
            outside.append(sum(outs) / len(outs))
    if hottest:
        run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "hottest slice of each burst second (centre)"},
                hottest, "heat.map")
    if inside:
        run.add("heat_samples", "samples per slice", {"experiment": "heat", "region": "burst window"}, inside, "heat.map")
        run.add("heat_samples", "samples per slice", {"experiment": "heat", "region": "rest of the second"}, outside,
                "heat.map")
    n = _perf_samples(run, "heat.record")
    if n is not None:
        run.add("perf_samples", "samples", {"experiment": "heat"}, [n], "heat.record")
    run.artifact("heatmap", {"experiment": "heat"}, "heatmap.svg",
                 "Subsecond-offset heat map of perf record -a -g -F 997 (idle samples left out); "
                 "dashed lines: where burst was told to be busy; box: the range picked for the flame graph")
    for key, step, svg, folded, title in (
            ("hottest range", "heat.range-flame", "heat-range.svg", "heat-range.folded",
             "Flame graph of the hottest burst's time range only (perf script --time)"),
            ("whole recording", "heat.all-flame", "heat-all.svg", "heat-all.folded",
             "Flame graph of the whole recording, every CPU")):
        if not run.ok(step):
            continue
        case = {"experiment": "heat", "profile": key}
        text = (run.dir / folded).read_text()
        run.add("share", "%", {**case, "under": "burn"}, [100.0 * share_under(text, ["burn"])], step)
        run.artifact("flamegraph", case, svg, title)
        run.artifact("folded", case, folded, f"folded stacks, {key}")


def _overhead(run, scheduler):
    got: dict[tuple[int, str], dict[int, dict]] = {}
    first: dict[tuple[int, str], str] = {}
    for s in run.steps:
        m = re.fullmatch(r"overhead\.j(\d+)\.(\w+)\.(\d+)", s["name"])
        if not m or s["status"] != "ok":
            continue
        key = (int(m.group(1)), m.group(2))
        got.setdefault(key, {})[int(m.group(3))] = fio_summary(run.raw(s["name"]).read_text())
        first.setdefault(key, s["name"])
    order_p = list(PROFILERS)
    for (nj, p), reps in sorted(got.items(), key=lambda kv: (kv[0][0], order_p.index(kv[0][1]))):
        case = {"experiment": "overhead", "numjobs": nj, "profiler": PROFILERS[p]}
        if scheduler:
            case["scheduler"] = scheduler
        order = sorted(reps)
        run.add("iops", "IOPS", case, [reps[i]["iops"] for i in order], first[(nj, p)])
        run.add("clat", "us", {**case, "stat": "mean"}, [reps[i]["clat_mean_us"] for i in order], first[(nj, p)])
        plain = got.get((nj, "none"), {})
        ratios = [reps[i]["iops"] / plain[i]["iops"] for i in order if i in plain]
        if ratios:
            run.add("iops_ratio", "ratio", case, ratios, first[(nj, p)])


def _sysbench(run):
    got: dict[str, list[dict]] = {}
    first: dict[str, str] = {}
    for s in run.steps:
        m = re.fullmatch(r"sysbench\.(\w+)\.(\d+)", s["name"])
        if not m or s["status"] != "ok":
            continue
        got.setdefault(m.group(1), []).append(sysbench_cpu(run.raw(s["name"]).read_text()))
        first.setdefault(m.group(1), s["name"])
    for p, runs in sorted(got.items(), key=lambda kv: list(PROFILERS).index(kv[0])):
        case = {"experiment": "sysbench", "profiler": PROFILERS[p]}
        run.add("events_per_s", "events/s", case, [r["events_per_s"] for r in runs], first[p])
        for metric, key in (("latency_min", "latency_min_ms"), ("latency_avg", "latency_avg_ms"),
                            ("latency_p95", "latency_p_ms")):
            vals = [r[key] * 1000.0 for r in runs if r[key] is not None]
            if vals:
                run.add(metric, "us", case, vals, first[p])


def collect(run) -> None:
    """Parse every step of ``run`` into measurements and artifacts (see the module doc)."""
    io_poll = _read_int(run, "device.io_poll")
    _sched(run, io_poll)
    _flame(run)
    _trace(run)
    _ipc(run)
    _heat(run)
    _overhead(run, _default_scheduler(run))
    _sysbench(run)
