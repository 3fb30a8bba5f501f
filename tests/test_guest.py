"""The guest runner (labkit.guest), for real: arm64 guests boot under QEMU with Debian's kernels
and userspace, and the NVMe root cause shows in them; `labkit guest run -- CMD` and `labkit
guest shell` as a reader types them, and a kernel the reader has. The first run of the session
fills the cache (~15-60 s of downloads and mke2fs; the shell's userspace adds bash, ~1 min more),
later runs reuse it. Without a boot: tests/test_guest_cli.py and tests/test_guest_local.py.

Fixtures: tests/fixtures/guest/virt-2cpu-2048m.dts is QEMU's own device tree of the arm64 virt
machine, dumped and decompiled by the command in the .cmd file beside it.
"""

from __future__ import annotations

import contextlib

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import termios
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit import guest
from labkit.guest import images, local

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "guest"
NEEDED = ["qemu-system-aarch64", "mmdebstrap", "dtc", "mke2fs", "cpio", "depmod"]
missing = [t for t in NEEDED if not shutil.which(t)]
needs_qemu = pytest.mark.skipif(bool(missing), reason=f"not installed: {' '.join(missing)} (make setup installs them)")


@pytest.mark.skipif(not (shutil.which("dtc") and shutil.which("fdtput")), reason="dtc/fdtput not installed")
def test_dma_ranges_added_to_the_bridge_only(tmp_path):
    src = tmp_path / "virt.dtb"
    images.dts_to_dtb((FIX / "virt-2cpu-2048m.dts").read_text(), src)
    out = tmp_path / "window.dtb"
    images.dtb_with_property(src, out, guest.PCIE_PATH, "dma-ranges", guest.DMA_WINDOW)
    before, after = images.dtb_to_dts(src).splitlines(), images.dtb_to_dts(out).splitlines()
    added = [ln for ln in after if ln not in before]
    assert added == [f"\t\tdma-ranges = <{guest.DMA_WINDOW}>;"]
    assert [ln for ln in before if ln not in after] == []
    node = "\n".join(after)[ "\n".join(after).index("pcie@10000000 {"):]
    assert node.index("dma-ranges") < node.index("};")
    assert images.property_cells(out, guest.PCIE_PATH, "dma-ranges") == guest.DMA_WINDOW
    with pytest.raises(guest.GuestBuildError, match="already has dma-ranges"):
        images.dtb_with_property(out, tmp_path / "again.dtb", guest.PCIE_PATH, "dma-ranges", guest.DMA_WINDOW)
    with pytest.raises(guest.GuestBuildError, match="no node"):
        images.dtb_with_property(src, tmp_path / "x.dtb", "/pcie@deadbeef", "dma-ranges", guest.DMA_WINDOW)


