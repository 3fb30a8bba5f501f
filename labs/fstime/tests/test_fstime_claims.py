"""The fstime chapter's data files: every claim can fail (and can hold), each names the original
conclusion it tests, the original's tables give the figures the claims quote, the exercises are
well formed, and the lab orders its groups so that audit cannot taint its own measurements.
No lab run: the inputs are the committed reference result, its raw outputs, real folded stacks
in tests/fixtures/fstime, and samples scaled from real ones."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labkit import original as original_mod
from labkit.site.macros import runs
from labrun import run_lab
import refhost

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "fstime"
REFERENCE = refhost.result("fstime").parent
FIX = ROOT / "tests" / "fixtures" / "fstime"
SPEC = claims.load(LAB / "claims.toml")
BY_ID = {c["id"]: c for c in SPEC}
ORIGINAL = original_mod.load(LAB / "original.toml")
TABLES = {t["id"]: t for t in ORIGINAL["table"]}
EXERCISES = claims.load_exercises(LAB / "exercises.toml")
SEED_NUMBERS_FILE = "000_2c144f3094323cf7.txt"


@pytest.fixture(scope="module")
def reference():
    return model.load(REFERENCE / "fstime.json")


def _base_samples(reference) -> list[float]:
    """Real samples to build synthetic sides from: the reference's copy on tmpfs, 1 KiB buffers."""
    m = next(m for m in reference["measurements"] if m["metric"] == "score" and m["case"] == {
        "experiment": "copy", "tool": "fstime", "target": "tmpfs", "fs": "tmpfs", "bufsize": 1024,
        "max_blocks": 2000, "phase": "copy"})
    assert len(m["samples"]) >= 3
    return m["samples"]


def _with(reference, metric: str, *sides) -> dict:
    """A copy of ``reference`` whose measurements are only ``sides``: (case, samples) pairs."""
    r = copy.deepcopy(reference)
    r["measurements"] = [model.measurement(metric, "x", dict(case), samples) for case, samples in sides]
    return r


def _scaled(samples, k):
    return [x * k for x in samples]


def _sides(claim, reference, wrong: bool) -> dict:
    """A result on which ``claim`` clearly holds (wrong=False) or clearly fails (wrong=True):
    the two sides' sample ranges never overlap, so no noise rule can call it a draw."""
    s = _base_samples(reference)
    a, b, f = dict(claim["a"]), dict(claim["b"]), float(claim.get("factor", 1.0))
    far = 3 * f
    if claim["kind"] == "within":          # every pair within f, or far apart
        tight = [s[0] * (1 + i * 1e-3) for i in range(3)]
        return _with(reference, claim["metric"], (a, tight), (b, _scaled(tight, far if wrong else 1.0)))
    if claim["relation"] == "less":        # a·f < b
        return _with(reference, claim["metric"], (a, s), (b, _scaled(s, 1 / far if wrong else far)))
    if claim["relation"] == "greater":     # a > b·f
        return _with(reference, claim["metric"], (a, _scaled(s, 1 / far if wrong else far)), (b, s))
    if claim["relation"] == "not_less":    # a·f ≥ b
        return _with(reference, claim["metric"], (a, _scaled(s, 1 / far if wrong else 1.0)), (b, s))
    raise AssertionError(claim["relation"])


@pytest.mark.parametrize("claim", [c for c in SPEC if c["kind"] != "step"], ids=lambda c: c["id"])
def test_claim_can_fail_and_can_hold(claim, reference):
    holds = claims.evaluate_one(claim, _sides(claim, reference, wrong=False))
    fails = claims.evaluate_one(claim, _sides(claim, reference, wrong=True))
    assert holds["verdict"] == "holds", holds
    assert fails["verdict"] == "fails", fails


def auditframes(folded: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(LAB / "auditframes.py"), str(folded)], capture_output=True,
                          text=True, env={"PYTHONPATH": str(ROOT)})


