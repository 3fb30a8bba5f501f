"""The lat_tcp chapter's data files: every claim can fail (and can hold), each names the original
conclusion it tests, the original's tables give the ratios the page quotes, and record.py keeps the
round trip perf record printed. No lab run: the inputs are the committed reference result and its
raw outputs, with samples scaled from real ones where a claim needs a placement the host lacks."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from labkit import claims, model
from labkit.record import Run

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "labs" / "lat_tcp"
REFERENCE = ROOT / "results" / "epyc-kvm-2vcpu"
SPEC = claims.load(LAB / "claims.toml")
ORIGINAL = tomllib.loads((LAB / "original.toml").read_text())
EXERCISES = claims.load_exercises(LAB / "exercises.toml")


@pytest.fixture(scope="module")
def reference():
    return model.load(REFERENCE / "lat_tcp.json")


@pytest.fixture(scope="module")
def rerecorded(reference, tmp_path_factory):
    """The reference run's raw outputs turned into measurements by the current record.py
    (in a temporary copy: results/ is never written)."""
    run_dir = tmp_path_factory.mktemp("lat_tcp") / "run"
    shutil.copytree(REFERENCE / "lat_tcp", run_dir)
    spec = importlib.util.spec_from_file_location("lat_tcp_record", LAB / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    run = Run("lat_tcp", run_dir, quick=False)
    mod.collect(run)
    r = copy.deepcopy(reference)
    r["measurements"] = run.measurements
    return r, run_dir


def _base_samples(reference) -> list[float]:
    """Real samples to build synthetic sides from: the reference's pinned same-CPU run."""
    m = next(m for m in reference["measurements"]
             if m["case"].get("experiment") == "pinned" and m["case"].get("pin") == "same-cpu")
    return m["samples"]


def _with(reference, *sides) -> dict:
    """A copy of ``reference`` whose measurements are only ``sides``: (case, samples) pairs."""
    r = copy.deepcopy(reference)
    r["measurements"] = [model.measurement("round_trip", "us", dict(case), samples) for case, samples in sides]
    return r


def _scaled(samples, k):
    return [x * k for x in samples]


def _case(selector: dict) -> dict:
    """A full case matching ``selector`` (claims match on a subset of case keys)."""
    return {"tool": "lat_tcp", "msize": 1, **selector}


def _sides(claim, reference, wrong: bool) -> dict:
    """A result on which ``claim`` clearly holds (wrong=False) or clearly fails (wrong=True):
    the two sides' sample ranges never overlap, so no noise rule can call it a draw."""
    s = _base_samples(reference)
    a, b = _case(claim["a"]), _case(claim["b"])
    f = float(claim.get("factor", 1.0))
    far = 3 * f  # well beyond the claimed factor
    if claim["kind"] == "within":  # max(a/b, b/a) ≤ f
        return _with(reference, (a, s), (b, _scaled(s, far if wrong else f ** 0.5)))
    rel = claim["relation"]
    if rel == "less":  # a·f < b
        return _with(reference, (a, s), (b, _scaled(s, 1 / far if wrong else far)))
    if rel == "greater":  # a > b·f
        return _with(reference, (a, _scaled(s, 1 / far if wrong else far)), (b, s))
    if rel == "not_less":  # a ≥ b/f
        return _with(reference, (a, _scaled(s, 1 / far if wrong else far)), (b, s))
    raise AssertionError(rel)


def _increasing(claim, reference, wrong: bool) -> dict:
    s = _base_samples(reference)
    sizes = [1, 1024, 65536]
    ks = [3.0, 2.0, 1.0] if wrong else [1.0, 2.0, 3.0]
    return _with(reference, *[(_case({**claim["where"], claim["over"]: m}), _scaled(s, k)) for m, k in zip(sizes, ks)])


@pytest.mark.parametrize("claim", [c for c in SPEC if c["kind"] != "step"], ids=lambda c: c["id"])
def test_claim_can_fail_and_can_hold(claim, reference):
    make = _increasing if claim["kind"] == "increasing" else _sides
    holds = claims.evaluate_one(claim, make(claim, reference, wrong=False))
    fails = claims.evaluate_one(claim, make(claim, reference, wrong=True))
    assert holds["verdict"] == "holds", holds
    assert fails["verdict"] == "fails", fails


def test_no_server_claim_fails_when_the_client_prints_a_number(reference):
    claim = next(c for c in SPEC if c["id"] == "no-server-no-number")
    assert claims.evaluate_one(claim, reference)["verdict"] == "holds"
    printed = copy.deepcopy(reference)
    step = next(s for s in printed["steps"] if s["name"] == "noserver")
    step["stdout_bytes"] = len((REFERENCE / "lat_tcp" / "raw" / "free.out").read_bytes())
    assert claims.evaluate_one(claim, printed)["verdict"] == "fails"
    exited_zero = copy.deepcopy(reference)
    step = next(s for s in exited_zero["steps"] if s["name"] == "noserver")
    step.update(status="failed", exit_code=0, reason="expected to fail, exited 0")
    assert claims.evaluate_one(claim, exited_zero)["verdict"] == "fails"


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_names_its_source_and_timing(claim):
    assert claim.get("source"), "every claim names the original conclusion it tests (or says it has none)"
    assert claim["timing"] is (claim["kind"] != "step"), "round trips are time; the no-server step is behaviour"


