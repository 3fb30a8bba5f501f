"""The nvme_swiotlb lab run for real: quick mode end to end, bad usage, and SIGINT in the middle
of tracing (and of a knob change) leaving tracefs, the block device's trace switch, sysfs knobs,
mounts and loop devices as they were."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from labkit import model
from labkit import steps as step_records
from labkit.parsers.dd import dd_summary
from labkit.record import read_steps
from labrun import (ONE_REPETITION, check_quick_result, interrupt_at, is_root, left_out_repetition, loop_devices_backed_by,
                    mounts_under, run_lab)
import readings

pytestmark = pytest.mark.lab     # real runs of the nvme_swiotlb lab (the guest group's test: also guest)

LAB = "nvme_swiotlb"
HOST_GROUPS = "dd,strace,events,btt,fgraph,swiotlb,bounce,tried"


# ---- tracefs state, read through a private tracefs mount (never the lab's) ------------------

@pytest.fixture(scope="module")
def tracefs(tmp_path_factory):
    """A private tracefs mount to inspect the kernel's tracing state (the state is global,
    whatever the mount point); unmounted after the module."""
    if not is_root():
        pytest.skip("needs root")
    d = tmp_path_factory.mktemp("tracefs-inspect")
    if subprocess.run(["mount", "-t", "tracefs", "nodev", str(d)]).returncode != 0:
        pytest.skip("cannot mount tracefs")
    yield d
    subprocess.run(["umount", str(d)])


def trace_state(tr: Path) -> dict:
    """What the lab may touch: the top-level tracer and options, its instances, every block
    device's blk trace switch, and the tracefs mounts (mount points and count)."""
    enable = {}
    for f in sorted(Path("/sys/block").glob("*/trace/enable")):
        enable[f.parts[3]] = f.read_text().strip()
    mounts = sorted(l.split()[1] for l in Path("/proc/self/mounts").read_text().splitlines() if l.split()[2] == "tracefs")
    return {
        "current_tracer": (tr / "current_tracer").read_text().strip(),
        "bin": (tr / "options" / "bin").read_text().strip(),
        "context-info": (tr / "options" / "context-info").read_text().strip(),
        "tracing_on": (tr / "tracing_on").read_text().strip(),
        "pcb_instances": sorted(p.name for p in (tr / "instances").iterdir() if p.name.startswith("pcb-")),
        "blk_trace_enable": {k: v for k, v in enable.items() if v != "0"},
        "tracefs_mounts": mounts,
    }


# ---- one quick run shared by the tests ------------------------------------------------------

@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, tracefs):
    out = tmp_path_factory.mktemp("nvme_out")
    before = trace_state(tracefs)
    t0 = time.time()
    # Every group but guest: the host part keeps the 2-minute quick contract; the guests (about
    # 4 minutes under TCG) have their own test below.
    proc = run_lab(LAB, "--quick", "--only", HOST_GROUPS, "--out", str(out), "--host", "test-quick", timeout=240)
    return proc, out, time.time() - t0, before, trace_state(tracefs)


def result(out: Path) -> dict:
    return model.load(out / f"{LAB}.json")


def test_quick_run_succeeds_validates_and_is_quick(quick_run):
    proc, out, seconds, _, _ = quick_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = result(out)
    check_quick_result(r, seconds)
    assert "cleanup FAILED" not in proc.stderr


def test_quick_run_leaves_tracing_as_it_was(quick_run):
    _, _, _, before, after = quick_run
    assert after == before


def test_dd_samples_are_what_dd_printed(quick_run):
    """The samples of a dd case are what each step with that case printed, in repetition order."""
    _, out, _, _, _ = quick_run
    r = result(out)
    want = {"experiment": "dd", "target": "file", "io": "direct", "cache": "cold"}
    m = next(m for m in r["measurements"] if m["metric"] == "bandwidth" and m["case"] == want)
    steps = sorted((s for s in r["steps"] if s["status"] == "ok" and s.get("case", {}).get("tool") == "dd"
                    and all(s["case"].get(k) == v for k, v in want.items())), key=lambda s: s["case"]["rep"])
    assert [s["case"]["rep"] for s in steps] == list(range(1, len(steps) + 1))
    assert len(m["samples"]) == len(steps) >= 3
    printed = [dd_summary((out / LAB / "raw" / f"{s['name']}.err").read_text()) for s in steps]
    assert m["samples"] == pytest.approx([p["bytes"] / p["seconds"] / 1e6 for p in printed])