def test_audit_frames_follow_the_probe():
    """auditframes.py on real folded stacks: nothing for a copy loop recorded before audit was
    ever enabled on the boot, audit functions for one recorded after; and the committed
    reference has audit frames on its tmpfs stacks exactly when its processes carried audit
    contexts (none where the run suppressed them with task,never)."""
    clean = auditframes(FIX / "copy-tmpfs-audit-never-enabled.folded")
    tainted = auditframes(FIX / "copy-xfs-on-tmpfs.folded")
    assert clean.returncode == tainted.returncode == 0
    assert clean.stdout == "" and tainted.stdout != ""
    ref = model.load(REFERENCE / "fstime.json") if (REFERENCE / "fstime.json").exists() else None
    if ref is None or ref["host"].get("audit_ever_enabled") is None:
        pytest.skip("no reference result with a known audit state")
    out = auditframes(REFERENCE / "fstime" / "flame-tmpfs.folded")
    assert out.returncode == 0, out.stderr
    assert (out.stdout != "") == bool(runs.audit_note(ref["host"])), out.stdout


@pytest.mark.parametrize("claim", SPEC, ids=lambda c: c["id"])
def test_claim_says_whether_it_is_about_speed(claim):
    speed = claim["metric"] in ("score", "pair_time") if claim["kind"] != "step" else False
    assert claim["timing"] is speed, "scores and times per system call are speed; CPU time and stacks are behaviour"


def test_claim_and_exercise_keys_exist_in_what_the_lab_records(reference):
    """Every selector key and value of a claim or exercise matches some measurement the reference
    recorded (a typo would make a claim untested forever); a claim newer than the reference is
    checked on a run rebuilt from the reference's raw outputs (test_fstime_audit_states.py)."""
    from test_fstime_audit_states import NEW
    checks = [c for c in SPEC if c["kind"] != "step"] + [dict(e["check"]) for e in EXERCISES]
    for c in checks:
        for sel in (c["a"], c["b"]):
            assert claims.select(reference, c["metric"], sel) or c.get("id") in NEW, (c.get("id"), sel)


# ---- the original's figures ------------------------------------------------------------------

def _cell(table_id: str, row: str, column: str) -> float:
    t = TABLES[table_id]
    line = next(x for x in t["rows"] if x[0] == row)
    return float(line[t["columns"].index(column)])


def test_original_has_every_figure_table_of_the_seed():
    """The first runs (disk and tmpfs), audit on tmpfs and on the SSD, xfs on tmpfs, 4.9 vs 4.10
    and the fair comparison: the six figure tables the chapter lacked."""
    assert set(TABLES) == {"first-runs", "audit-tmpfs", "audit-ssd", "xfs-on-tmpfs", "kernels", "fair-comparison"}
    assert ORIGINAL["source"]["seed"] == SEED_NUMBERS_FILE
    assert all(m.get("kernel") for m in ORIGINAL["machine"])


def test_first_runs_scores_follow_from_the_counts():
    """fstime counts 256-byte units: score = done / 4 / seconds, as the note says (the printed
    seconds are rounded, so allow 0.01%)."""
    for row in TABLES["first-runs"]["rows"]:
        done, seconds, score = float(row[1]), float(row[2]), float(row[3])
        assert done / 4 / seconds == pytest.approx(score, rel=1e-4), row


def test_repeated_rows_are_the_same_figures():
    """The original repeats the SDP1 SSD rows in three later tables; the copies must agree."""
    on = TABLES["audit-ssd"]["rows"][0][1:]
    off = TABLES["audit-ssd"]["rows"][1][1:]
    assert TABLES["xfs-on-tmpfs"]["rows"][1][1:] == on
    assert TABLES["fair-comparison"]["rows"][0][1:] == on
    assert TABLES["kernels"]["rows"][0][1:] == off


def test_read_below_write_in_the_later_tables_as_the_notes_say():
    """The "looks swapped" notes: fstime's own output has read > write on disk and tmpfs, every
    later table has "read" < "write", and each says so in its caption."""
    assert _cell("first-runs", "disk: Read", "score (KBps)") > _cell("first-runs", "disk: Write", "score (KBps)")
    assert _cell("first-runs", "tmpfs: Read", "score (KBps)") > _cell("first-runs", "tmpfs: Write", "score (KBps)")
    for tid in ("audit-tmpfs", "audit-ssd", "xfs-on-tmpfs", "kernels", "fair-comparison"):
        for row in TABLES[tid]["rows"]:
            assert float(row[1]) < float(row[2]), (tid, row)
        assert "swapped" in TABLES[tid]["title"], tid  # the warning stands in the caption


