"""optane_kyber lab: raw outputs → measurements and artifacts (called by ``labkit record``).

Every step this module reads carries its case as data (``lab_run --case``, ``step["case"]``):
``experiment`` (device, sched, flame, trace, ipc, heat, one-second burst, overhead, sysbench)
and the fields below. No step name or command is parsed; the files a step wrote are named in its case
(``folded``, ``svg``) or are the lab's own fixed outputs (``heatmap.json``).

Metrics and their cases (every sample kept; one sample per repetition unless said; samples
in repetition order, so that two sides with the same repetitions pair by position):

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
                      straddling an edge left out); ``experiment`` one-second burst: the samples
                      of each slice of the busy second's column (``region`` burst second) and
                      of every slice of the quiet seconds around it (``region`` other seconds,
                      same slices), one sample per cell
``perf_samples``      also heat and one-second burst: samples perf record wrote
``events_per_s``, ``latency_min``/``latency_avg``/``latency_p95`` (µs): sysbench cpu
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict

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
# The profilers run.sh runs fio and sysbench under: its short names → the ``profiler`` labels
# its steps' cases carry, in page order.
PROFILERS = {"none": "plain", "stat": "perf stat", "rec": "record (defaults)", "rec997": "record 997 Hz",
             "rec9973": "record 9973 Hz"}
SAMPLES_RE = re.compile(r"\((\d+) samples\)")


def _device(run, knob: str) -> str | None:
    """The text a device step printed for sysfs ``knob`` (scheduler, io_poll, dio), or None
    when that step did not run."""
    found = run.steps_where(experiment="device", knob=knob)
    return run.raw(found[0]["name"]).read_text() if found else None


def _io_poll(run) -> int | None:
    text = _device(run, "io_poll")
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


def _default_scheduler(run) -> str | None:
    """The scheduler bracketed in the device's ``queue/scheduler`` before the lab changed it."""
    text = _device(run, "scheduler")
    m = re.search(r"\[([^\]]+)\]", text) if text else None
    return m.group(1) if m else None


def _perf_samples(run, step: str) -> int | None:
    """perf record's own count of the samples it wrote ("(N samples)" on its stderr)."""
    m = SAMPLES_RE.search(run.raw(step, "err").read_text())
    return int(m.group(1)) if m else None


def _sched(run, io_poll):
    by: dict[str, list[dict]] = defaultdict(list)
    first: dict[str, str] = {}
    for s in run.steps_where(experiment="sched", by_rep=True):
        sched = s["case"]["scheduler"]
        by[sched].append(fio_summary(run.raw(s["name"]).read_text()))
        first.setdefault(sched, s["name"])
    for sched, runs in by.items():
        base = {"experiment": "sched", "scheduler": sched}
        if io_poll is not None:
            base["io_poll"] = io_poll
        for stat, key in (("mean", "clat_mean_us"), ("p50", "clat_p50_us"), ("p99", "clat_p99_us"),
                          ("p99.9", "clat_p99_9_us")):
            vals = [r[key] for r in runs if r[key] is not None]
            if vals:
                run.add("clat", "us", {**base, "stat": stat}, vals, first[sched])
        run.add("iops", "IOPS", base, [r["iops"] for r in runs], first[sched])