def test_every_measured_step_has_its_case(quick_run):
    """record.py reads each step's case, never its name: every step a measurement names has one."""
    _, out, _, _, _ = quick_run
    r = result(out)
    steps = {s["name"]: s for s in r["steps"]}
    for m in r["measurements"]:
        assert "case" in steps[m["step"]], (m["metric"], m["step"])


def test_claims_read_repeated_steps(quick_run):
    """The strace -c -w and perf stat claims read one sample per repetition (at least 3 in quick
    mode), the two sides of each from the same runs."""
    _, out, _, _, _ = quick_run
    r = result(out)
    acc = [m for m in r["measurements"] if m["metric"] == "accounted_time" and m["case"]["io"] == "direct"]
    assert len(acc) == 2 and all(m["n"] >= 3 for m in acc) and acc[0]["n"] == acc[1]["n"]
    tp = [m for m in r["measurements"] if m["metric"] == "tracepoint_count"]
    if not tp:
        pytest.skip("swiotlb.perf skipped on this host")
    assert len(tp) == 2 and all(m["n"] >= 3 for m in tp) and tp[0]["n"] == tp[1]["n"]


def test_histogram_counts_every_read(quick_run):
    _, out, _, _, _ = quick_run
    r = result(out)
    for io in ("buffered", "direct"):
        lat = next(m for m in r["measurements"] if m["metric"] == "read_latency" and m["case"]["io"] == io)
        hist = [m for m in r["measurements"] if m["metric"] == "read_latency_hist" and m["case"]["io"] == io]
        assert sum(m["samples"][0] for m in hist) == lat["n"]
        assert lat["n"] == 512   # the 512 MiB file read with bs=1M (quick runs write it full size too)


def test_block_trace_path_recorded_and_btt_parsed(quick_run):
    _, out, _, _, _ = quick_run
    r = result(out)
    steps = {s["name"]: s for s in r["steps"]}
    if steps.get("btt", {}).get("status") == "skipped":
        pytest.skip(f"btt skipped: {steps['btt']['reason']}")
    path = (out / LAB / "btt.path").read_text().strip()
    assert path in ("blktrace", "ftrace")
    assert steps["btt.btt"]["case"] == {"tool": "btt", "path": path}
    if path == "ftrace":
        assert steps["btt.blktrace"]["status"] == "skipped" and steps["btt.blktrace"]["reason"]
        assert steps["btt.tracer"]["status"] == "ok"
    d2c = next(m for m in r["measurements"] if m["metric"] == "block_latency" and m["case"]["phase"] == "D2C")
    q2c = next(m for m in r["measurements"] if m["metric"] == "block_latency" and m["case"]["phase"] == "Q2C")
    assert d2c["n"] == q2c["n"] > 0
    assert d2c["median"] <= q2c["median"]


def test_events_found_every_request(quick_run):
    _, out, _, _, _ = quick_run
    r = result(out)
    count = {m["case"]["event"]: m["samples"][0] for m in r["measurements"] if m["metric"] == "trace_events"}
    if not count:
        pytest.skip("events group skipped")
    assert count["block_rq_issue"] == count["block_rq_complete"] > 0
    assert count["sched_switch"] > 0
    service = next(m for m in r["measurements"] if m["metric"] == "io_phase" and m["case"]["phase"] == "service")
    assert service["n"] == count["block_rq_issue"]


def test_every_claim_has_a_verdict(quick_run):
    _, out, _, _, _ = quick_run
    r = result(out)
    ids = {c["id"] for c in r["claims"]}
    assert {"direct-skips-page-cache", "calls-times-time-per-call", "d2c-dominates-q2c", "bounce-costs-throughput",
            "read-ahead-helps-buffered", "read-ahead-not-direct", "host-does-not-bounce"} <= ids
    assert all(c["evidence"] for c in r["claims"])


# ---- usage ----------------------------------------------------------------------------------

# ---- interrupted mid-step -------------------------------------------------------------------

