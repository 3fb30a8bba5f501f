"""The optane_kyber lab run for real: quick mode end to end, bad usage, and Ctrl-C / TERM
mid-step restoring the scheduler, detaching the loop device and unmounting the tmpfs."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from labkit import model
from labkit.parsers.fio import fio_summary
from labrun import check_quick_result, interrupt_at, is_root, loop_devices_backed_by, mounts_under, processes_matching, run_lab

LAB = "optane_kyber"
pytestmark = [pytest.mark.lab, pytest.mark.skipif(not is_root(), reason="the lab's device, scheduler and perf -a steps need root")]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("optane_kyber_out")
    t0 = time.time()
    proc = run_lab(LAB, "--quick", "--out", str(out), "--host", "test-quick", timeout=600)
    return proc, out, time.time() - t0


@pytest.fixture(scope="module")
def left_out_run(tmp_path_factory, quick_run):
    """The groups a quick run leaves out (lab.toml quick_leaves_out: heat, overhead, sysbench),
    run on their own with ``--quick --only``, after the quick run; the same tuple as
    :func:`quick_run`."""
    out = tmp_path_factory.mktemp("optane_kyber_left_out")
    t0 = time.time()
    proc = run_lab(LAB, "--quick", "--only", "heat,overhead,sysbench", "--out", str(out), "--host", "test-quick",
                   timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out, time.time() - t0


def result(quick_run) -> dict:
    return model.load(quick_run[1] / f"{LAB}.json")


def test_quick_run_succeeds_and_validates(quick_run):
    proc, out, seconds = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = result(quick_run)
    check_quick_result(r, seconds)
    for step in r["steps"]:
        if step["status"] == "ok":
            assert (out / LAB / "raw" / f"{step['name']}.cmd").read_text().strip() == step["command"]


def test_quick_run_leaves_nothing_behind(quick_run):
    proc, _, _ = quick_run
    scratch = re.search(r"scratch (/\S+)", proc.stderr).group(1)
    assert not Path(scratch).exists()
    assert loop_devices_backed_by(scratch) == [] and mounts_under(scratch) == []
    assert "cleanup FAILED" not in proc.stderr
    assert not (quick_run[1] / LAB / "bin").exists(), "the burst binary must not end up in the results"


def test_scheduler_runs_are_interleaved_pinned_and_kept(quick_run):
    """Quick mode, as a full run: twenty repetitions of none, mq-deadline and kyber,
    interleaved (ABCABC...), each fio pinned to one CPU, every sample kept in repetition order
    (the paired claims read them by position)."""
    r = result(quick_run)
    runs = [s for s in r["steps"] if (s.get("case") or {}).get("experiment") == "sched"]
    offered = (quick_run[1] / LAB / "raw" / "device.schedulers.out").read_text().replace("[", "").replace("]", "").split()
    assert {"none", "kyber"} <= set(offered)
    # rep 1 of every scheduler before rep 2 of any; bfq (no claim reads it) left out
    order = [x for x in offered if x != "bfq"]
    assert [(s["case"]["rep"], s["case"]["scheduler"]) for s in runs] == [
        (i, sched) for i in range(1, 21) for sched in order]
    cpus = {s["case"]["cpu"] for s in runs}
    assert len(cpus) == 1 and all(s["command"].startswith(f"taskset -c {s['case']['cpu']} fio ") for s in runs)
    for sched in ("none", "kyber"):
        m = next(m for m in r["measurements"] if m["metric"] == "clat" and m["case"] == {
            "experiment": "sched", "scheduler": sched, "io_poll": m["case"]["io_poll"], "stat": "p50"})
        printed = [fio_summary((quick_run[1] / LAB / "raw" / f"{s['name']}.out").read_text())["clat_p50_us"]
                   for s in runs if s["case"]["scheduler"] == sched]
        assert m["samples"] == printed and len(printed) == 20


def test_the_device_is_a_direct_io_loop_device(quick_run):
    raw = quick_run[1] / LAB / "raw"
    assert raw.joinpath("device.dio.out").read_text().strip() == "1"
    assert "--direct-io=on" in raw.joinpath("device.loop.cmd").read_text()
    io_poll = int(raw.joinpath("device.io_poll.out").read_text())
    assert all(m["case"]["io_poll"] == io_poll for m in result(quick_run)["measurements"]
               if m["case"].get("experiment") == "sched")


def test_flame_graphs_and_shares(quick_run):
    r = result(quick_run)
    arts = {(a["kind"], json.dumps(a["case"], sort_keys=True)) for a in r["artifacts"]}
    for s in ("none", "kyber"):
        assert ("flamegraph", json.dumps({"experiment": "flame", "scheduler": s}, sort_keys=True)) in arts
    assert any(k == "diff_flamegraph" for k, _ in arts)
    share = {(m["case"]["scheduler"], m["case"]["under"]): m["median"] for m in r["measurements"]
             if m["metric"] == "share" and m["case"].get("experiment") == "flame"}
    folded = (quick_run[1] / LAB / "flame-kyber.folded").read_text()
    assert (share[("kyber", "kyber")] > 0) == ("kyber_" in folded)
    assert share[("none", "kyber")] == 0.0
    assert "kyber_" not in (quick_run[1] / LAB / "flame-none.folded").read_text()


def test_heat_map_artifact_and_range(left_out_run):
    r = result(left_out_run)
    (hm,) = [a for a in r["artifacts"] if a["kind"] == "heatmap" and a["case"].get("experiment") == "heat"]
    svg = (left_out_run[1] / hm["path"]).read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    summary = json.loads((left_out_run[1] / LAB / "heatmap.json").read_text())
    cmd = (left_out_run[1] / LAB / "raw" / "heat.range-script.cmd").read_text()
    assert f"--time {summary['range']['start']:.6f}\\,{summary['range']['end']:.6f}" in cmd
    burst = [m for m in r["measurements"] if m["metric"] == "subsecond_offset" and m["case"]["what"] == "burst start"]
    assert burst and burst[0]["n"] == 10  # ten bursts, quick or full
    # the range flame graph has the burst program's own function (symbols resolved)
    assert "burn" in (left_out_run[1] / LAB / "heat-all.folded").read_text()


def test_one_second_burst_map_and_flamescope_file(left_out_run):
    """One busy second among quiet ones: its own heat map (no range picked), its perf script
    output kept with --header for FlameScope, and one cell per slice on each side of the claim."""
    r = result(left_out_run)
    one = {"experiment": "one-second burst"}
    (hm,) = [a for a in r["artifacts"] if a["kind"] == "heatmap" and a["case"] == one]
    assert (left_out_run[1] / hm["path"]).read_text().lstrip().startswith("<?xml")
    (script,) = [a for a in r["artifacts"] if a["kind"] == "log" and a["case"] == {**one, "tool": "perf-script"}]
    text = (left_out_run[1] / script["path"]).read_text(errors="replace")
    assert text.startswith("# ========") and "# cmdline :" in text, "perf script --header"
    assert "burn" in text, "the burst's own function, symbols resolved"
    cells = {m["case"]["region"]: m["n"] for m in r["measurements"]
             if m["metric"] == "heat_samples" and m["case"]["experiment"] == one["experiment"]}
    rows = json.loads((left_out_run[1] / LAB / "heatmap-1s.json").read_text())["rows"]
    assert cells["burst second"] == rows and cells["other seconds, same slices"] % rows == 0
    assert not (left_out_run[1] / LAB / "raw" / "heat.1s.map.out").read_text().strip(), "no range printed"


def test_pmu_steps_skip_with_the_reason(quick_run):
    r = result(quick_run)
    ipc = next(s for s in r["steps"] if s["group"] == "ipc")
    if r["host"]["pmu"]["available"]:
        assert ipc["status"] == "skipped" and "quick mode" in ipc["reason"]  # no claim reads it
    else:
        assert ipc["status"] == "skipped" and ipc["reason"] == r["host"]["pmu"]["reason"]


def test_overhead_ratios(left_out_run):
    """Quick mode runs the cases the claims compare, eight repetitions each as a full run: one job
    plain, under perf record and under perf record -g at both rates; two jobs plain and under
    perf record."""
    r = result(left_out_run)
    ratios = [m for m in r["measurements"] if m["metric"] == "iops_ratio"]
    assert {(m["case"]["numjobs"], m["case"]["profiler"]) for m in ratios} == {
        (1, "plain"), (1, "record (defaults)"), (1, "record 997 Hz"), (1, "record 9973 Hz"),
        (2, "plain"), (2, "record (defaults)")}
    assert all(m["n"] == 8 for m in ratios)
    for m in ratios:
        if m["case"]["profiler"] == "plain":
            assert m["samples"] == [1.0] * m["n"]
        iops = next(x for x in r["measurements"] if x["metric"] == "iops" and x["case"] == m["case"])
        plain = next(x for x in r["measurements"] if x["metric"] == "iops" and x["case"] == {**m["case"], "profiler": "plain"})
        assert m["samples"] == pytest.approx([a / b for a, b in zip(iops["samples"], plain["samples"])])


def test_every_claim_has_a_verdict(quick_run):
    """Every claim is evaluated on what the lab records: untested only where a step was skipped,
    and never for want of repetitions (quick mode runs every case a claim reads as often as a
    full run)."""
    r = result(quick_run)
    ids = {c["id"] for c in r["claims"]}
    assert {"kyber-adds-latency", "kyber-costs-what-mq-deadline-costs", "kyber-frames-only-with-kyber",
            "perf-record-costs-more-under-load", "hottest-slice-after-burst-start", "hottest-slice-before-burst-end",
            "one-second-burst-is-a-column"} <= ids
    assert all("fewer than" not in c["evidence"] for c in r["claims"]), "every side has enough samples"
    assert all(c["evidence"] for c in r["claims"])
    skipped_groups = {s["group"] for s in r["steps"] if s["status"] == "skipped"}
    for c in r["claims"]:
        if c["verdict"] == "untested":
            assert skipped_groups, c  # a missing measurement must come from a skipped step
    kyber_frames = next(c for c in r["claims"] if c["id"] == "kyber-frames-only-with-kyber")
    assert kyber_frames["verdict"] != "untested"  # measured (one profile per scheduler in quick mode)
    # mq-deadline runs in quick mode too, as often as in full: the claim that reads it decides there
    deadline = [m for m in r["measurements"] if m["metric"] == "clat" and m["case"].get("scheduler") == "mq-deadline"
                and m["case"].get("stat") == "p50"]
    assert deadline and deadline[0]["n"] == 20
    assert next(c for c in r["claims"] if c["id"] == "kyber-costs-what-mq-deadline-costs")["verdict"] in (
        "holds", "fails", "inconclusive")


def test_left_out_groups_run_alone_and_decide(quick_run, left_out_run):
    """The quick run leaves heat, overhead and sysbench out, and says so; run on their own
    (``--only``) they measure every case their claims read."""
    assert set(result(quick_run)["run"]["left_out"]) == {"heat", "overhead", "sysbench"}
    r = result(left_out_run)
    assert not r["run"].get("left_out")
    verdicts = {c["id"]: c["verdict"] for c in r["claims"]}
    for cid in ("one-second-burst-is-a-column", "hottest-slice-after-burst-start", "perf-record-costs-more-under-load",
                "sysbench-fewer-events-under-perf"):
        assert verdicts[cid] in ("holds", "fails", "inconclusive"), cid


def test_sigint_during_kyber_restores_scheduler_and_releases_device(tmp_path):
    rc, err, scratch = interrupt_at(LAB, "sched.kyber.1: taskset", "--only", "sched", "--quick", "--out", str(tmp_path),
                                    sig=signal.SIGINT, after=0.5)
    assert rc == 130, err[-2000:]
    assert "interrupted by SIGINT" in err and "cleanup FAILED" not in err
    restores = re.findall(r"cleanup: restore (/sys/block/\S+/queue/scheduler) to (\S+)", err)
    assert restores, err[-2000:]
    knob, original = restores[-1]  # unwound newest first: the last restore writes the original
    assert all(k == knob for k, _ in restores)
    assert re.search(r"\[(\S+)\]", Path(knob).read_text()).group(1) == original
    assert scratch and not Path(scratch).exists(), "scratch directory left behind"
    assert loop_devices_backed_by(scratch) == [], "loop device still attached"
    assert mounts_under(scratch) == [], "tmpfs still mounted"
    time.sleep(0.3)
    dev = "/dev/" + knob.split("/")[3]
    assert processes_matching(scratch) == [] and processes_matching(f"--filename={dev} ") == [], "fio survived"
    assert not (tmp_path / f"{LAB}.json").exists() and not (tmp_path / f".{LAB}.partial").exists()


def test_sigterm_during_heat_record_stops_perf_and_burst(tmp_path):
    rc, err, scratch = interrupt_at(LAB, "heat.record: perf record", "--only", "heat", "--quick", "--out", str(tmp_path),
                                    sig=signal.SIGTERM, after=1.0)
    assert rc == 143, err[-2000:]
    time.sleep(0.3)
    assert processes_matching(scratch) == [] and processes_matching(str(tmp_path)) == []
    assert loop_devices_backed_by(scratch) == [] and mounts_under(scratch) == []
    assert not (tmp_path / f".{LAB}.partial").exists()