def _flame(run):
    for sched in ("none", "kyber"):
        steps = run.steps_where(experiment="flame", scheduler=sched)
        # folded stacks of each repetition: rep 1 from the flame graph step, later ones from fold
        folds = sorted((s for s in steps if s["case"].get("tool") in ("flamegraph", "fold")),
                       key=lambda s: s["case"].get("rep", 0))
        records = {s["case"]["rep"]: s["name"] for s in steps if s["case"].get("tool") == "perf-record"}
        if not folds:
            continue
        case = {"experiment": "flame", "scheduler": sched}
        folded = [(run.dir / s["case"]["folded"]).read_text() for s in folds]
        for name, frames in UNDER.items():
            run.add("share", "%", {**case, "under": name}, [100.0 * share_under(t, frames) for t in folded],
                    folds[0]["name"])
        recs = [records[s["case"]["rep"]] for s in folds if s["case"]["rep"] in records]
        counts = [n for rec in recs if (n := _perf_samples(run, rec)) is not None]
        if counts:
            run.add("perf_samples", "samples", case, counts, recs[0])
        for s in folds:
            if s["case"].get("tool") != "flamegraph":
                continue
            run.artifact("flamegraph", case, s["case"]["svg"],
                         f"fio 4k random read, QD1, pvsync2 --hipri, scheduler {sched}: perf record -g -F 997")
            run.artifact("folded", case, s["case"]["folded"], f"folded stacks, scheduler {sched}")
    for s in run.steps_where(experiment="flame", tool="diff-flamegraph"):
        case = {"experiment": "flame", "diff": "none to kyber"}
        run.artifact("diff_flamegraph", case, s["case"]["svg"],
                     "Differential flame graph, none → kyber: shapes from kyber's profile; red grew with kyber, blue shrank")
        run.artifact("folded", case, s["case"]["folded"], "differential folded stacks (none, kyber counts)")


def _trace(run):
    rows: dict[tuple[str, str], list[float]] = defaultdict(list)
    per_io: dict[tuple[str, str], list[float]] = defaultdict(list)
    first: dict[str, str] = {}
    for s in run.steps_where(experiment="trace", by_rep=True):
        sched = s["case"]["scheduler"]
        ios = fio_summary(run.raw(s["name"]).read_text())["total_ios"]
        events = perf_stat_csv(run.raw(s["name"], "csv").read_text())
        first.setdefault(sched, s["name"])
        rows[(sched, "fio total_ios")].append(float(ios))
        per_io[(sched, "fio I/Os")].append(1.0)
        for ev, row in events.items():
            if row["value"] is None:
                continue
            rows[(sched, ev)].append(row["value"])
            per_io[(sched, ev)].append(row["value"] / ios)
    for (sched, src), vals in rows.items():
        run.add("count", "events", {"experiment": "trace", "scheduler": sched, "source": src}, vals, first[sched])
    for (sched, ev), vals in per_io.items():
        run.add("per_io", "events per I/O", {"experiment": "trace", "scheduler": sched, "event": ev}, vals, first[sched])


def _ipc(run):
    for s in run.steps_where(experiment="ipc"):
        sched = s["case"]["scheduler"]
        ev = perf_stat_csv(run.raw(s["name"], "csv").read_text())
        ios = fio_summary(run.raw(s["name"]).read_text())["total_ios"]
        case = {"experiment": "ipc", "scheduler": sched}

        def v(event):
            # perf names a counter "cycles", or "cycles:u" where it may count user space only
            row = next((r for k, r in ev.items() if k.split(":")[0] == event), None)
            return row["value"] if row else None
        ins, cyc, miss = v("instructions"), v("cycles"), v("cache-misses")
        if ins and cyc:
            run.add("ipc", "instructions/cycle", case, [ins / cyc], s["name"])
            run.add("instructions_per_io", "instructions", case, [ins / ios], s["name"])
        if miss is not None:
            run.add("cache_misses_per_io", "misses", case, [miss / ios], s["name"])


