"""The optane_kyber chapter's data files: every claim can fail (and can hold), each names the
original conclusion it tests, the original's tables give the effect sizes the claims quote, and
record.py turns repeated profiles and bursts into one sample per repetition. No lab run: the inputs
are the committed reference result and its raw outputs (copied; results/ is never written)."""

from __future__ import annotations

import copy
import importlib.util
import math
import re
import shutil
import tomllib
from pathlib import Path

import pytest

from labkit import claims, model
from labkit.record import Run

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "optane_kyber"
REFERENCE = ROOT / "results" / "epyc-kvm-2vcpu"
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


def _rerecord(run_dir: Path, reference: dict) -> dict:
    run = Run("optane_kyber", run_dir, quick=False)
    RECORD.collect(run)
    r = copy.deepcopy(reference)
    r["measurements"], r["steps"] = run.measurements, run.steps
    return r


@pytest.fixture(scope="module")
def rerecorded(reference, tmp_path_factory):
    """The reference run's raw outputs turned into measurements by the current record.py."""
    run_dir = tmp_path_factory.mktemp("optane_kyber") / "run"
    shutil.copytree(REFERENCE / "optane_kyber", run_dir)
    return _rerecord(run_dir, reference), run_dir


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
    # real samples with a narrow spread: kyber's p50 clat; for the 2 % agreement, per-I/O counts
    base = (_samples(reference, "per_io", experiment="trace", scheduler="kyber", event="block:block_rq_issue")
            if claim["kind"] == "within" else
            _samples(reference, "clat", experiment="sched", scheduler="kyber", stat="p50"))
    holds = claims.evaluate_one(claim, _sides(claim, reference, base, wrong=False))
    fails = claims.evaluate_one(claim, _sides(claim, reference, base, wrong=True))
    assert holds["verdict"] == "holds", holds
    assert fails["verdict"] == "fails", fails


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_names_its_source_and_timing(claim):
    assert claim.get("source"), "every claim names the original conclusion it tests"
    assert claim["timing"] is (claim["metric"] in TIMING_METRICS), "speed is timing; counts, shares, offsets are not"


def test_claims_compare_medians_not_means():
    """The original quotes rounded figures and one mean; the claims compare medians (issue 13)."""
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


def test_the_original_perf_record_is_run_as_published():
    """The original ran plain `perf record` (no -g, perf's default rate): so does the lab."""
    run_sh = (LAB / "run.sh").read_text()
    assert RECORD.PROFILERS["rec"] == "record (defaults)"
    assert re.search(r'rec\) lab_run "\$name" -- perf record --no-buildid-cache -o \S+ -- "\$\{job\[@\]\}"', run_sh)
    assert re.search(r'sysbench\.rec\.\$i" -- perf record --no-buildid-cache -o \S+ -- \\\n\s+sysbench cpu', run_sh)


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


def test_per_io_has_its_reference_of_one(rerecorded):
    r, _ = rerecorded
    for sched in ("none", "kyber"):
        ios = _samples(r, "count", experiment="trace", scheduler=sched, source="fio total_ios")
        assert _samples(r, "per_io", experiment="trace", scheduler=sched, event="fio I/Os") == [1.0] * len(ios)


def test_later_flame_repetitions_add_samples(reference, tmp_path):
    """Full mode profiles each scheduler more than once; each folded repetition adds one share.
    The later repetitions here are the reference's own folded stacks and perf output, renamed."""
    run_dir = tmp_path / "run"
    shutil.copytree(REFERENCE / "optane_kyber", run_dir)
    # A full-mode reference already has repetitions 2 and 3: drop them, then make them from repetition 1.
    steps = (run_dir / "steps.tsv").read_text().splitlines()
    (run_dir / "steps.tsv").write_text("".join(line + "\n" for line in steps
                                               if not re.match(r"flame\.(none|kyber)\.[23]\.", line)))
    rows = []
    for i in (2, 3):
        for s in ("none", "kyber"):
            shutil.copy(run_dir / f"flame-{s}.folded", run_dir / f"flame-{s}.{i}.folded")
            for ext in ("cmd", "out", "err"):
                shutil.copy(run_dir / "raw" / f"flame.{s}.record.{ext}", run_dir / "raw" / f"flame.{s}.{i}.record.{ext}")
                shutil.copy(run_dir / "raw" / f"flame.{s}.flame.{ext}", run_dir / "raw" / f"flame.{s}.{i}.fold.{ext}")
            rows += [f"flame.{s}.{i}.record\tflame\tok\t0\t5.0\tsuccess\t", f"flame.{s}.{i}.fold\tflame\tok\t0\t0.1\tsuccess\t"]
    with open(run_dir / "steps.tsv", "a") as f:
        f.write("\n".join(rows) + "\n")
    r = _rerecord(run_dir, reference)
    one = _samples(reference, "share", experiment="flame", scheduler="kyber", under="kyber")[:1]  # repetition 1
    assert _samples(r, "share", experiment="flame", scheduler="kyber", under="kyber") == one * 3
    assert len(_samples(r, "perf_samples", experiment="flame", scheduler="none")) == 3
    # only repetition 1 is drawn
    assert [a["path"] for a in r["artifacts"] if a["kind"] == "flamegraph" and a["case"].get("experiment") == "flame"] == [
        "optane_kyber/flame-none.svg", "optane_kyber/flame-kyber.svg"]


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
    qd1 = 1 - _original_ratio("perf-record-qd1")
    assert f"{100 * qd1:.2f} %" in by_id["perf-record-qd1-nearly-free"]["statement"]
    loaded = _original_ratio("perf-record-loaded")
    c = by_id["perf-record-costs-under-load"]
    assert f"{loaded:.3f}" in c["statement"] and f"{100 * (1 - loaded):.1f} %" in c["statement"]
    assert 1 / c["factor"] == pytest.approx(loaded, abs=1e-4)
    events = _original_ratio("sysbench-events")
    c = by_id["sysbench-fewer-events-under-perf"]
    assert f"{100 * (1 - events):.1f} %" in c["statement"]
    assert 1 / c["factor"] == pytest.approx(events, abs=1e-4)


def test_exercises_are_well_formed(rerecorded):
    """2-4 exercises, each with the command to run and a check the claims engine evaluates."""
    r, _ = rerecorded
    assert 2 <= len(EXERCISES) <= 4
    for e in EXERCISES:
        assert "labs/optane_kyber/run.sh" in e["change"]
        assert claims.evaluate_one(claims.exercise_claim(e), r)["verdict"] in claims.VERDICTS