@pytest.mark.skipif(not shutil.which("dtc"), reason="dtc not installed")
def test_recompiled_tree_drops_qemus_padding(tmp_path):
    src = tmp_path / "virt.dtb"
    images.dts_to_dtb((FIX / "virt-2cpu-2048m.dts").read_text(), src)
    padded = tmp_path / "padded.dtb"
    padded.write_bytes(src.read_bytes().ljust(1 << 20, b"\0"))   # as QEMU's dumpdtb pads it
    images.recompile_dtb(padded, tmp_path / "out.dtb")
    assert (tmp_path / "out.dtb").read_bytes() == src.read_bytes()


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
    for bad in (dict(arch="sparc"), dict(profile="nope"), dict(dt="wider"), dict(arch="x86_64", dt="plain"),
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
        info = guest.run(guest.GuestSpec(arch="arm64", dt=dt),
                         guest.Boot(job, tmp_path / f"out-{dt}", tmp_path / f"work-{dt}", nvme_image=img, timeout=300),
                         say=lambda m: None)
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
        guest.run(guest.GuestSpec(arch="arm64"), guest.Boot(job, tmp_path / "out", tmp_path / "work", timeout=10),
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


def labkit_guest(*args: str, tmp: Path, **kw) -> dict:
    """Popen keywords for `python -m labkit guest ARGS` with $TMPDIR = ``tmp`` (where run -- CMD
    and shell make their private folder)."""
    return dict(args=[sys.executable, "-m", "labkit", "guest", *args], cwd=ROOT,
                env=dict(os.environ, TMPDIR=str(tmp)), **kw)


# One command, as a reader types it after `--`: dd reads the NVMe drive directly under perf stat
# counting swiotlb:swiotlb_bounced system-wide (as labs/nvme_swiotlb/guest_job.sh counts bounces),
# then a word with a quote in it and an exit status of its own.
INLINE = ("perf stat -x, -a -e swiotlb:swiotlb_bounced -- dd if=/dev/nvme0n1 of=/dev/null bs=1M count=8 iflag=direct; "
          "echo \"it's done\"; exit 3")


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(600)
@pytest.mark.parametrize("dt", ["dma-ranges", "plain"])
def test_inline_run_bounces_only_with_the_window(tmp_path, dt):
    """`labkit guest run --dt DT -- CMD` with no --nvme: a scratch NVMe drive, the command's output
    on stdout, its exit status returned; bounces with the 1 GiB window, none without; nothing
    left in $TMPDIR."""
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    t0 = time.monotonic()
    proc = subprocess.run(**labkit_guest("run", "--arch", "arm64", "--kernel-release", "bullseye", "--dt", dt,
                                         "--out", str(out), "--", "sh", "-c", INLINE, tmp=tmp),
                          capture_output=True, text=True, timeout=580)
    wall = time.monotonic() - t0
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "8388608 bytes (8.4 MB, 8.0 MiB) copied" in proc.stdout and "it's done" in proc.stdout.splitlines()
    line = next(ln for ln in proc.stdout.splitlines() if "swiotlb:swiotlb_bounced" in ln)
    bounced = int(line.split(",")[0])
    assert bounced > 0 if dt == "dma-ranges" else bounced == 0, line
    info = json.loads((out / "guest.json").read_text())
    assert info["exit"] == 3 and info["command"] == ["sh", "-c", INLINE]
    assert info["nvme_scratch"] == guest.SCRATCH_NVME_MIB and info["kernel_release"].startswith("5.10.")
    tree = info["device_tree"]
    assert (tree["name"], tree["origin"]) == (dt, "built") and re.fullmatch(r"[0-9a-f]{64}", tree["sha256"])
    assert info["dma_ranges"] == tree["pcie_dma_ranges"] == (guest.DMA_WINDOW if dt == "dma-ranges" else None)
    assert sorted(tmp.iterdir()) == []        # the job, the disks, the scratch drive, the console log: removed
    assert not _qemu_with(str(tmp))
    print(f"inline run --dt {dt}: {wall:.1f} s wall, {bounced} bounces")


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(300)
def test_interrupted_inline_run_leaves_nothing(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(**labkit_guest("run", "--arch", "arm64", "--", "sleep", "600", tmp=tmp),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while not _qemu_with(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _qemu_with(str(tmp)), "QEMU did not start"
    assert list(tmp.glob("pcb-guest.*/nvme-scratch.img"))
    time.sleep(2)
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out[-2000:]
    assert not _qemu_with(str(tmp)), "QEMU outlived the runner"
    assert sorted(tmp.iterdir()) == []


class Terminal:
    """A pseudo-terminal of 40x100 with a program on it; :meth:`expect` reads until a pattern.
    The program's environment says 24x80 (``COLUMNS``, ``LINES``, as pytest-xdist's workers
    export them): what the terminal itself says must win."""

    def __init__(self, argv_kw: dict):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
        env = dict(argv_kw.pop("env"), COLUMNS="80", LINES="24")
        env["TERM"] = "xterm-256color"
        self.proc = subprocess.Popen(**argv_kw, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.seen = b""

    def expect(self, pattern: bytes, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.seen):
                return True
            if select.select([self.master], [], [], 0.2)[0]:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:   # the program closed the terminal
                    break
        return bool(re.search(pattern, self.seen))

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())


PROMPT = rb"pcb-arm64:[^\r\n]*# "


@contextlib.contextmanager
def shell_session(tmp: Path, dt: str, boot_timeout: float):
    """``labkit guest shell --kernel-release bullseye --dt DT`` on a terminal (as the nvme chapter
    prints it: ``--dt`` makes the guest arm64 on any host), with ``tmp`` as its $TMPDIR: yields ``(term, seconds to the prompt)`` once the prompt shows; on the
    way out a guest still running is killed and the terminal closed."""
    term = Terminal(labkit_guest("shell", "--kernel-release", "bullseye", "--dt", dt, tmp=tmp))
    try:
        t0 = time.monotonic()
        assert term.expect(PROMPT, boot_timeout), term.seen[-2000:].decode(errors="replace")
        yield term, time.monotonic() - t0
    finally:
        if term.proc.poll() is None:
            os.killpg(term.proc.pid, signal.SIGKILL)
        os.close(term.master)


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(600)
def test_shell_on_a_terminal_boots_the_fixed_tree(tmp_path):
    """`labkit guest shell --dt wide` on a terminal (the fixed tree the nvme chapter offers): a
    prompt, the console as the shell's terminal (its size, Ctrl-C reaching the guest's foreground
    job), the NVMe drive and tracefs there; the PCIe node's `dma-ranges` as the chapter's `od`
    line prints it, its last cell the size 0x80000000 (all 2 GiB of RAM), and no bounce pool in
    the boot log; `exit 4` powers the guest off and is the exit status; nothing left in $TMPDIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with shell_session(tmp, "wide", 500) as (term, prompt_s):
        # <42> and pool=N are printed by the shell's expansions, so the typed line's echo holds neither
        term.type("echo '<'$((6*7))'>'; od -An -tx4 --endian=big /proc/device-tree/pcie@10000000/dma-ranges; "
                  "echo pool=$(dmesg | grep -c 'software IO TLB')\r")
        assert term.expect(rb"pool=\d+", 60), term.seen[-2000:].decode(errors="replace")
        printed = term.seen.decode(errors="replace").split("<42>", 1)[1].split("pool=", 1)[0]
        cells = re.findall(r"\b[0-9a-f]{8}\b", printed)
        assert cells[:7] == ["02000000", "00000000", "40000000", "00000000", "40000000", "00000000", "80000000"], cells
        assert b"pool=0" in term.seen
        term.type("tty; stty size; test -b /dev/nvme0n1 && echo nvme-ok; ls /sys/kernel/tracing/events/swiotlb; sleep 60\r")
        assert term.expect(rb"swiotlb_bounced", 60), term.seen[-2000:].decode(errors="replace")
        time.sleep(1)
        term.type("\x03")
        assert term.expect(rb"\^C[^#]{0,40}" + PROMPT, 20), term.seen[-2000:].decode(errors="replace")
        seen = term.seen.decode(errors="replace")
        assert "/dev/ttyAMA0" in seen and "40 100" in seen and "nvme-ok" in seen
        term.type("exit 4\r")
        assert term.proc.wait(timeout=60) == 4
    assert sorted(tmp.iterdir()) == []
    assert not _qemu_with(str(tmp))
    print(f"shell --dt wide: prompt after {prompt_s:.1f} s")


@needs_qemu
@pytest.mark.guest
@pytest.mark.timeout(600)
def test_a_kernel_the_reader_has_boots(tmp_path):
    """--kernel IMAGE --modules DIR: Debian bullseye's kernel, unpacked in the cache, stands in for
    one a reader built or kept (a 4.19 package is no longer on Debian's mirrors). Its cache entry
    is removed afterwards unless it was there before."""
    prep = guest.prepare(guest.GuestSpec(arch="arm64", kernel_release="bullseye"))
    tree, rel = Path(prep["kernel_dir"]) / "tree", prep["kernel"]["release"]
    image, mods = tree / "boot" / f"vmlinuz-{rel}", tree / "lib" / "modules" / rel
    digest = local.fingerprint(local.locate(image, mods))
    entry = guest.cache_dir() / "kernels" / "arm64" / f"local-{digest[:16]}"
    had = entry.exists()
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    try:
        proc = subprocess.run(**labkit_guest("run", "--arch", "arm64", "--kernel", str(image), "--modules", str(mods),
                                             "--out", str(out), "--", "uname", "-r", tmp=tmp),
                              capture_output=True, text=True, timeout=580)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert rel in proc.stdout.splitlines()
        info = json.loads((out / "guest.json").read_text())
        assert (info["kernel_package"], info["kernel_release"]) == ("local", rel)
        assert info["kernel_source"] == {"kind": "image", "path": str(image), "sha256": digest}
        assert sorted(tmp.iterdir()) == []
    finally:
        if not had:
            shutil.rmtree(entry, ignore_errors=True)