def _middle_of_hottest(counts: list[int]) -> int:
    """The row of one second's column (``counts``: samples per slice) that the per-burst
    hottest-slice measurement reports: of the rows holding the column's largest count, the
    middle one (the lower of two middles). A burst that keeps one CPU busy fills each of its
    slices to the same count (997 Hz x 20 ms, about 20 samples), so the maximum is a plateau
    across the burst window; its first row would be the burst's edge, and a short burst of
    other activity reaching the same count earlier in the second (perf's start-up, seen in the
    first burst second of a run) would be picked instead. The middle row of the tied rows is
    one of them, so the maximum is still where it is reported."""
    top = max(counts)
    tied = [row for row, c in enumerate(counts) if c == top]
    return tied[(len(tied) - 1) // 2]


def _heat(run):
    maps = run.steps_where(experiment="heat", tool="heatmap")
    records = run.steps_where(experiment="heat", tool="perf-record")
    if not maps or not records:
        return
    map_step, rec_step = maps[0]["name"], records[0]["name"]
    hm = json.loads((run.dir / "heatmap.json").read_text())
    burst = json_line(run.raw(rec_step).read_text(), "burst")
    rows, origin = hm["rows"], hm["origin"]
    ms = 1000.0 / rows
    windows = burst["bursts"]
    off = lambda t: (t - math.floor(t)) * 1000.0  # noqa: E731  offset within its second, ms
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "hottest slice (centre)"},
            [hm["hottest_slice"]["center_ms"]], map_step)
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "burst start"}, [off(a) for a, _ in windows],
            rec_step)
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "burst end"}, [off(b) for _, b in windows],
            rec_step)
    rng = hm["range"]
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "selected range start"}, [rng["start_ms"]], map_step)
    run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "selected range end"}, [rng["end_ms"]], map_step)
    inside, outside, hottest = [], [], []
    for a, b in windows:
        col = math.floor(a) - origin
        if not 0 <= col < hm["cols"] or math.floor(b) != math.floor(a):
            continue
        counts = hm["counts"][col]
        hottest.append((_middle_of_hottest(counts) + 0.5) * ms)
        lo, hi = off(a), off(b)
        ins = [c for row, c in enumerate(counts) if row * ms >= lo and (row + 1) * ms <= hi]
        outs = [c for row, c in enumerate(counts) if (row + 1) * ms <= lo or row * ms >= hi]
        if ins and outs:
            inside.append(sum(ins) / len(ins))
            outside.append(sum(outs) / len(outs))
    if hottest:
        run.add("subsecond_offset", "ms", {"experiment": "heat", "what": "hottest slice of each burst second (centre)"},
                hottest, map_step)
    if inside:
        run.add("heat_samples", "samples per slice", {"experiment": "heat", "region": "burst window"}, inside, map_step)
        run.add("heat_samples", "samples per slice", {"experiment": "heat", "region": "rest of the second"}, outside,
                map_step)
    n = _perf_samples(run, rec_step)
    if n is not None:
        run.add("perf_samples", "samples", {"experiment": "heat"}, [n], rec_step)
    run.artifact("heatmap", {"experiment": "heat"}, "heatmap.svg",
                 "Subsecond-offset heat map of perf record -a -g -F 997 (idle samples left out); "
                 "dashed lines: where burst was told to be busy; box: the range picked for the flame graph")
    titles = {"hottest range": "Flame graph of the hottest burst's time range only (perf script --time)",
              "whole recording": "Flame graph of the whole recording, every CPU"}
    for s in run.steps_where(experiment="heat", tool="flamegraph"):
        key = s["case"]["profile"]
        case = {"experiment": "heat", "profile": key}
        text = (run.dir / s["case"]["folded"]).read_text()
        run.add("share", "%", {**case, "under": "burn"}, [100.0 * share_under(text, ["burn"])], s["name"])
        run.artifact("flamegraph", case, s["case"]["svg"], titles.get(key, f"Flame graph, {key}"))
        run.artifact("folded", case, s["case"]["folded"], f"folded stacks, {key}")


