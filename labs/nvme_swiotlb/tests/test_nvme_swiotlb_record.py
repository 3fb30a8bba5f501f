"""labs/nvme_swiotlb/record.py and the lab's device-tree tools, on hand-made inputs (fast tier): a
step's case decides what it measures, never its name; samples come in repetition order; guest
steps' cases come back as <step>.case files; read() times from raw_syscalls events; the widened
dma-ranges window (dt_widen.py) and its check (dt_dma_ranges.py --fail-if-outside)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import steps
from labkit.record import Run

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "labs" / "nvme_swiotlb"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"nvme_swiotlb_{name}", LAB / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


record = _module("record")
dt_widen = _module("dt_widen")

DD_ERR = "{mib}+0 records in\n{mib}+0 records out\n{b} bytes ({b} B) copied, {s} s, {r} MB/s\n"


def _run_dir(tmp_path: Path, steps: list[tuple[str, dict, str]]) -> Run:
    """A run directory with host.json, steps.tsv and, per (name, case, dd stderr), raw/<name>.err
    and raw/<name>.case, as labs/lib/lab.sh writes them."""
    d = tmp_path / "run"
    (d / "raw").mkdir(parents=True)
    (d / "host.json").write_text("{}")
    lines = []
    for name, case, err in steps:
        lines.append(f"{name}\tdd\tok\t0\t0.5\tsuccess\t")
        (d / "raw" / f"{name}.err").write_text(err)
        (d / "raw" / f"{name}.cmd").write_text("dd if=data of=/dev/null bs=1M")
        (d / "raw" / f"{name}.case").write_text("".join(f"{k}={v}\n" for k, v in case.items()))
    (d / "steps.tsv").write_text("\n".join(lines) + "\n")
    return Run("nvme_swiotlb", d, quick=True)


def _dd_err(seconds: float) -> str:
    b = 134217728
    return DD_ERR.format(mib=128, b=b, s=seconds, r=round(b / seconds / 1e6))


def test_dd_case_comes_from_the_step_record_in_repetition_order(tmp_path):
    """Step names that say nothing (and run order against repetition order): the measurement's
    case is the step's case less tool and rep, and its samples follow rep."""
    case = {"tool": "dd", "experiment": "dd", "target": "file", "io": "direct", "cache": "cold"}
    run = _run_dir(tmp_path, [("zz", {**case, "rep": 2}, _dd_err(0.2)),
                              ("aa", {**case, "rep": 1}, _dd_err(0.1)),
                              ("mm", {**case, "rep": 3}, _dd_err(0.4))])
    record.collect(run)
    (m,) = [m for m in run.measurements if m["metric"] == "bandwidth"]
    assert m["case"] == {"experiment": "dd", "target": "file", "io": "direct", "cache": "cold"}
    assert m["samples"] == pytest.approx([134217728 / s / 1e6 for s in (0.1, 0.2, 0.4)])
    assert m["step"] == "aa"


def test_a_step_without_a_case_measures_nothing(tmp_path):
    run = _run_dir(tmp_path, [("dd.1.direct-cold", {}, _dd_err(0.1))])
    (run.dir / "raw" / "dd.1.direct-cold.case").unlink()
    run = Run("nvme_swiotlb", run.dir, quick=True)
    record.collect(run)
    assert run.measurements == []


def test_guest_steps_are_the_cased_steps_that_succeeded_in_repetition_order(tmp_path):
    """The guest's steps, written by the guest's step language (labkit/guest/step.sh with
    labs/lib/case.sh, as on a job disk), read back with their cases in repetition order; a failed
    step and a step without a case are not listed."""
    from labrun import guest_steps_here
    types = steps.declared(LAB)
    body = ("step b tool=dd io=direct rep=2 -- true; step a tool=dd io=direct rep=1 -- true; "
            "step c tool=dd io=direct rep=3 -- false; step drop -- true")
    proc = guest_steps_here(tmp_path, body, types, lab=LAB.name)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    assert record.guest_steps(out, types) == [("a", {"tool": "dd", "io": "direct", "rep": 1}),
                                              ("b", {"tool": "dd", "io": "direct", "rep": 2})]


def test_kernel_series_keeps_the_trailing_zero():
    assert record.kernel_series("5.10.0-32-arm64") == "5.10"
    assert record.kernel_series("6.1.0-28-arm64\n") == "6.1"