def test_claim_keys_exist_in_what_the_lab_records(rerecorded):
    """Every selector key of a claim or exercise is a case key the lab records (values such as
    pin = smt-sibling may be absent on a host, keys may not)."""
    r, _ = rerecorded
    keys = {k for m in r["measurements"] for k in m["case"]}
    metrics = {m["metric"] for m in r["measurements"]}
    checks = [c for c in SPEC if c["kind"] != "step"] + [dict(e["check"]) for e in EXERCISES]
    for c in checks:
        assert c["metric"] in metrics, c
        for sel in (c.get("a"), c.get("b"), c.get("where")):
            assert set(sel or {}) <= keys, (c, sel)


def test_record_keeps_the_round_trip_under_perf(rerecorded):
    r, run_dir = rerecorded
    perf = [m for m in r["measurements"] if m["case"].get("experiment") == "perf"]
    assert {m["case"]["traced"] for m in perf} == {"perf record -g"}
    assert {m["case"]["pin"] for m in perf} == {"same-cpu", "other-core"}
    for m in perf:
        kind = "same" if m["case"]["pin"] == "same-cpu" else "other"
        printed = next(json.loads(line) for line in (run_dir / "raw" / f"perf.{kind}.record.out").read_text().splitlines()
                       if line.startswith("{"))
        assert m["samples"] == printed["samples"]


def test_rerecording_changes_nothing_else(reference, rerecorded):
    r, _ = rerecorded
    old = [m for m in reference["measurements"] if m["case"].get("experiment") != "perf"]
    new = [m for m in r["measurements"] if m["case"].get("experiment") != "perf"]
    assert new == old


def _cell(table: dict, row: str, column: str) -> float:
    line = next(x for x in table["rows"] if x[0] == row)
    return float(line[table["columns"].index(column)])


def test_original_tables_are_well_formed():
    machines = {m["id"] for m in ORIGINAL["machine"]}
    assert all(m.get("kernel") for m in ORIGINAL["machine"])
    assert "/" not in ORIGINAL["source"]["seed"]
    for t in ORIGINAL["table"]:
        assert set(t.get("machines", [t.get("machine")])) <= machines, t["id"]
        assert all(len(r) == len(t["columns"]) for r in t["rows"]), t["id"]


def test_original_ratios_match_the_claims_effect_sizes():
    """The effect sizes quoted in claim statements are the ratios of the original's own cells."""
    tables = {t["id"]: t for t in ORIGINAL["table"]}
    got = {}
    for ratio in ORIGINAL["ratio"]:
        o = ratio["original"]
        got[ratio["id"]] = _cell(tables[o["table"]], *o["a"]) / _cell(tables[o["table"]], *o["b"])
    by_id = {c["id"]: c for c in SPEC}
    assert f"{got['other-vs-same-cpu-sdp2']:.2f}×" in by_id["same-cpu-faster"]["statement"]
    assert f"{got['other-vs-same-cpu-hp380']:.2f}×" in by_id["same-cpu-faster"]["statement"]
    assert f"{got['sibling-vs-same-cpu-hp380']:.2f}×" in by_id["same-cpu-faster-than-sibling"]["statement"]
    hp = tables["pinned-hp380"]
    sib_other = _cell(hp, "lat_tcp (µs)", "other CPU #") / _cell(hp, "lat_tcp (µs)", "#48 (same core)")
    assert f"{sib_other:.2f}×" in by_id["sibling-faster-than-other-core"]["statement"]
    # Each claimed factor stays below the original's effect, so the claim asks for the same direction, not more.
    assert by_id["same-cpu-faster"]["factor"] < min(got["other-vs-same-cpu-sdp2"], got["other-vs-same-cpu-hp380"])
    assert by_id["same-cpu-faster-than-sibling"]["factor"] < got["sibling-vs-same-cpu-hp380"]
    assert by_id["sibling-faster-than-other-core"]["factor"] < sib_other


def test_published_ratios_are_cut_off_as_the_note_says():
    """The notes say the published ratios are truncated, not rounded; check that against the cells."""
    import math
    t = {x["id"]: x for x in ORIGINAL["table"]}["roundtrip"]
    hp = _cell(t, "hp380", "lat_tcp (µs)")
    for row in ("sdp1", "sdp2"):
        exact = hp / _cell(t, row, "lat_tcp (µs)")
        assert _cell(t, row, "ratio") == math.floor(exact * 100) / 100
    assert "cut off" in t["note"]


def test_exercises_are_well_formed(rerecorded):
    """2-4 exercises, each one command to run and a check the claims engine can evaluate."""
    r, _ = rerecorded
    assert 2 <= len(EXERCISES) <= 4
    for e in EXERCISES:
        assert "labs/lat_tcp/run.sh" in e["change"]
        assert claims.evaluate_one(claims.exercise_claim(e), r)["verdict"] in {"holds", "fails", "untested", "inconclusive"}