def check_clean(rc, err, scratch, out: Path):
    assert rc == 130, err[-2000:]
    assert "interrupted by SIGINT" in err
    assert "cleanup FAILED" not in err, err[-2000:]
    assert scratch and not Path(scratch).exists(), "scratch directory left behind"
    assert mounts_under(scratch) == []
    assert loop_devices_backed_by(scratch) == []
    assert not (out / f"{LAB}.json").exists() and not (out / f".{LAB}.partial").exists()


@pytest.mark.skipif(not is_root(), reason="tracing needs root")
@pytest.mark.parametrize("marker", ["btt.capture: starting", "btt.dd: dd", "events.enable-complete: sh -c",
                                    "events.dd: sh -c"])
def test_sigint_during_tracing_restores_tracefs(marker, tracefs, tmp_path, monkeypatch):
    """Interrupted while the blk tracer (or the events instance) is set up. The lab is pointed
    at an unmounted tracefs mount point (PCB_TRACEFS), so it must mount it and unmount it again."""
    mnt = tmp_path / "tracefs-mnt"
    mnt.mkdir()
    before = trace_state(tracefs)
    group = marker.split(".")[0]
    monkeypatch.setenv("PCB_TRACEFS", str(mnt))
    rc, err, scratch = interrupt_at(LAB, marker, "--quick", "--only", group, "--out", str(tmp_path / "out"),
                                    sig=signal.SIGINT, after=0.02)
    check_clean(rc, err, scratch, tmp_path / "out")
    assert f"tracefs: mount -t tracefs nodev {mnt}" in err
    assert mounts_under(str(mnt)) == [], "the lab's tracefs mount was left behind"
    assert trace_state(tracefs) == before


@pytest.mark.skipif(not is_root(), reason="knobs need root")
def test_sigint_during_knob_sweep_restores_knobs(tmp_path):
    rc, err, scratch = interrupt_at(LAB, "tried.ra4096.1.buffered: dd", "--quick", "--only", "tried",
                                    "--out", str(tmp_path / "out"), sig=signal.SIGINT, after=0.01)
    check_clean(rc, err, scratch, tmp_path / "out")
    # "cleanup: restore FILE to VALUE" lines, newest first: the last one per file is the original value.
    restored = {}
    for f, v in re.findall(r"cleanup: restore (/sys/block/\S+/queue/\S+) to (\S+)", err):
        restored[f] = v
    assert restored, "no knob restore ran"
    for f, v in restored.items():
        dev = f.split("/")[3]
        backing = subprocess.run(["losetup", "-n", "-O", "BACK-FILE", f"/dev/{dev}"], capture_output=True, text=True).stdout
        if backing.strip():
            continue    # another user attached the device meanwhile: its knobs are theirs now
        text = Path(f).read_text().strip()
        now = re.search(r"\[(\S+)\]", text).group(1) if "[" in text else text
        assert now == v, f"{f} is {now}, was {v}"


# ---- the guest group: the root cause in arm64 QEMU guests --------------------------------------

GUEST_TOOLS = ["qemu-system-aarch64", "mmdebstrap", "dtc", "mke2fs", "cpio"]


@pytest.fixture(scope="module")
def guest_run(tmp_path_factory):
    """``--quick --only guest`` with ``PCB_ONE_REPETITION=1``: six boots (two kernels, three
    device trees) instead of a reader's thirty, about 90 s under TCG; returns (process, out
    folder, wall seconds)."""
    import shutil
    missing = [t for t in GUEST_TOOLS if not shutil.which(t)]
    if missing:
        pytest.skip(f"not installed: {' '.join(missing)}")
    out = tmp_path_factory.mktemp("nvme_guest_out")
    t0 = time.time()
    proc = run_lab(LAB, "--quick", "--only", "guest", "--out", str(out), "--host", "test-quick", timeout=1200,
                   env=ONE_REPETITION)
    return proc, out, time.time() - t0


