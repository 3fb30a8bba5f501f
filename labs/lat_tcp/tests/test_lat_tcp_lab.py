"""The lat_tcp lab run for real: quick mode end to end, bad usage, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from labkit.stats import claims
from labkit import model
from labrun import check_quick_result, interrupt_at, is_root, links, netns_list, processes_matching

pytestmark = pytest.mark.lab     # a real quick run of the lat_tcp lab

LAB = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quick_run(lat_tcp_quick):
    return lat_tcp_quick


def test_quick_run_succeeds_and_validates(quick_run):
    proc, out, seconds = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = model.load(out / "lat_tcp.json")
    check_quick_result(result, seconds)


def test_quick_run_keeps_raw_outputs_and_commands(quick_run):
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    for step in result["steps"]:
        if step["status"] == "ok" and step["name"] != "noserver" and not step["name"].startswith("perf."):
            assert (out / "lat_tcp" / "raw" / f"{step['name']}.cmd").read_text().strip() == step["command"]


def test_no_server_step_fails_as_designed(quick_run):
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    step = next(s for s in result["steps"] if s["name"] == "noserver")
    assert step["expect"] == "failure" and step["status"] == "ok" and step["exit_code"] != 0
    assert (out / "lat_tcp" / "raw" / "noserver.out").read_text() == ""
    assert "microseconds" not in (out / "lat_tcp" / "raw" / "noserver.err").read_text()
    claim = next(c for c in result["claims"] if c["id"] == "no-server-no-number")
    assert claim["verdict"] == "holds"


def test_gdb_on_the_forked_child_ends_by_itself(quick_run):
    """gdb kills both inferiors and exits before the group is stopped: its output ends with the
    parent's kill and it prints no crash (a TERM during those kills crashed gdb 13.1)."""
    proc, out, _ = quick_run
    raw = out / "lat_tcp" / "raw"
    if not (raw / "noserver.gdb-child.out").exists():
        pytest.skip("gdb not installed: the step is skipped")
    assert "Inferior 1 (process" in (raw / "noserver.gdb-child.out").read_text().splitlines()[-1]
    assert "Fatal signal" not in (raw / "noserver.gdb-child.err").read_text()
    assert "Segmentation fault" not in proc.stderr + proc.stdout


def _printed(out: Path, step: str) -> dict:
    """The JSON line the lat_tcp client of ``step`` printed on standard output."""
    text = (out / "lat_tcp" / "raw" / f"{step}.out").read_text()
    return json.loads(next(line for line in text.splitlines() if line.startswith("{")))


def _steps_of(result: dict, measurement: dict) -> list[dict]:
    """The ok steps whose case (less ``rep``) is the measurement's, in run order."""
    return [s for s in result["steps"] if s["status"] == "ok" and s.get("case")
            and {k: v for k, v in s["case"].items() if k != "rep"} == measurement["case"]]


def test_every_measurement_comes_from_steps_with_its_case(quick_run):
    """Case as data: every measurement's step carries a case, and every step of a measurement's
    case is one of its samples (one sample per run, repetition order)."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    names = {s["name"]: s for s in result["steps"]}
    for m in result["measurements"]:
        assert names[m["step"]].get("case"), m
    for m in result["measurements"]:
        if m["metric"] != "round_trip" or m["case"].get("observed") == "predicted":
            continue   # the predicted round trip is computed from other steps' samples (record.py)
        steps = _steps_of(result, m)
        assert len(steps) == m["n"], (m["case"], [s["name"] for s in steps])
        reps = [s["case"].get("rep", 1) for s in steps]
        assert reps == sorted(reps), (m["case"], reps)


def test_samples_are_the_printed_medians(quick_run):
    """A lat_tcp sample is exactly the median its run printed (nothing re-typed or rounded
    away), in repetition order."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    lat = [m for m in result["measurements"] if m["metric"] == "round_trip" and m["case"].get("tool") == "lat_tcp"]
    assert lat
    for m in lat:
        assert m["samples"] == [_printed(out, s["name"])["median"] for s in _steps_of(result, m)], m["case"]