def test_read_times_pairs_enter_and_exit_of_reads_on_fd_0():
    trace = """# tracer: nop
#
              dd-812     [001] .....   123.000100: sys_enter: NR 63 (0, ffff9c000000, 100000, 0, 0, 0)
              sh-813     [000] .....   123.000200: sys_enter: NR 63 (0, ffff9c000000, 10, 0, 0, 0)
              dd-812     [001] .....   123.001300: sys_exit: NR 63 = 1048576
              dd-812     [001] .....   123.001400: sys_enter: NR 63 (3, ffff9c000000, 100000, 0, 0, 0)
              dd-812     [001] .....   123.001500: sys_exit: NR 63 = 10
              sh-813     [000] .....   123.002200: sys_exit: NR 63 = 10
              dd-812     [001] .....   123.003000: sys_enter: NR 63 (0, ffff9c000000, 100000, 0, 0, 0)
              dd-812     [001] .....   123.003500: sys_exit: NR 63 = 0
              dd-812     [001] .....   123.004000: sys_enter: NR 64 (1, ffff9c000000, 100000, 0, 0, 0)
              dd-812     [001] .....   123.004100: sys_exit: NR 64 = 1048576
"""
    # dd's read of fd 0 (1200 µs) and the other task's (2000 µs); not fd 3, not the EOF read, not write (64).
    assert record.read_times(trace) == pytest.approx([1200.0, 2000.0])


VIRT_DTS = """/dts-v1/;

/ {
\tinterrupt-parent = <0x8002>;
\t#size-cells = <0x02>;
\t#address-cells = <0x02>;
\tcompatible = "linux,dummy-virt";

\tpcie@10000000 {
\t\tdma-ranges = <0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x40000000>;
\t\t#size-cells = <0x02>;
\t\tdevice_type = "pci";
\t\tranges = <0x1000000 0x00 0x00 0x00 0x3eff0000 0x00 0x10000>;
\t\t#address-cells = <0x03>;
\t};

\tmemory@40000000 {
\t\treg = <0x00 0x40000000 0x00 0x80000000>;
\t\tdevice_type = "memory";
\t};
};
"""


WINDOW = [0x2000000, 0x00, 0x40000000, 0x00, 0x40000000, 0x00, 0x40000000]
RAM = [{"base": 0x40000000, "size": 0x80000000}]


def test_widen_reaches_the_end_of_ram_and_keeps_the_addresses():
    cells, change = dt_widen.widen(WINDOW, 2, 2, RAM)
    assert cells == WINDOW[:6] + [0x80000000]
    assert change["before"] == [{"pci_addr": 0x40000000, "cpu_addr": 0x40000000, "size": 0x40000000}]
    assert change["after"] == [{"pci_addr": 0x40000000, "cpu_addr": 0x40000000, "size": 0x80000000}]
    # one size cell, two windows, RAM in two banks: each window reaches the end of the higher bank
    two = [0x2000000, 0, 0, 0, 0x40000000, 0x10000000, 0x2000000, 0, 0x10000000, 0, 0x20000000, 0x10000000]
    banks = [{"base": 0x40000000, "size": 0x40000000}, {"base": 0x90000000, "size": 0x10000000}]
    cells, change = dt_widen.widen(two, 2, 1, banks)
    assert [w["size"] for w in change["after"]] == [0x60000000, 0x80000000]
    assert cells == two[:5] + [0x60000000] + two[6:11] + [0x80000000]
    assert dt_widen.ram_ranges([0, 0x40000000, 0, 0x80000000, 7], 2, 2) == RAM


def test_widen_refuses_what_it_cannot_widen():
    with pytest.raises(ValueError, match="memory"):
        dt_widen.widen(WINDOW, 2, 2, [])
    with pytest.raises(ValueError, match="no whole window"):
        dt_widen.widen(WINDOW[:5], 2, 2, RAM)
    with pytest.raises(ValueError, match="above RAM"):
        dt_widen.widen([0x2000000, 0, 0x80000000, 0, 0x80000000, 0, 0x40000000], 2, 2, RAM)
    with pytest.raises(ValueError, match="1 size cell"):   # 4 GiB does not fit in one 32-bit cell
        dt_widen.widen(WINDOW[:6], 2, 1, [{"base": 0x40000000, "size": 0x100000000}])


