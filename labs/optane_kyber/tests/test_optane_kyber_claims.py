"""The optane_kyber chapter's data files: every claim can fail (and can hold), each has a role and
names the original conclusion it tests, the original's tables give the effect sizes the claims
quote, and record.py turns a run's steps, found by their cases alone, into one sample per
repetition in repetition order. No lab run: the inputs are the committed reference result and a
synthetic run directory built from captured fixtures (results/ is never written)."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labkit.parsers.jsonline import json_line
from labkit.record import Run
import refhost

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "optane_kyber"
REFERENCE = refhost.result("optane_kyber").parent
SPEC = claims.load(LAB / "claims.toml")
ORIGINAL = tomllib.loads((LAB / "original.toml").read_text())
EXERCISES = claims.load_exercises(LAB / "exercises.toml")
TIMING_METRICS = {"clat", "iops", "iops_ratio", "events_per_s", "latency_min", "latency_avg"}


def _record_module():
    spec = importlib.util.spec_from_file_location("optane_kyber_record", LAB / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


RECORD = _record_module()


@pytest.fixture(scope="module")
def reference():
    return model.load(REFERENCE / "optane_kyber.json")


FIX = ROOT / "tests" / "fixtures"
FIO_QD1 = json.loads((FIX / "fio" / "optane_kyber-randread-qd1-pvsync2.json").read_text())


def _fio(p50_us: float, iops: float) -> str:
    """fio's JSON output of the lab's QD1 job (the captured fixture) with p50 clat and IOPS set,
    laid out as fio prints it: the document opens on a line of its own (what the parser looks
    for, after fio's notes), never as one compact line."""
    j = copy.deepcopy(FIO_QD1)
    read = j["jobs"][0]["read"]
    read["clat_ns"]["percentile"]["50.000000"] = int(p50_us * 1000)
    read["iops"] = iops
    return json.dumps(j, indent=2) + "\n"


class SyntheticRun:
    """A run directory as lab.sh leaves it, written step by step: steps.tsv, raw/<name>.{cmd,out,err,case}
    and the files the steps wrote. Step names are opaque (s001, s002, ...) unless given: record.py
    must find every step by its case alone."""

    def __init__(self, root: Path, opaque: bool = True):
        self.dir = root
        (root / "raw").mkdir(parents=True)
        shutil.copy(REFERENCE / "optane_kyber" / "host.json", root / "host.json")
        self.rows: list[str] = []
        self.opaque = opaque

    def step(self, name: str, group: str, case: dict | None = None, out: str = "", err: str = "",
             files: dict[str, str] | None = None, raw: dict[str, str] | None = None) -> str:
        name = f"s{len(self.rows) + 1:03d}" if self.opaque else name.replace(" ", "_")
        texts = {"cmd": f"true {name}", "out": out, "err": err, **(raw or {})}
        if case:
            texts["case"] = "".join(f"{k}={v}\n" for k, v in case.items())
        for ext, text in texts.items():
            (self.dir / "raw" / f"{name}.{ext}").write_text(text)
        for rel, text in (files or {}).items():
            (self.dir / rel).write_text(text)
        self.rows.append(f"{name}\t{group}\tok\t0\t1.0\tsuccess\t")
        return name

    def record(self) -> Run:
        (self.dir / "steps.tsv").write_text("\n".join(self.rows) + "\n")
        run = Run("optane_kyber", self.dir, quick=True)
        RECORD.collect(run)
        return run


# ---- the one-second burst (run.sh heat_column), built from the reference's periodic heat map ----
QUIET_S = 3  # burst -q: quiet seconds each side of the busy one (run.sh's argument, not a measurement)


def _reference_heat() -> tuple[dict, dict]:
    ref = REFERENCE / "optane_kyber"
    return (json.loads((ref / "heatmap.json").read_text()),
            json_line((ref / "raw" / "heat.record.out").read_text(), "burst"))


def _burst_line(burst: dict, col: int, origin: int) -> str:
    """burst's JSON line for one busy second: the reference burst of column ``col``, moved back
    by its phase to the start of its second and stretched to the whole second, ``-q QUIET_S``."""
    a, b = next((a, b) for a, b in burst["bursts"] if math.floor(a) - origin == col)
    start = a - burst["phase_ms"] / 1000.0
    end = start + (b - a) * 1000.0 / burst["busy_ms"]
    return json.dumps({**burst, "busy_ms": 1000, "phase_ms": 0, "quiet_s": QUIET_S, "bursts": [[start, end]]}) + "\n"


def _column_from_reference() -> tuple[dict, str]:
    """A heat map of one busy second among quiet ones, from the reference's counts: the busy
    column holds the cells inside the reference bursts' windows, cycled over all 50 slices, and
    every other column its own cells outside them. The busy column is the reference's hottest
    range's, moved inward where fewer than QUIET_S columns lie on one side of it, so that the
    map has a quiet run's seconds on both sides."""
    hm, burst = _reference_heat()
    rows, origin = hm["rows"], hm["origin"]
    col = min(max(hm["range"]["col"], QUIET_S), len(hm["counts"]) - 1 - QUIET_S)
    lo, hi = burst["phase_ms"] * rows // 1000, (burst["phase_ms"] + burst["busy_ms"]) * rows // 1000
    hot = [c for column in hm["counts"] for c in column[lo:hi]]
    counts = []
    for k, column in enumerate(hm["counts"]):
        cells = hot if k == col else column[:lo] + column[hi:]
        counts.append([cells[i % len(cells)] for i in range(rows)])
    return {**hm, "counts": counts}, _burst_line(burst, col, origin)


def _band_as_one_second() -> tuple[dict, str]:
    """The reference's periodic map as it is (a band), its burst read as one busy second."""
    hm, burst = _reference_heat()
    return hm, _burst_line(burst, hm["range"]["col"], hm["origin"])


def _one_second_steps(r: "SyntheticRun", hm: dict, line: str) -> None:
    one = {"experiment": "one-second burst"}
    r.step("heat.1s.record", "heat", {**one, "tool": "perf-record"}, out=line,
           err=(REFERENCE / "optane_kyber" / "raw" / "heat.record.err").read_text())
    r.step("heat.1s.script", "heat", {**one, "tool": "perf-script"}, files={"heat-1s.perf-script": "# header\n"})
    r.step("heat.1s.map", "heat", {**one, "tool": "heatmap"},
           files={"heatmap-1s.json": json.dumps(hm), "heatmap-1s.svg": "<svg/>"})


def p50(rep: int, sched: str) -> float:
    """The p50 (µs) the synthetic sched run of repetition ``rep`` prints: distinct per step."""
    return 10.0 + rep + (0.5 if sched == "kyber" else 0.0)


def _build(root: Path, *, opaque: bool = True, reps: int = 3, flame_reps: int = 3) -> SyntheticRun:
    """A synthetic run of every group, ``reps`` repetitions each (kyber's sched steps written in
    reverse repetition order, to show that record.py orders samples by the case's rep)."""
    r = SyntheticRun(root, opaque)
    dev = {"experiment": "device"}
    r.step("device.schedulers", "device", {**dev, "knob": "scheduler"}, out="[none] mq-deadline kyber bfq\n")
    r.step("device.io_poll", "device", {**dev, "knob": "io_poll"}, out="0\n")
    r.step("sched.none.1.set", "sched")  # a knob write: no case, not read
    order = [(i, s) for i in range(1, reps + 1) for s in ("none", "mq-deadline", "bfq")]
    order += [(i, "kyber") for i in range(reps, 0, -1)]
    for i, s in order:
        r.step(f"sched.{s}.{i}", "sched", {"experiment": "sched", "scheduler": s, "rep": i, "cpu": 1},
               out=_fio(p50(i, s), 1e6 / p50(i, s)))
    kyber_share = {"none": "", "kyber": "fio;submit_bio;blk_mq_submit_bio;kyber_insert_requests 7\n"}
    for i in range(1, flame_reps + 1):
        for s in ("none", "kyber"):
            c = {"experiment": "flame", "scheduler": s, "rep": i}
            r.step(f"flame.{s}.{i}.record", "flame", {**c, "tool": "perf-record"},
                   err=f"[ perf record: Captured and wrote 0.1 MB x.data ({100 * i} samples) ]\n")
            folded = f"flame-{s}.{i}.folded" if i > 1 else f"flame-{s}.folded"
            text = ("fio;preadv2;io_schedule 80\n" + "fio;preadv2;blk_mq_poll 3\n" + kyber_share[s]
                    + f"fio;preadv2;loop_queue_rq {10 * i}\n")
            tool = {"tool": "fold"} if i > 1 else {"tool": "flamegraph", "svg": f"flame-{s}.svg"}
            files = {folded: text, **({f"flame-{s}.svg": "<svg/>"} if i == 1 else {})}
            r.step(f"flame.{s}.{i}.fold", "flame", {**c, **tool, "folded": folded}, files=files)
    r.step("flame.diff", "flame", {"experiment": "flame", "tool": "diff-flamegraph", "folded": "flame-diff.folded",
                                   "svg": "flame-diff.svg"}, files={"flame-diff.folded": "fio 1 2\n", "flame-diff.svg": "<svg/>"})
    trace_fio = (FIX / "fio" / "optane_kyber-randread-qd1-kyber-under-perf-stat.json").read_text()
    trace_csv = (FIX / "perf" / "optane_kyber-stat-kyber-tracepoints.csv").read_text()
    for i in range(1, reps + 1):
        for s in ("none", "kyber"):
            r.step(f"trace.{s}.{i}", "trace", {"experiment": "trace", "scheduler": s, "rep": i}, out=trace_fio,
                   raw={"csv": trace_csv})
    ref = REFERENCE / "optane_kyber"
    r.step("heat.record", "heat", {"experiment": "heat", "tool": "perf-record"},
           out=(ref / "raw" / "heat.record.out").read_text(), err=(ref / "raw" / "heat.record.err").read_text())
    r.step("heat.map", "heat", {"experiment": "heat", "tool": "heatmap"},
           files={"heatmap.json": (ref / "heatmap.json").read_text(), "heatmap.svg": "<svg/>"})
    for profile, stem in (("hottest range", "heat-range"), ("whole recording", "heat-all")):
        r.step(f"heat.{stem}", "heat", {"experiment": "heat", "tool": "flamegraph", "profile": profile,
                                        "folded": f"{stem}.folded", "svg": f"{stem}.svg"},
               files={f"{stem}.folded": "burst;main;burn 9\nswapper;cpu_idle 1\n", f"{stem}.svg": "<svg/>"})
    _one_second_steps(r, *_column_from_reference())
    iops = {"plain": 100.0, "perf stat": 95.0, "record (defaults)": 90.0, "record 997 Hz": 80.0, "record 9973 Hz": 60.0}
    for i in range(1, reps + 1):
        for nj in (1, 2):
            for prof, x in iops.items():
                r.step(f"overhead.j{nj}.{prof}.{i}", "overhead",
                       {"experiment": "overhead", "numjobs": nj, "profiler": prof, "rep": i},
                       out=_fio(12.0, x * nj * (1 + i / 100)))
    sysbench = (FIX / "sysbench" / "optane_kyber-cpu-1s.txt").read_text()
    for i in range(1, reps + 1):
        for prof in ("plain", "record (defaults)"):
            r.step(f"sysbench.{prof}.{i}", "sysbench", {"experiment": "sysbench", "profiler": prof, "rep": i},
                   out=sysbench)
    return r


@pytest.fixture(scope="module")
def rerecorded(reference, tmp_path_factory):
    """A synthetic run of every group, turned into measurements by the current record.py."""
    run = _build(tmp_path_factory.mktemp("optane_kyber") / "run").record()
    r = copy.deepcopy(reference)
    r["measurements"], r["steps"], r["artifacts"] = run.measurements, run.steps, run.artifacts
    return r, run.dir


def _samples(result: dict, metric: str, **case) -> list[float]:
    return next(m["samples"] for m in result["measurements"]
                if m["metric"] == metric and all(m["case"].get(k) == v for k, v in case.items()))


def _with(reference, metric, *sides) -> dict:
    r = copy.deepcopy(reference)
    r["measurements"] = [model.measurement(metric, "x", dict(case), samples) for case, samples in sides]
    return r


def _scaled(samples, k):
    return [x * k for x in samples]


def _sides(claim, reference, base, wrong: bool) -> dict:
    """A result on which ``claim`` clearly holds (wrong=False) or clearly fails (wrong=True):
    the sides' sample ranges never overlap, so the noise rule cannot call it a draw."""
    a, b, m = claim["a"], claim["b"], claim["metric"]
    f = float(claim.get("factor", 1.0))
    far = 3 * max(f, 1 / f)
    if claim["kind"] == "within":  # max(a/b, b/a) ≤ f
        return _with(reference, m, (a, base), (b, _scaled(base, far if wrong else 1.0)))
    rel = claim["relation"]
    if rel == "less":  # a·f < b
        return _with(reference, m, (a, base), (b, _scaled(base, 1 / far if wrong else far)))
    if rel in ("greater", "not_less"):  # a > b·f ; a·f ≥ b
        return _with(reference, m, (a, _scaled(base, 1 / far if wrong else far)), (b, base))
    raise AssertionError(rel)


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_can_fail_and_can_hold(claim, reference):
    # real samples with a narrow spread: kyber's p50 clat (twenty, enough pairs for a sign
    # interval); for the 2 % agreement of per-I/O counts, those counts
    base = (_samples(reference, "per_io", experiment="trace", scheduler="kyber", event="block:block_rq_issue")
            if claim["metric"] == "per_io" else
            _samples(reference, "clat", experiment="sched", scheduler="kyber", stat="p50"))
    holds = claims.evaluate_one(claim, _sides(claim, reference, base, wrong=False))
    fails = claims.evaluate_one(claim, _sides(claim, reference, base, wrong=True))
    assert holds["verdict"] == "holds", holds
    assert fails["verdict"] == "fails", fails


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_says_whether_it_is_about_speed(claim):
    assert claim["timing"] is (claim["metric"] in TIMING_METRICS), "speed is timing; counts, shares, offsets are not"


def test_claims_compare_medians_not_means():
    """The original quotes rounded figures and one mean; the claims compare medians."""
    assert all(c.get("statistic", "median") == "median" for c in SPEC)
    kyber = next(c for c in SPEC if c["id"] == "kyber-adds-latency")
    assert kyber["a"]["stat"] == kyber["b"]["stat"] == "p50"


def test_claim_keys_exist_in_what_the_lab_records(rerecorded):
    """Every selector key of a claim or exercise is a case key the lab records, and every
    profiler named is one record.py labels (values may be absent from an older result)."""
    r, _ = rerecorded
    keys = {k for m in r["measurements"] for k in m["case"]}
    metrics = {m["metric"] for m in r["measurements"]}
    checks = list(SPEC) + [dict(e["check"]) for e in EXERCISES]
    for c in checks:
        assert c["metric"] in metrics, c
        for sel in (c.get("a"), c.get("b")):
            assert set(sel) <= keys, (c, sel)
            if "profiler" in sel:
                assert sel["profiler"] in RECORD.PROFILERS.values(), sel
    for ratio in ORIGINAL["ratio"]:
        here = ratio["here"]
        assert here["metric"] in metrics, ratio["id"]
        for sel in (here["a"], here["b"]):
            assert set(sel) <= keys, (ratio["id"], sel)
            assert sel.get("profiler", "plain") in RECORD.PROFILERS.values(), sel


def _profiled(reference) -> dict[str, list[str]]:
    """The reference run's commands by the ``profiler`` label their steps carry."""
    out: dict[str, list[str]] = {}
    for st in reference["steps"]:
        label = (st.get("case") or {}).get("profiler")
        if label is not None:
            out.setdefault(label, []).append(st["command"])
    return out


def test_each_profiler_label_names_the_command_its_steps_ran(reference):
    """In the reference run, every label record.py knows (``PROFILERS``) was used, and each
    says what its steps ran: no perf at all, ``perf stat``, or ``perf record`` with its
    call graphs and rate."""
    runs = _profiled(reference)
    assert set(runs) == set(RECORD.PROFILERS.values())
    record = re.compile(r"^perf record --no-buildid-cache --no-bpf-event (?P<opts>.*?)-o \S+ -- ")
    for label, commands in runs.items():
        for cmd in commands:
            if label == "plain":
                assert "perf" not in cmd.split(), cmd
            elif label == "perf stat":
                assert cmd.startswith("perf stat "), cmd
            else:
                m = record.match(cmd)
                assert m, cmd
                hz = re.fullmatch(r"record (\d+) Hz", label)
                assert m["opts"].split() == (["-g", "-F", hz[1]] if hz else []), (label, cmd)


def test_the_original_perf_record_is_run_as_published(reference):
    """The original ran plain `perf record` (no -g, perf's default rate): so does the lab, on
    fio's QD1 job and on sysbench. Its fixed options only keep perf from writing into ~/.debug
    and from reading every loaded BPF program at its start (a side-band the original's perf
    4.15 did not have)."""
    commands = _profiled(reference)[RECORD.PROFILERS["rec"]]
    assert any(" -- fio " in c or " -- taskset -c 1 fio " in c for c in commands), commands
    assert any(" -- sysbench cpu " in c for c in commands), commands
    for cmd in commands:
        opts = cmd.split(" -- ", 1)[0].split()
        assert opts[:4] == ["perf", "record", "--no-buildid-cache", "--no-bpf-event"], cmd
        assert not {"-g", "-F", "-c", "-e", "--call-graph"} & set(opts), cmd


def test_record_reads_cases_not_step_names(tmp_path):
    """The same steps under the lab's own names and under opaque names give the same
    measurements and artifacts: record.py finds every step by its case."""
    named = _build(tmp_path / "named", opaque=False).record()
    opaque = _build(tmp_path / "opaque", opaque=True).record()
    strip = lambda ms: [{k: v for k, v in m.items() if k != "step"} for m in ms]  # noqa: E731
    assert strip(named.measurements) == strip(opaque.measurements)
    assert named.artifacts == opaque.artifacts
    assert {m["case"]["experiment"] for m in opaque.measurements} == {
        "sched", "flame", "trace", "heat", "one-second burst", "overhead", "sysbench"}


def test_samples_are_in_repetition_order(rerecorded):
    """Paired claims read sample i of each side as repetition i: record.py orders samples by the
    case's rep, not by the order the steps ran (kyber's steps were written last to first)."""
    r, _ = rerecorded
    for s in ("none", "kyber", "mq-deadline", "bfq"):
        assert _samples(r, "clat", experiment="sched", scheduler=s, stat="p50") == pytest.approx(
            [p50(i, s) for i in (1, 2, 3)])
    kyber = next(c for c in SPEC if c["id"] == "kyber-adds-latency")
    assert kyber.get("paired") is True
    ratios = [a / b for a, b in zip(_samples(r, "clat", **kyber["a"]), _samples(r, "clat", **kyber["b"]))]
    assert ratios == pytest.approx([p50(i, "kyber") / p50(i, "none") for i in (1, 2, 3)])
    assert _samples(r, "clat", experiment="sched", scheduler="none", stat="p50") and all(
        m["case"]["io_poll"] == 0 for m in r["measurements"] if m["case"]["experiment"] == "sched")


def test_overhead_ratios_pair_repetitions(rerecorded):
    r, _ = rerecorded
    for nj in (1, 2):
        plain = _samples(r, "iops", experiment="overhead", numjobs=nj, profiler="plain")
        rec = _samples(r, "iops", experiment="overhead", numjobs=nj, profiler="record (defaults)")
        ratio = _samples(r, "iops_ratio", experiment="overhead", numjobs=nj, profiler="record (defaults)")
        assert ratio == pytest.approx([a / b for a, b in zip(rec, plain)])
        assert ratio == pytest.approx([0.9] * 3), "the synthetic run's record/plain IOPS, 90/100"
        assert plain == sorted(plain), "repetition order"
    assert all(m["case"]["scheduler"] == "none" for m in r["measurements"] if m["case"]["experiment"] == "overhead")


def test_heat_is_one_sample_per_burst(rerecorded):
    r, run_dir = rerecorded
    starts = _samples(r, "subsecond_offset", experiment="heat", what="burst start")
    ends = _samples(r, "subsecond_offset", experiment="heat", what="burst end")
    hottest = _samples(r, "subsecond_offset", experiment="heat", what="hottest slice of each burst second (centre)")
    inside = _samples(r, "heat_samples", experiment="heat", region="burst window")
    rest = _samples(r, "heat_samples", experiment="heat", region="rest of the second")
    assert len(hottest) == len(inside) == len(rest) == len(starts) == len(ends)
    assert all(20 * math.floor(h / 20) + 10 == h for h in hottest), "centres of 20 ms slices"
    # the burst program really burned a CPU in its windows: a full 20 ms slice of one CPU at 997 Hz is ~20 samples
    assert min(inside) >= 15
    assert _samples(r, "share", experiment="heat", profile="hottest range", under="burn") == [90.0]


def test_hottest_slice_of_a_burst_second_is_inside_its_window(rerecorded):
    """Burst by burst, the reported hottest slice lies in the window burst ran in: a saturated
    burst is a plateau of equal counts, and the middle of the plateau is reported, not its
    edge (which would put every sample at the window's first slice)."""
    r, _ = rerecorded
    starts = _samples(r, "subsecond_offset", experiment="heat", what="burst start")
    ends = _samples(r, "subsecond_offset", experiment="heat", what="burst end")
    hottest = _samples(r, "subsecond_offset", experiment="heat", what="hottest slice of each burst second (centre)")
    assert all(a <= h <= b for a, h, b in zip(starts, hottest, ends)), (starts, hottest, ends)


def test_a_tie_is_broken_at_the_middle_of_the_tied_rows():
    """The rule on a column where other activity reaches the burst's count first (rows 0-5,
    as perf's start-up did in a first burst second) and the burst fills rows 20-29: the middle
    of all tied rows, which is one of them; a single maximum is itself; a lone early spike
    above the plateau still wins (the rule reports the maximum, it does not look for bursts)."""
    middle = _record_module()._middle_of_hottest
    startup_and_burst = [20] * 6 + [0] * 14 + [20] * 10 + [0] * 20
    assert middle(startup_and_burst) == 21
    assert middle([0] * 20 + [20] * 10 + [0] * 20) == 24
    assert middle([0, 3, 1]) == 1
    assert middle([25] + [0] * 19 + [20] * 10 + [0] * 20) == 0


def test_per_io_has_its_reference_of_one(rerecorded):
    r, _ = rerecorded
    for sched in ("none", "kyber"):
        ios = _samples(r, "count", experiment="trace", scheduler=sched, source="fio total_ios")
        assert len(ios) == 3
        assert _samples(r, "per_io", experiment="trace", scheduler=sched, event="fio I/Os") == [1.0] * len(ios)


def test_flame_repetitions_add_samples(tmp_path):
    """Each scheduler is profiled several times; each folded repetition adds one share and one
    sample count, in repetition order; only repetition 1 is drawn."""
    run = _build(tmp_path / "run", flame_reps=3).record()
    r = {"measurements": run.measurements}
    kyber = _samples(r, "share", experiment="flame", scheduler="kyber", under="kyber")
    assert kyber == pytest.approx([100 * 7 / (90 + 10 * i) for i in (1, 2, 3)])
    assert _samples(r, "share", experiment="flame", scheduler="none", under="kyber") == [0.0] * 3
    assert _samples(r, "perf_samples", experiment="flame", scheduler="none") == [100, 200, 300]
    assert [a["path"] for a in run.artifacts if a["kind"] == "flamegraph" and a["case"].get("experiment") == "flame"] == [
        "optane_kyber/flame-none.svg", "optane_kyber/flame-kyber.svg"]
    assert [a["path"] for a in run.artifacts if a["kind"] == "diff_flamegraph"] == ["optane_kyber/flame-diff.svg"]


def test_the_instruments_are_not_conclusions():
    """The checks of the lab's own instruments (flame frames, tracepoint counts, the heat map's
    burst) are instruments, and kyber's latency is the original's conclusion. (Roles and
    conclusions of every lab: tests/test_claims_contract.py.)"""
    by_id = {c["id"]: c for c in SPEC}
    for cid in ("kyber-frames-only-with-kyber", "one-issue-per-io", "kyber-tracepoints-not-per-io",
                "hottest-slice-after-burst-start", "hottest-slice-before-burst-end", "burst-window-hotter",
                "one-second-burst-is-a-column"):
        assert by_id[cid]["role"] == "instrument", cid
    assert by_id["kyber-adds-latency"]["role"] == "conclusion"


def test_no_claim_says_the_loop_device_polls():
    """The lab's loop device cannot poll: a statement may mention polling only to say so."""
    for c in SPEC:
        text = c["statement"].lower()
        if "poll" in text:
            assert "does not poll" in text, c["id"]


def _number(cell: str) -> float:
    """The number in a published cell: '~13' → 13, '412k' → 412000, '9092.68' → 9092.68."""
    m = re.search(r"(\d+(?:\.\d+)?)(k?)", cell)
    assert m, cell
    return float(m.group(1)) * (1000 if m.group(2) else 1)


def _cell(table: dict, row: str, column: str) -> str:
    line = next(x for x in table["rows"] if x[0] == row)
    return line[table["columns"].index(column)]


def _original_ratio(ratio_id: str) -> float:
    tables = {t["id"]: t for t in ORIGINAL["table"]}
    o = next(r for r in ORIGINAL["ratio"] if r["id"] == ratio_id)["original"]
    t = tables[o["table"]]
    return _number(_cell(t, *o["a"])) / _number(_cell(t, *o["b"]))


def test_original_tables_are_well_formed():
    machines = {m["id"]: m for m in ORIGINAL["machine"]}
    assert all(m.get("kernel") for m in machines.values())
    assert "/" not in ORIGINAL["source"]["seed"]
    for t in ORIGINAL["table"]:
        assert set(t.get("machines", [t.get("machine")])) <= set(machines), t["id"]
        assert all(len(r) == len(t["columns"]) for r in t["rows"]), t["id"]
    assert machines["old"]["kernel"] == machines["fresh"]["kernel"] == "4.15", "the same kernel build on both"


def test_original_figures_add_up_as_the_notes_say():
    tables = {t["id"]: t for t in ORIGINAL["table"]}
    qd1 = tables["fio-qd1-perf"]
    lat = _number(_cell(qd1, "lat avg (nsec)", "perf record")) - _number(_cell(qd1, "lat avg (nsec)", "plain"))
    assert round(lat, 1) == 8.4 and "8.4 ns" in qd1["note"]
    assert f"{_original_ratio('perf-record-qd1'):.4f}" in qd1["note"]
    four = tables["fio-4jobs-perf"]
    lost = 1 - _original_ratio("perf-record-loaded")
    assert f"{100 * lost:.1f} %" in four["note"] and "less than 1 %" in four["note"]
    sb = tables["sysbench"]
    assert round(_number(_cell(sb, "per-request min (ms)", "perf record")) - _number(_cell(sb, "per-request min (ms)", "plain")), 2) == 0.27
    q = tables["qd1"]
    assert f"{1e6 / (_number(_cell(q, 'old build', 'IOPS (k)')) * 1000):.1f} µs" in q["note"]


def test_claims_quote_the_originals_effect_sizes():
    by_id = {c["id"]: c for c in SPEC}
    kyber = _original_ratio("kyber-vs-none")
    assert f"{kyber:.1f}×" in by_id["kyber-adds-latency"]["statement"]
    assert 1 < by_id["kyber-adds-latency"]["factor"] < kyber
    # the load claim compares the two shares perf leaves: its threshold is the original's
    # 4-job share ÷ its QD1 share (run times for the same 4096 MiB), both quoted
    qd1 = _original_ratio("perf-record-qd1")   # IOPS share under perf: plain ÷ perf record run time
    loaded = _original_ratio("perf-record-loaded")
    c = by_id["perf-record-costs-more-under-load"]
    assert f"{qd1:.4f}" in c["statement"] and f"{loaded:.3f}" in c["statement"]
    assert 1 / c["factor"] == pytest.approx(loaded / qd1, abs=1e-3)
    assert f"{loaded / qd1:.3f}" in c["statement"]
    events = _original_ratio("sysbench-events")
    c = by_id["sysbench-fewer-events-under-perf"]
    assert f"{100 * (1 - events):.1f} %" in c["statement"]
    assert 1 / c["factor"] == pytest.approx(events, abs=1e-4)


def test_what_nothing_here_can_test_is_untestable_not_failed():
    """The original's QD1 perf cost was measured on a fio that polled, and the ceph-osd second on
    a host with a failing memory module: no host of ours has either, so the two conclusions say
    why (original.toml), no conclusion claim tests them, and the heat-map claims that check the
    tool on the lab's synthetic burst are instrument checks."""
    con = {c["id"]: c for c in ORIGINAL["conclusion"]}
    assert "RWF_HIPRI" in con["perf-cheap-at-qd1"]["untestable"]
    assert "9650b453a3d4" in con["perf-cheap-at-qd1"]["untestable"]
    assert "instrument" in con["heat-map-finds-the-second"]["untestable"]
    tested = {c.get("conclusion") for c in SPEC}
    assert not {"perf-cheap-at-qd1", "heat-map-finds-the-second"} & tested
    heat = [c for c in SPEC if c["metric"] in ("subsecond_offset", "heat_samples")]
    assert len(heat) == 4 and all(c["role"] == "instrument" for c in heat)
    assert "perf-record-qd1-nearly-free" not in {c["id"] for c in SPEC}


def test_the_sysbench_machine_is_not_named():
    """The write-up names no machine for its sysbench runs: the table and its conclusion are not
    labelled with the postscript host's kernel."""
    machines = {m["id"]: m for m in ORIGINAL["machine"]}
    table = next(t for t in ORIGINAL["table"] if t["id"] == "sysbench")
    con = next(c for c in ORIGINAL["conclusion"] if c["id"] == "perf-costs-cpu-bound")
    assert table["machine"] == con["machine"] == "sysbench"
    assert machines["sysbench"]["kernel"] == "not stated"


# ---- the recast claims on hand-built results ------------------------------------------------
# Each side is built from real samples of the reference run (scaled, reversed), never typed.

def _verdict(claim_id: str, result: dict) -> str:
    claim = next(c for c in SPEC if c["id"] == claim_id)
    return claims.evaluate_one(claim, result)["verdict"]


def test_kyber_against_mq_deadline_holds_when_they_cost_the_same(reference):
    c = next(c for c in SPEC if c["id"] == "kyber-costs-what-mq-deadline-costs")
    assert c["kind"] == "within" and c["b"]["scheduler"] == "mq-deadline" and c["a"]["scheduler"] == "kyber"
    # kyber's runs at or above their median: one group of runs (on a reference whose pinned runs
    # fall into two groups far apart, even a side against itself is too spread to show a
    # difference under 10 %, and the claim rightly stays inconclusive there)
    runs = _samples(reference, "clat", **c["a"])
    middle = sorted(runs)[len(runs) // 2]
    kyber = [x for x in runs if x >= middle]
    same = _with(reference, "clat", (c["a"], kyber), (c["b"], kyber[::-1]))
    assert _verdict(c["id"], same) == "holds"
    # kyber's own work on top of mq-deadline's, as large as the whole gap kyber ÷ none claims
    dearer = _with(reference, "clat", (c["a"], kyber), (c["b"], _scaled(kyber, 1 / (1.1 * c["factor"] ** 2))))
    assert _verdict(c["id"], dearer) == "fails"
    cheaper = _with(reference, "clat", (c["a"], kyber), (c["b"], _scaled(kyber, 1.1 * c["factor"] ** 2)))
    assert _verdict(c["id"], cheaper) == "fails"


def test_kyber_against_mq_deadline_reads_the_reference_runs(reference):
    """Both sides exist in the committed full run (quick runs have mq-deadline too)."""
    c = next(c for c in SPEC if c["id"] == "kyber-costs-what-mq-deadline-costs")
    assert claims.select(reference, c["metric"], c["a"]) and claims.select(reference, c["metric"], c["b"])
    assert claims.evaluate_one(c, reference)["verdict"] != "untested"


def test_perf_cost_under_load_is_a_ratio_of_ratios(reference):
    """The load claim compares perf's share at 2 jobs with its share at 1 job, repetition by
    repetition: it holds where the share falls with load (the original's point) and fails where
    it rises, whatever the 1-job cost is."""
    c = next(c for c in SPEC if c["id"] == "perf-record-costs-more-under-load")
    assert c["metric"] == "iops_ratio" and c["paired"] is True
    assert c["a"] == {**c["b"], "numjobs": 2} and c["b"]["numjobs"] == 1
    one = _samples(reference, "iops_ratio", **c["b"])
    f = float(c["factor"])
    grows = _with(reference, "iops_ratio", (c["b"], one), (c["a"], _scaled(one, 1 / (1.1 * f))))
    assert _verdict(c["id"], grows) == "holds"
    shrinks = _with(reference, "iops_ratio", (c["b"], one), (c["a"], _scaled(one, 1.1)))
    assert _verdict(c["id"], shrinks) == "fails"
    flat = _with(reference, "iops_ratio", (c["b"], one), (c["a"], list(one)))
    assert _verdict(c["id"], flat) == "fails", "no growth is not the original's growth"


def test_exercises_are_well_formed(rerecorded):
    """2-4 exercises, each with the command to run and a check the claims engine evaluates."""
    r, _ = rerecorded
    assert 2 <= len(EXERCISES) <= 4
    for e in EXERCISES:
        assert "labs/optane_kyber/run.sh" in e["change"]
        assert claims.evaluate_one(claims.exercise_claim(e), r)["verdict"] in claims.VERDICTS


def _one_second_result(reference, tmp_path: Path, hm: dict, line: str) -> dict:
    """The reference result with the measurements record.py makes of a one-second run alone."""
    r = SyntheticRun(tmp_path / "run")
    r.step("device.io_poll", "device", {"experiment": "device", "knob": "io_poll"}, out="0\n")
    _one_second_steps(r, hm, line)
    run = r.record()
    out = copy.deepcopy(reference)
    out["measurements"], out["steps"], out["artifacts"] = run.measurements, run.steps, run.artifacts
    return out


def test_one_second_burst_is_a_column_holds_on_a_column(reference, tmp_path):
    """A busy second whose every slice is as hot as the reference bursts' windows, among seconds
    holding the reference's quiet cells: the claim holds, read from the map by record.py."""
    r = _one_second_result(reference, tmp_path, *_column_from_reference())
    one = {"experiment": "one-second burst"}
    burst = _samples(r, "heat_samples", **one, region="burst second")
    others = _samples(r, "heat_samples", **one, region="other seconds, same slices")
    assert len(burst) == 50 and len(others) == 2 * QUIET_S * 50, "one cell per slice; the quiet seconds on both sides"
    assert _verdict("one-second-burst-is-a-column", r) == "holds"
    assert {a["path"] for a in r["artifacts"]} == {"optane_kyber/heatmap-1s.svg", "optane_kyber/heat-1s.perf-script"}


def test_one_second_burst_is_a_column_fails_on_a_band(reference, tmp_path):
    """The reference's periodic burst (a band) read as if its burst were one second: the same
    slices of the other seconds are as hot, so the map shows no column and the claim fails."""
    r = _one_second_result(reference, tmp_path, *_band_as_one_second())
    assert _verdict("one-second-burst-is-a-column", r) == "fails"


def test_one_second_burst_is_untested_without_its_steps(reference):
    """Without the one-second recording (the reference, less its measurements) the claim is
    untested."""
    bare = {**reference, "measurements": [m for m in reference["measurements"]
                                          if m["case"].get("experiment") != "one-second burst"]}
    assert _verdict("one-second-burst-is-a-column", bare) == "untested"