def test_claimed_cases_run_as_often_as_in_full_runs_interleaved(quick_run):
    """Quick mode: every case a claim reads has a full run's 5 samples (the message sizes the
    msize claims compare on one CPU: 10), and the pinned group's placements (unpinned
    included) take turns within each repetition (ABAB, not AAA BBB)."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    for c in claims.load(LAB / "claims.toml"):
        for side in (c.get("a"), c.get("b")):
            for m in claims.select(result, c.get("metric", ""), side or {}) if side else []:
                want = 10 if m["case"].get("experiment") == "msize" else 5
                assert m["n"] == want, (c["id"], m["case"], m["n"])
    order = [(s["case"]["rep"], s["case"].get("pin", s["case"].get("tool"))) for s in result["steps"]
             if s["group"] == "pinned" and s["status"] == "ok" and s.get("case")]
    reps = [r for r, _ in order]
    assert reps == sorted(reps) and set(reps) == {1, 2, 3, 4, 5}
    per_rep = [[p for r, p in order if r == k] for k in (1, 2, 3, 4, 5)]
    assert all(p == per_rep[0] for p in per_rep)
    assert {"same-cpu", "free"} <= set(per_rep[0])


def test_pinned_placements_share_one_server_cpu(quick_run):
    """The server stays on one CPU; the client takes each relation to it at most once, the
    same CPU always; the unpinned pair is recorded as experiment free."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    pins = [m["case"] for m in result["measurements"] if m["case"].get("experiment") == "pinned"]
    assert len({p["server_cpu"] for p in pins}) == 1
    assert len({p["pin"] for p in pins}) == len(pins)
    same = next(p for p in pins if p["pin"] == "same-cpu")
    assert same["client_cpu"] == same["server_cpu"]
    import os
    if os.cpu_count() > 1:
        assert len(pins) >= 2
    free = [m for m in result["measurements"] if m["metric"] == "round_trip" and m["case"].get("experiment") == "free"]
    assert len(free) == 1 and free[0]["case"]["pin"] == "free" and "server_cpu" not in free[0]["case"]


def test_unchecked_client_prints_a_number_with_no_server(quick_run):
    """-L (lmbench's unchecked connect) with nothing listening: exit 0, a number, every timed
    call failed; the same command with the server up connects and fails none."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    by_server = {}
    for s in result["steps"]:
        case = s.get("case") or {}
        if case.get("experiment") == "noserver" and s["status"] == "ok":
            by_server.setdefault(case["server"], []).append(_printed(out, s["name"]))
    assert len(by_server["none"]) == len(by_server["listening"]) == 5
    for p in by_server["none"]:
        assert p["unchecked"] is True and p["connected"] is False and p["failed_calls"] > 0
    for p in by_server["listening"]:
        assert p["connected"] is True and p["failed_calls"] == 0
    claim = next(c for c in result["claims"] if c["id"] == "no-server-still-measures")
    assert claim["verdict"] != "untested", claim


def test_perf_runs_keep_the_clients_round_trip(quick_run):
    """The client's figure under perf record -g is a measurement (the perf-slows-same-cpu claim
    reads it beside the untraced runs made in turn with it), equal to what the client printed."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    perf = [m for m in result["measurements"] if m["case"].get("experiment") == "perf"]
    if not perf:
        pytest.skip("the perf group was skipped on this host")
    same = {m["case"]["traced"]: m for m in perf if m["case"]["pin"] == "same-cpu"}
    assert set(same) == {"perf record -g", "none"}
    assert same["perf record -g"]["n"] == same["none"]["n"] == 5
    for m in perf:
        steps = _steps_of(result, m)
        assert m["samples"] == [_printed(out, s["name"])["median"] for s in steps]
    assert any(s["name"] == "perf.same.record" for s in result["steps"]), "the perf card shows perf.same.record"


def test_every_claim_has_a_verdict_with_evidence(quick_run):
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    ids = {c["id"] for c in result["claims"]}
    assert ids == {c["id"] for c in claims.load(LAB / "claims.toml")}
    assert {"no-server-no-number", "no-server-still-measures", "same-cpu-faster", "perf-slows-same-cpu",
            "large-message-costs-more", "small-messages-cost-alike"} <= ids
    assert all(c["evidence"] for c in result["claims"])


@pytest.mark.skipif(not is_root(), reason="the pinned and veth steps need root to leave traces worth checking")
@pytest.mark.parametrize("group,marker", [("pinned", "pinned.same-cpu.1: taskset"), ("veth", "veth.veth.1: ip netns exec")])
def test_sigint_mid_step_leaves_nothing(group, marker, tmp_path):
    before_ns = set(netns_list())
    rc, err, scratch = interrupt_at("lat_tcp", marker, "--only", group, "--quick", "--out", str(tmp_path), sig=signal.SIGINT)
    assert rc == 130, err[-2000:]
    assert "interrupted by SIGINT" in err
    assert scratch and not Path(scratch).exists(), "scratch directory left behind"
    time.sleep(0.3)
    assert processes_matching(scratch) == [], "a lat_tcp process survived"
    assert set(netns_list()) - before_ns == set(), "a network namespace survived"
    assert not [l for l in links() if l.startswith("pcb-v")], "a veth survived"
    assert not (tmp_path / "lat_tcp.json").exists(), "an interrupted run must not write a result"
    assert not (tmp_path / ".lat_tcp.partial").exists()


@pytest.mark.skipif(not is_root(), reason="needs root")
def test_sigterm_mid_step_leaves_nothing(tmp_path):
    rc, err, scratch = interrupt_at("lat_tcp", "msize.same.1024.1: taskset", "--only", "msize", "--quick", "--out", str(tmp_path),
                                    sig=signal.SIGTERM, after=0.1)
    assert rc == 143, err[-2000:]
    assert processes_matching(scratch) == []