@pytest.mark.skipif(not (shutil.which("dtc") and shutil.which("fdtget")), reason="dtc/fdtget not installed")
def test_dt_widen_round_trip_through_dtc(tmp_path):
    """The tree compiled, widened by fdtget/fdtput, decompiled: the window's size is the only
    line that changes; a tree without a memory node or a PCI window is refused (exit 1), bad
    usage exits 2."""
    src, dest = tmp_path / "in.dtb", tmp_path / "out.dtb"

    def dtb(text: str, path: Path) -> Path:
        subprocess.run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(path), "-"], input=text, text=True, check=True)
        return path

    def dts(path: Path) -> str:
        return subprocess.run(["dtc", "-q", "-I", "dtb", "-O", "dts", str(path)], capture_output=True, text=True).stdout

    dtb(VIRT_DTS, src)
    p = subprocess.run([sys.executable, str(LAB / "dt_widen.py"), str(src), str(dest)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["node"] == "pcie@10000000" and out["ram"] == RAM and out["after"][0]["size"] == 0x80000000
    before, after = dts(src).splitlines(), dts(dest).splitlines()
    assert len(before) == len(after) and [(a, b) for a, b in zip(before, after) if a != b] == [
        ("\t\tdma-ranges = <0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x40000000>;",
         "\t\tdma-ranges = <0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x80000000>;")]
    for broken, why in ((VIRT_DTS.replace("memory@40000000", "mem@40000000"), "memory"),
                        (VIRT_DTS.replace("\t\tdma-ranges", "\t\tfoo-ranges"), "dma-ranges")):
        bad = subprocess.run([sys.executable, str(LAB / "dt_widen.py"), str(dtb(broken, tmp_path / "bad.dtb")),
                              str(tmp_path / "bad-out.dtb")], capture_output=True, text=True)
        assert bad.returncode == 1 and why in bad.stderr and not bad.stdout
    usage = subprocess.run([sys.executable, str(LAB / "dt_widen.py"), str(src)], capture_output=True, text=True)
    assert usage.returncode == 2


def _prop(d: Path, name: str, *cells: int, raw: bytes | None = None):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(raw if raw is not None else b"".join(c.to_bytes(4, "big") for c in cells))


@pytest.mark.parametrize("size, rc", [(0x40000000, 3), (0x80000000, 0)])
def test_dt_dma_ranges_fail_if_outside(tmp_path, size, rc):
    """The check of the widened tree: exit 3 while some RAM lies outside the PCI window."""
    root = tmp_path / "dt"
    _prop(root, "#address-cells", 2)
    _prop(root, "#size-cells", 2)
    _prop(root / "memory@40000000", "device_type", raw=b"memory\0")
    _prop(root / "memory@40000000", "reg", 0, 0x40000000, 0, 0x80000000)
    _prop(root / "pcie@10000000", "device_type", raw=b"pci\0")
    _prop(root / "pcie@10000000", "#size-cells", 2)
    _prop(root / "pcie@10000000", "dma-ranges", 0x02000000, 0, 0x40000000, 0, 0x40000000, 0, size)
    p = subprocess.run([sys.executable, str(LAB / "dt_dma_ranges.py"), "--root", str(root), "--fail-if-outside"],
                       capture_output=True, text=True)
    assert p.returncode == rc, p.stderr
    assert json.loads(p.stdout)["ram_outside_pci_windows"] == 0x80000000 - size


@pytest.mark.parametrize("result", sorted(ROOT.glob("results/*/nvme_swiotlb.json")), ids=lambda p: p.parent.name)
def test_committed_bounce_counts_are_whole_multiples_of_the_reads(result):
    """The evidence page says each direct read's bounce count is the reads times the pieces of
    dd's one buffer: every committed count of swiotlb_bounced during a counted direct read is a
    whole multiple of MB (1 MiB reads) from the guest job's job.env. A re-recorded result where
    something else bounced during the count makes this fail, and the page must be read again."""
    job = result.with_suffix("") / "raw" / "guest" / "job.env"
    if not job.exists():
        pytest.skip(f"{result.parent.name} booted no guest (its guest group was skipped)")
    env = dict(line.split("=", 1) for line in job.read_text().split())
    reads = int(env["MB"])
    counts = [(m["case"], s) for m in json.loads(result.read_text())["measurements"]
              if m["metric"] == "swiotlb_bounced" and m["case"].get("io") == "direct" for s in m["samples"]]
    assert counts, f"{result}: no direct-read bounce counts"
    assert [(c, s) for c, s in counts if s % reads] == []
