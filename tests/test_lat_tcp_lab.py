"""The lat_tcp lab run for real: quick mode end to end, bad usage, and Ctrl-C leaving nothing behind."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from labkit import model
from labrun import check_quick_result, interrupt_at, is_root, links, netns_list, processes_matching


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


def test_measurements_match_program_output(quick_run):
    """The result's samples are exactly what lat_tcp printed (nothing re-typed or rounded away)."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    free = next(m for m in result["measurements"] if m["case"].get("experiment") == "free")
    printed = json.loads((out / "lat_tcp" / "raw" / "free.out").read_text().strip())
    assert free["samples"] == printed["samples"]
    assert abs(free["median"] - printed["median"]) < 1e-3


def test_pinned_pairs_cover_first_cpus(quick_run):
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    pins = [m["case"] for m in result["measurements"] if m["case"].get("experiment") == "pinned"]
    import os
    n = min(4, os.cpu_count())
    assert len(pins) == n * n
    assert {p["pin"] for p in pins if p["server_cpu"] == p["client_cpu"]} == {"same-cpu"}


def test_perf_runs_keep_the_clients_round_trip(quick_run):
    """The client's figure under perf record -g is a measurement (the perf-slows-same-cpu claim
    reads it), equal to what the client printed."""
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    for step in result["steps"]:
        if not (step["name"].startswith("perf.") and step["name"].endswith(".record")) or step["status"] != "ok":
            continue
        m = next(m for m in result["measurements"] if m.get("step") == step["name"])
        assert m["case"]["experiment"] == "perf" and m["case"]["traced"] == "perf record -g"
        printed = json.loads(next(line for line in (out / "lat_tcp" / "raw" / f"{step['name']}.out").read_text().splitlines()
                                  if line.startswith("{")))
        assert m["samples"] == printed["samples"]


def test_every_claim_has_a_verdict_with_evidence(quick_run):
    _, out, _ = quick_run
    result = model.load(out / "lat_tcp.json")
    ids = {c["id"] for c in result["claims"]}
    assert {"no-server-no-number", "same-cpu-faster", "perf-slows-same-cpu", "grows-with-msize", "veth-not-faster"} <= ids
    assert all(c["evidence"] for c in result["claims"])


@pytest.mark.skipif(not is_root(), reason="the pinned and veth steps need root to leave traces worth checking")
@pytest.mark.parametrize("group,marker", [("pinned", "pinned.s0-c0: taskset"), ("veth", "veth.veth: ip netns exec")])
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
    rc, err, scratch = interrupt_at("lat_tcp", "msize.same.64: taskset", "--only", "msize", "--quick", "--out", str(tmp_path),
                                    sig=signal.SIGTERM, after=0.1)
    assert rc == 143, err[-2000:]
    assert processes_matching(scratch) == []
