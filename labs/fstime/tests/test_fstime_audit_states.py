"""fstime's audit states and the per-system-call measurements, fast tier: record.py on a run
directory built from the committed reference run's real raw outputs (the steps the current
lab adds, audit=norules and the task,never loop, are real outputs of the reference's own steps
given the new steps' cases), and the new claims on hand-built results: each must hold on one
and fail on another. No lab runs."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labkit import record as record_mod
from labkit.parsers.dd import dd_summary
from labkit.parsers.jsonline import json_lines
from labkit.parsers.procstat import elapsed_ticks, process_shares, snapshots
import refhost

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "fstime"
REF = refhost.result("fstime").parent
SPEC = {c["id"]: c for c in claims.load(LAB / "claims.toml")}
NEW = ["copy-keeps-one-cpu-busy", "copy-waits-for-no-io", "audit-costs-copy", "audit-costs-write",
       "one-rule-costs-more", "task-never-suppresses"]


def _step(run: Path, name: str, group: str, case: dict, like: str) -> None:
    """Add step ``name`` to the run directory: the reference step ``like``'s raw outputs, the case
    ``case`` (as lab_run --case writes it) and a steps.tsv line."""
    for ext in ("cmd", "out", "err"):
        src = REF / "fstime" / "raw" / f"{like}.{ext}"
        if src.exists():
            shutil.copy(src, run / "raw" / f"{name}.{ext}")
    (run / "raw" / f"{name}.case").write_text("".join(f"{k}={v}\n" for k, v in case.items()))
    with open(run / "steps.tsv", "a") as f:
        f.write(f"{name}\t{group}\tok\t0\t1.000\tsuccess\t\n")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """The reference run directory plus the steps the lab gained: audit=norules (the reference's
    audit=off outputs) and the system-call loop without and with task,never (the reference's
    dd outputs)."""
    if not (REF / "fstime" / "steps.tsv").exists():
        pytest.skip("no committed reference run directory")
    run = tmp_path_factory.mktemp("run") / "fstime"
    shutil.copytree(REF / "fstime", run, ignore=shutil.ignore_patterns("run.cast"))
    reps = sorted(p.name.split(".")[2] for p in (run / "raw").glob("audit.off.*.out"))
    for rep in reps:
        _step(run, f"audit.norules.{rep}", "audit", {"experiment": "audit", "audit": "norules", "tool": "fstime",
                                                     "target": "tmpfs", "fs": "tmpfs", "rep": rep}, f"audit.off.{rep}")
        for state in ("contexts", "task-never"):
            _step(run, f"audit.suppress.{state}.{rep}", "audit",
                  {"experiment": "suppress", "audit": state, "tool": "dd", "bufsize": 1, "rep": rep}, f"dd.tmpfs.{rep}")
    return run


@pytest.fixture(scope="module")
def recorded(run_dir) -> dict:
    run = record_mod.Run("fstime", run_dir, False)
    record_mod.load_lab_collector(LAB)(run)
    result = {**model.load(REF / "fstime.json"), "steps": run.steps, "measurements": run.measurements}
    model.validate(result, "rebuilt")
    return result


def _one(result: dict, metric: str, where: dict) -> dict:
    ms = claims.select(result, metric, where)
    assert len(ms) == 1, (metric, where, [m["case"] for m in ms])
    return ms[0]


def test_pair_time_is_the_score_per_read_write_pair(recorded, run_dir):
    """µs per pair = bufsize ÷ (score · 1024) · 10⁶, from each fstime copy score of the audit
    group, in step order; for every state the lab measures."""
    for state in ("off", "norules", "nomatch", "every"):
        pair = _one(recorded, "pair_time", {"experiment": "audit", "phase": "copy", "audit": state})
        assert pair["unit"] == "µs" and pair["case"]["bufsize"] == 1024
        scores = [rec["score_kibps"] for s in recorded["steps"] if (s.get("case") or {}).get("audit") == state
                  and s["case"].get("experiment") == "audit" and s["case"].get("tool") == "fstime"
                  for rec in json_lines((run_dir / "raw" / f"{s['name']}.out").read_text(), "fstime")
                  if rec["phase"] == "copy"]
        assert pair["samples"] == pytest.approx([1024 / (x * 1024) * 1e6 for x in scores]) and len(scores) >= 3


def test_pair_time_of_the_system_call_loop_is_dd_seconds_per_byte(recorded, run_dir):
    for state in ("contexts", "task-never"):
        pair = _one(recorded, "pair_time", {"experiment": "suppress", "audit": state})
        want = []
        for s in recorded["steps"]:
            if (s.get("case") or {}).get("experiment") == "suppress" and s["case"]["audit"] == state:
                d = dd_summary((run_dir / "raw" / f"{s['name']}.err").read_text())
                want.append(d["seconds"] * 1e6 / d["bytes"])
        assert pair["samples"] == pytest.approx(want) and pair["case"]["tool"] == "dd"
    assert not claims.select(recorded, "score", {"experiment": "suppress"}), "the loop is not a file copy score"


def test_cpu_ticks_are_the_proc_stat_readings(recorded, run_dir):
    busy = _one(recorded, "cpu_ticks", {"experiment": "cpu", "who": "fstime", "mode": "busy"})
    wall = _one(recorded, "cpu_ticks", {"experiment": "cpu", "who": "clock", "mode": "elapsed"})
    iowait = _one(recorded, "cpu_ticks", {"experiment": "cpu", "who": "all", "mode": "iowait"})
    want_busy, want_wall, want_io = [], [], []
    for s in recorded["steps"]:
        if (s.get("case") or {}).get("tool") == "proc-stat" and s["status"] == "ok":
            snaps = snapshots((run_dir / "raw" / f"{s['name']}.out").read_text())
            w = elapsed_ticks(snaps[0], snaps[-1])
            want_wall.append(w)
            want_busy.append(process_shares(snaps[0], snaps[-1], int(s["case"]["pid"]))["cpu"] * w)
            want_io.append(sum(snaps[-1].cpus[c][4] - snaps[0].cpus[c][4] for c in snaps[0].cpus if c != "cpu"))
    assert busy["samples"] == pytest.approx(want_busy) and wall["samples"] == pytest.approx(want_wall)
    assert iowait["samples"] == pytest.approx(want_io) and len(want_wall) >= 3


@pytest.mark.parametrize("cid", NEW)
def test_every_new_claim_reads_what_the_lab_records(recorded, cid):
    """Each selector of the new claims picks measurements record.py makes, so the claim is
    decided (not untested) on a run of the current lab."""
    c = SPEC[cid]
    for side in ("a", "b"):
        assert claims.select(recorded, c["metric"], c[side]), (cid, side)
    assert claims.evaluate_one(c, recorded)["verdict"] != "untested"


# ---- each new claim on hand-built results -------------------------------------------------------

def _result(recorded: dict, metric: str, a: tuple[dict, list[float]], b: tuple[dict, list[float]]) -> dict:
    r = copy.deepcopy(recorded)
    r["measurements"] = [model.measurement(metric, "x", case, samples) for case, samples in (a, b)]
    return r


def _real(recorded: dict, metric: str, where: dict) -> list[float]:
    """Real samples of the rebuilt reference (at least 3) to scale a side from."""
    ms = claims.select(recorded, metric, where)
    samples = [x for m in ms for x in m["samples"] if x > 0]
    assert len(samples) >= 3, (metric, where)
    return samples[:5]


# (claim, metric of the real samples, their selector, ratio a ÷ b where it holds, where it fails)
CASES = [
    # busy ≥ 0.9 of elapsed: busy = elapsed, against busy = 0.5 of it
    ("copy-keeps-one-cpu-busy", "cpu_ticks", {"who": "clock", "mode": "elapsed"}, 1.0, 0.5),
    # iowait < 0.05 of elapsed: 1 %, against 30 %
    ("copy-waits-for-no-io", "cpu_ticks", {"who": "clock", "mode": "elapsed"}, 0.01, 0.3),
    # norules ÷ off > 1.05: 1.3, against 1.0 (no cost)
    ("audit-costs-copy", "pair_time", {"experiment": "audit", "audit": "off"}, 1.3, 1.0),
    # write score norules ÷ off < 1 ÷ 1.05: 0.7, against 1.0
    ("audit-costs-write", "score", {"experiment": "audit", "audit": "off", "phase": "write"}, 0.7, 1.0),
    # nomatch ÷ norules > 1.1: 1.5, against 1.02
    ("one-rule-costs-more", "pair_time", {"experiment": "audit", "audit": "nomatch"}, 1.5, 1.02),
    # contexts ÷ task-never > 1.1: 1.4, against 1.0 (the rule removed nothing)
    ("task-never-suppresses", "pair_time", {"experiment": "suppress", "audit": "task-never"}, 1.4, 1.0),
]


@pytest.mark.parametrize("cid, metric, where, holds, fails", CASES, ids=[c[0] for c in CASES])
def test_new_claim_holds_on_one_and_fails_on_another(recorded, cid, metric, where, holds, fails):
    c = SPEC[cid]
    base = _real(recorded, metric, where)
    for ratio, want in ((holds, "holds"), (fails, "fails")):
        r = _result(recorded, c["metric"], (c["a"], [x * ratio for x in base]), (c["b"], list(base)))
        v = claims.evaluate_one(c, r)
        assert v["verdict"] == want, (ratio, v)


def test_the_cases_cover_every_new_claim():
    assert sorted(c[0] for c in CASES) == sorted(NEW)
    assert "copy-is-system-time" not in SPEC, "system > user cannot fail: recast as one CPU busy, no I/O wait"
