"""The guest runner (labkit.guest), for real: arm64 guests boot under QEMU with Debian's kernels
and userspace, and the NVMe root cause shows in them. The first run of the session fills the
cache (~15-60 s of downloads and mke2fs), later runs reuse it.

Fixtures: tests/fixtures/guest/virt-2cpu-2048m.dts is QEMU's own device tree of the arm64 virt
machine, dumped and decompiled by the command in the .cmd file beside it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit import guest
from labkit.guest import images

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "guest"
NEEDED = ["qemu-system-aarch64", "mmdebstrap", "dtc", "mke2fs", "cpio", "depmod"]
missing = [t for t in NEEDED if not shutil.which(t)]
needs_qemu = pytest.mark.skipif(bool(missing), reason=f"not installed: {' '.join(missing)} (make setup installs them)")


def test_dma_ranges_added_to_the_bridge_only():
    dts = (FIX / "virt-2cpu-2048m.dts").read_text()
    out = images.add_dma_ranges(dts, guest.PCIE_NODE, guest.DMA_WINDOW)
    added = [ln for ln in out.splitlines() if ln not in dts.splitlines()]
    assert added == [f"\t\tdma-ranges = <{guest.DMA_WINDOW}>;"]
    node = out[out.index("pcie@10000000 {"):]
    assert node.index("dma-ranges") < node.index("};")
    with pytest.raises(guest.GuestBuildError, match="already has dma-ranges"):
        images.add_dma_ranges(out, guest.PCIE_NODE, guest.DMA_WINDOW)
    with pytest.raises(guest.GuestBuildError, match="no node"):
        images.add_dma_ranges(dts, "pcie@deadbeef", guest.DMA_WINDOW)


def test_module_order_puts_dependencies_first(tmp_path):
    d = tmp_path / "6.1.0-test"
    d.mkdir()
    (d / "modules.dep").write_text("kernel/drivers/nvme/host/nvme.ko: kernel/drivers/nvme/host/nvme-core.ko "
                                   "kernel/block/t10-pi.ko\nkernel/drivers/nvme/host/nvme-core.ko: kernel/block/t10-pi.ko\n"
                                   "kernel/block/t10-pi.ko:\n")
    (d / "modules.builtin").write_text("kernel/drivers/virtio/virtio_mmio.ko\n")
    order = images.module_order(d, ["virtio_mmio", "nvme"])
    assert order == ["kernel/block/t10-pi.ko", "kernel/drivers/nvme/host/nvme-core.ko", "kernel/drivers/nvme/host/nvme.ko"]
    assert images.module_order(d, ["crc64_rocksoft"], optional={"crc64_rocksoft"}) == []
    with pytest.raises(guest.GuestBuildError, match="no module ext4"):
        images.module_order(d, ["ext4"])


def test_bad_spec_is_refused():
    for bad in (dict(arch="sparc"), dict(profile="nope"), dict(dt="wide"), dict(arch="x86_64", dt="plain"),
                dict(accel="hvf")):
        with pytest.raises(ValueError):
            guest.GuestSpec(**bad).check()
    proc = subprocess.run([sys.executable, "-m", "labkit.guest", "run", "--arch", "sparc", "--job", "x", "--out", "y",
                           "--work", "z"], capture_output=True, text=True)
    assert proc.returncode == 2


BOUNCE_JOB = """busybox mount -t tracefs nodev /sys/kernel/tracing
perf stat -x, -a -e swiotlb:swiotlb_bounced -o $PCB_OUT/count.csv -- dd if=/dev/nvme0n1 of=/dev/null bs=1M count=64 iflag=direct
"""


@needs_qemu
@pytest.mark.guest    # two guest boots
@pytest.mark.timeout(600)
def test_guest_smoke_bounces_only_with_the_window(tmp_path):
    """Boot arm64 with each device tree, read 64 MiB directly from the NVMe drive, count bounces.
    Two short boots: the whole guest path end to end."""
    guest.prepare(guest.GuestSpec(arch="arm64"))  # the cache, once (cold: downloads; warm: nothing)
    job = tmp_path / "job"
    job.mkdir()
    (job / "run").write_text(BOUNCE_JOB)
    img = tmp_path / "nvme.img"
    with open(img, "wb") as f:
        f.write(os.urandom(1 << 20) * 80)
    t0 = time.monotonic()
    counts = {}
    for dt in ("plain", "dma-ranges"):
        info = guest.run(guest.GuestSpec(arch="arm64", dt=dt), job, tmp_path / f"out-{dt}", tmp_path / f"work-{dt}",
                         nvme_image=img, timeout=300, say=lambda m: None)
        assert info["exit"] == 0 and info["arch"] == "arm64" and info["dt"] == dt
        assert info["accelerator"] in ("tcg", "kvm") and info["kernel_release"].endswith("-arm64")
        line = next(ln for ln in (tmp_path / f"out-{dt}" / "count.csv").read_text().splitlines() if "swiotlb" in ln)
        counts[dt] = int(line.split(",")[0])
    wall = time.monotonic() - t0
    assert counts["plain"] == 0, counts
    assert counts["dma-ranges"] > 0, counts
    assert wall <= 90, f"two boots took {wall:.0f} s (budget 90 s with a warm cache)"


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(300)
def test_guest_timeout_stops_qemu(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "run").write_text("sleep 600\n")
    with pytest.raises(guest.GuestRunError, match="timed out"):
        guest.run(guest.GuestSpec(arch="arm64"), job, tmp_path / "out", tmp_path / "work", timeout=25,
                  say=lambda m: None)
    assert not _qemu_with(str(tmp_path))


def _qemu_with(marker: str) -> list[str]:
    """Command lines of live (not zombie) QEMU processes whose arguments mention ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if "qemu-system" in args and marker in args and state != "Z":
            found.append(f"{proc.name} {args}")
    return found


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(300)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_signal_to_the_runner_stops_qemu(tmp_path, sig):
    """INT/TERM reach the runner's handler; KILL leaves QEMU to PR_SET_PDEATHSIG. Either way no
    QEMU outlives the runner."""
    job = tmp_path / "job"
    job.mkdir()
    (job / "run").write_text("sleep 600\n")
    proc = subprocess.Popen([sys.executable, "-m", "labkit.guest", "run", "--arch", "arm64", "--job", str(job),
                             "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--timeout", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not _qemu_with(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qemu_with(str(tmp_path)), "QEMU did not start"
    time.sleep(2)
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    for _ in range(50):
        if not _qemu_with(str(tmp_path)):
            break
        time.sleep(0.1)
    assert not _qemu_with(str(tmp_path)), "QEMU outlived the runner"