def test_the_filesystem_gap_is_claimed_beyond_the_device_band():
    """The tmpfs-over-xfs claim asks for more than the band the device claim allows for noise:
    one threshold divides "the filesystem decides" from "the device does not"."""
    gap, band = BY_ID["tmpfs-beats-xfs-on-disk"], BY_ID["device-does-not-decide"]
    assert (gap["kind"], gap["relation"], band["kind"]) == ("compare", "greater", "within")
    assert gap["factor"] == band["factor"]
    assert f"{gap['factor']:g}x" in gap["statement"] and f"{band['factor']:g}x" in band["statement"]


def test_claims_quote_the_original_ratios():
    """The effect sizes in the claim statements are ratios of the original's own cells, and each
    claimed factor asks for the original's direction with less than its size."""
    tmpfs = _cell("first-runs", "tmpfs: Copy", "score (KBps)") / _cell("first-runs", "disk: Copy", "score (KBps)")
    audit_copy = _cell("audit-tmpfs", "auditd off", "copy") / _cell("audit-tmpfs", "auditd on", "copy")
    audit_ssd = _cell("audit-ssd", "auditd off", "copy") / _cell("audit-ssd", "auditd on", "copy")
    audit_write = _cell("audit-tmpfs", "auditd off", "write") / _cell("audit-tmpfs", "auditd on", "write")
    device = _cell("xfs-on-tmpfs", "ssd (240G), auditd on", "copy") / _cell("xfs-on-tmpfs", "xfs on a file in tmpfs, auditd on", "copy")
    assert f"{tmpfs:.2f}x" in BY_ID["tmpfs-beats-xfs-on-disk"]["statement"]
    assert 1 < BY_ID["tmpfs-beats-xfs-on-disk"]["factor"] < tmpfs
    assert f"{audit_copy:.2f}x" in BY_ID["audit-costs-copy"]["statement"]
    assert f"{audit_ssd:.2f}x" in BY_ID["audit-costs-copy"]["statement"]
    assert 1 < BY_ID["audit-costs-copy"]["factor"] < audit_copy
    assert f"{audit_write:.2f}x" in BY_ID["audit-costs-write"]["statement"]
    assert 1 < BY_ID["audit-costs-write"]["factor"] < audit_write
    assert f"{100 * (device - 1):.1f}%" in BY_ID["device-does-not-decide"]["statement"]
    assert BY_ID["device-does-not-decide"]["factor"] < tmpfs / 1.5   # tolerance well below the tmpfs gap


def test_every_ratio_has_an_original_value():
    for ratio in ORIGINAL["ratio"]:
        value, a, b = original_mod.original_ratio(ORIGINAL, ratio)
        assert value > 0 and a and b, ratio["id"]


# ---- exercises and the lab's order -----------------------------------------------------------

def test_exercises_are_well_formed(reference):
    """2-4 exercises, each one command to run and a check the claims engine can evaluate."""
    assert 2 <= len(EXERCISES) <= 4
    for e in EXERCISES:
        assert "labs/fstime/run.sh" in e["change"]
        v = claims.evaluate_one(claims.exercise_claim(e), reference)
        assert v["verdict"] in {"holds", "fails", "inconclusive", "untested"}, v


@pytest.mark.no_run
def test_audit_runs_last_and_the_perf_step_lists_audit_frames(reference):
    """Enabling audit taints every process started afterwards, so the audit group runs last:
    the lab's --help lists it last, and in the reference run no step of another group came
    after its first step. The perf group lists the audit frames of each copy loop it profiled
    (a step with tool ``auditframes`` per target perf recorded, on that target's folded stacks)."""
    helped = run_lab("fstime", "--help", timeout=60)
    assert helped.returncode == 0, helped.stderr
    table = helped.stdout.split("groups, in order:\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\s+(\w+)\s", table, re.M)
    assert listed and listed[-1] == "audit" and listed.count("audit") == 1 and "perf" in listed
    groups = [st["group"] for st in reference["steps"]]
    assert "audit" in groups and set(groups[groups.index("audit"):]) == {"audit"}
    perf = [st for st in reference["steps"] if st["group"] == "perf" and st.get("case")]
    recorded = {st["case"]["target"] for st in perf if st["case"]["tool"] == "perf" and st["status"] == "ok"}
    frames = {st["case"]["target"]: st for st in perf if st["case"]["tool"] == "auditframes"}
    assert recorded and set(frames) == recorded
    for target, st in frames.items():
        assert "auditframes.py" in st["command"] and st["command"].endswith(f"flame-{target}.folded"), st