@pytest.mark.guest
@pytest.mark.timeout(1300)
def test_guest_group_reproduces_the_root_cause(guest_run):
    """--quick --only guest with one boot a configuration (:func:`guest_run`: the fault
    matrix's ``PCB_ONE_REPETITION=1``; a reader's quick run boots each five times): kernels 5.10
    and 6.1 each booted with the three device trees (plain, the 1 GiB dma-ranges window, the
    window widened to all RAM), boots 2 to 5 of each recorded as skipped for that reason, every
    guest measurement marked with the guest's emulation, each guest step's case brought back,
    and the root cause in the counts of that one boot: with the window every direct read
    bounces (at least one bounce per completed request) and swiotlb runs under read(); with the
    plain or the widened tree nothing bounces and swiotlb never runs. Five boots a side, which
    the claims' verdicts need, are the committed full run's (its claims are checked on it)."""
    proc, out, seconds = guest_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = result(out)
    guest = [m for m in r["measurements"] if m["case"].get("experiment") == "guest"]
    seen = {(m["case"]["kernel"], m["case"]["dt"]) for m in guest if m["metric"] == "bandwidth"}
    assert seen == {(k, dt) for k in ("5.10", "6.1") for dt in ("plain", "dma-ranges", "dma-ranges-wide")}
    for metric in ("boot_bandwidth", "boot_vs_control", "boot_time"):
        per_boot = {(m["case"]["kernel"], m["case"]["dt"]): len(m["samples"]) for m in guest if m["metric"] == metric}
        assert per_boot == {key: 1 for key in seen}, metric
    for release in ("bullseye", "bookworm"):
        for dt in ("plain", "dma-ranges", "dma-ranges-wide"):
            later = {s["case"]["rep"]: s for s in r["steps"] if s["name"].startswith(f"guest.{release}.{dt}.")
                     and s["name"].rsplit(".", 1)[-1].isdigit()}
            assert sorted(later) == [2, 3, 4, 5], (release, dt, sorted(later))
            assert all(left_out_repetition(s) for s in later.values())
    for m in guest:
        assert m["case"]["guest_arch"] == "arm64" and m["case"]["accelerator"] in ("tcg", "kvm")
        assert m["case"]["guest_kernel"].startswith(m["case"]["kernel"])
        assert m["emulation"]["accelerator"] == m["case"]["accelerator"]
    types = step_records.declared(Path(__file__).resolve().parents[1])
    for s in r["steps"]:
        if s.get("case", {}).get("tool") == "labkit.guest" and s["status"] == "ok":   # quick: no boot-time knobs
            # the guest's /out is a run directory as a host run's, its steps read by the host's reader
            d = out / LAB / s["case"]["out"]
            (step,) = [g for g in read_steps(d, types) if g["name"] == "dd.1.direct"]
            assert (step["group"], step["status"], step["case"]) == \
                ("guest", "ok", {"tool": "dd", "io": "direct", "knob": "none", "rep": 1})
    windows = {m["case"]["dt"]: m["samples"][0] for m in guest if m["metric"] == "ram_outside_dma_window"}
    assert windows["dma-ranges"] > 0 and windows["dma-ranges-wide"] == 0

    def one(metric: str, **case) -> float:
        """The one boot's one value of the guest measurement of ``metric`` whose case has ``case``."""
        (x,) = readings.samples(r, metric, experiment="guest", **case)
        return x
    for kernel in ("5.10", "6.1"):
        bounced = {dt: one("swiotlb_bounced", kernel=kernel, dt=dt, io="direct") for dt in ("plain", "dma-ranges", "dma-ranges-wide")}
        calls = {dt: one("fgraph_swiotlb_calls", kernel=kernel, dt=dt) for dt in ("plain", "dma-ranges")}
        assert bounced["dma-ranges"] > 0 and bounced["plain"] == bounced["dma-ranges-wide"] == 0, (kernel, bounced)
        assert calls["dma-ranges"] > 0 and calls["plain"] == 0, (kernel, calls)
        requests = one("read_events", kernel=kernel, dt="dma-ranges", io="direct", event="block:block_rq_complete")
        assert one("read_events", kernel=kernel, dt="dma-ranges", io="direct", event="swiotlb:swiotlb_bounced") >= requests > 0
    assert not [a for a in r["artifacts"] if a["kind"] == "flamegraph"]    # quick: no perf record
    assert seconds <= 300, f"--quick --only guest with one boot a configuration took {seconds:.0f} s (budget: 5 min)"