def _heat_column(run):
    """One busy second among quiet ones (run.sh heat_column): its column's cells against the
    same cells of the quiet seconds before and after it, which burst slept through whole."""
    one = {"experiment": "one-second burst"}
    maps, records = run.steps_where(**one, tool="heatmap"), run.steps_where(**one, tool="perf-record")
    scripts = run.steps_where(**one, tool="perf-script")
    if not maps or not records:
        return
    map_step, rec_step = maps[0]["name"], records[0]["name"]
    hm = json.loads((run.dir / "heatmap-1s.json").read_text())
    burst = json_line(run.raw(rec_step).read_text(), "burst")
    (start, _end), quiet = burst["bursts"][0], burst["quiet_s"]
    col = math.floor(start) - hm["origin"]
    others = [c for c in range(col - quiet, col + quiet + 1) if c != col and 0 <= c < hm["cols"]]
    if not 0 <= col < hm["cols"] or not others:
        return
    run.add("heat_samples", "samples per slice", {**one, "region": "burst second"},
            [float(c) for c in hm["counts"][col]], map_step)
    run.add("heat_samples", "samples per slice", {**one, "region": "other seconds, same slices"},
            [float(c) for o in others for c in hm["counts"][o]], map_step)
    n = _perf_samples(run, rec_step)
    if n is not None:
        run.add("perf_samples", "samples", one, [n], rec_step)
    run.artifact("heatmap", one, "heatmap-1s.svg",
                 "Subsecond-offset heat map of one busy second between quiet ones (burst -n 1 -b 1000 -o 0 -q 3), "
                 "perf record -a -g -F 997, idle samples left out: a column, not a band")
    if scripts:
        run.artifact("log", {**one, "tool": "perf-script"}, "heat-1s.perf-script",
                     "perf script --header of that recording, as FlameScope reads it (copy it into FlameScope's "
                     "examples/ folder)")


def _profiler_order(label: str) -> int:
    labels = list(PROFILERS.values())
    return labels.index(label) if label in labels else len(labels)


def _overhead(run, scheduler):
    got: dict[tuple[int, str], dict[int, dict]] = defaultdict(dict)
    first: dict[tuple[int, str], str] = {}
    for s in run.steps_where(experiment="overhead", by_rep=True):
        c = s["case"]
        key = (c["numjobs"], c["profiler"])
        got[key][c["rep"]] = fio_summary(run.raw(s["name"]).read_text())
        first.setdefault(key, s["name"])
    for (nj, p), reps in sorted(got.items(), key=lambda kv: (kv[0][0], _profiler_order(kv[0][1]))):
        case = {"experiment": "overhead", "numjobs": nj, "profiler": p}
        if scheduler:
            case["scheduler"] = scheduler
        order = sorted(reps)
        run.add("iops", "IOPS", case, [reps[i]["iops"] for i in order], first[(nj, p)])
        run.add("clat", "us", {**case, "stat": "mean"}, [reps[i]["clat_mean_us"] for i in order], first[(nj, p)])
        plain = got.get((nj, PROFILERS["none"]), {})
        ratios = [reps[i]["iops"] / plain[i]["iops"] for i in order if i in plain]
        if ratios:
            run.add("iops_ratio", "ratio", case, ratios, first[(nj, p)])


def _sysbench(run):
    got: dict[str, list[dict]] = defaultdict(list)
    first: dict[str, str] = {}
    for s in run.steps_where(experiment="sysbench", by_rep=True):
        p = s["case"]["profiler"]
        got[p].append(sysbench_cpu(run.raw(s["name"]).read_text()))
        first.setdefault(p, s["name"])
    for p, runs in sorted(got.items(), key=lambda kv: _profiler_order(kv[0])):
        case = {"experiment": "sysbench", "profiler": p}
        run.add("events_per_s", "events/s", case, [r["events_per_s"] for r in runs], first[p])
        for metric, key in (("latency_min", "latency_min_ms"), ("latency_avg", "latency_avg_ms"),
                            ("latency_p95", "latency_p_ms")):
            vals = [r[key] * 1000.0 for r in runs if r[key] is not None]
            if vals:
                run.add(metric, "us", case, vals, first[p])


def collect(run) -> None:
    """Parse every step of ``run`` that has a case into measurements and artifacts (see the
    module doc). Steps without a case (knob writes, perf script, the build) are not read."""
    _sched(run, _io_poll(run))
    _flame(run)
    _trace(run)
    _ipc(run)
    _heat(run)
    _heat_column(run)
    _overhead(run, _default_scheduler(run))
    _sysbench(run)
