"""QEMU for guests: the machine per architecture, the accelerator probe, and a boot that is
always bounded and always stopped.

Sources of the method: QEMU's system emulation manual (``-machine virt`` for arm64 with
``dumpdtb=FILE``, ``-device nvme``, ``-device virtio-blk-device`` on virtio-mmio, ``-snapshot``
semantics of ``-drive snapshot=on``, ``-accel kvm|tcg``) and prctl(2) ``PR_SET_PDEATHSIG`` (QEMU
dies with the process that started it, even when that process is killed with SIGKILL).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Callable

# One entry per guest architecture. "blk" is the virtio disk device: on arm64 virt the system
# disks sit on virtio-mmio, outside the PCIe host bridge, so a dma-ranges window given to the
# bridge concerns the NVMe drive alone.
ARCHS = {
    "arm64": {"qemu": "qemu-system-aarch64", "machine": "virt", "cpu_tcg": "cortex-a72", "console": "ttyAMA0",
              "blk": "virtio-blk-device", "kernel_meta": "linux-image-arm64", "host_arch": "aarch64",
              "boot_modules": ["virtio_mmio", "virtio_blk", "crc32c_generic", "crc32c", "ext4",
                               "crct10dif_common", "crct10dif_generic", "crc64", "crc64_rocksoft_generic",
                               "crc64_rocksoft", "crc_t10dif", "t10_pi", "nvme_core", "nvme"]},
    "x86_64": {"qemu": "qemu-system-x86_64", "machine": "q35", "cpu_tcg": "max", "console": "ttyS0",
               "blk": "virtio-blk-pci", "kernel_meta": "linux-image-amd64", "host_arch": "x86_64",
               "boot_modules": ["virtio_pci", "virtio_blk", "crc32c_generic", "crc32c", "crc32c_intel", "ext4",
                                "crct10dif_common", "crct10dif_generic", "crc64", "crc64_rocksoft_generic",
                                "crc64_rocksoft", "crc_t10dif", "t10_pi", "nvme_core", "nvme"]},
}
# Present only in some kernels (5.10 has no crc64_rocksoft; some are built in): no error when absent.
OPTIONAL_MODULES = {"crc32c_generic", "crc32c", "crc32c_intel", "crct10dif_common", "crct10dif_generic", "crc64",
                    "crc64_rocksoft_generic", "crc64_rocksoft", "crc_t10dif", "t10_pi", "virtio_mmio", "virtio_pci"}

Say = Callable[[str], None]
EXIT_RE = re.compile(r"PCB-GUEST-EXIT (\d+)")


class GuestRunError(RuntimeError):
    """QEMU could not start, the guest did not finish in time, or it gave no exit status."""


PR_SET_PDEATHSIG = 1
"""prctl(2) option (<linux/prctl.h>): the signal a child gets when its parent thread dies."""


def _die_with_parent() -> None:
    """In QEMU's process before exec: SIGKILL when the runner dies (prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def qemu_version(arch: str) -> str:
    """``QEMU emulator version X`` line of the architecture's QEMU (or 'unknown')."""
    try:
        out = subprocess.run([ARCHS[arch]["qemu"], "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"version (\S+)", out)
    return m.group(1) if m else "unknown"


def host_cpu() -> str | None:
    """The host CPU's model name from /proc/cpuinfo (None when it has none, as on some arm64)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def base_command(arch: str, accel: str, cpus: int, mem_mib: int) -> list[str]:
    """The QEMU command line shared by boots and device-tree dumps (machine, CPU, memory)."""
    a = ARCHS[arch]
    cpu = "host" if accel == "kvm" else a["cpu_tcg"]
    return [a["qemu"], "-machine", a["machine"], "-accel", accel, "-cpu", cpu, "-smp", str(cpus),
            "-m", f"{mem_mib}M", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot"]


def dump_dtb(arch: str, accel: str, cpus: int, mem_mib: int, dest: Path) -> None:
    """The device tree QEMU's ``virt`` machine would give this guest (``-machine virt,dumpdtb=``).

    Raises:
        GuestRunError: on an architecture without a device tree, or when QEMU fails.
    """
    if ARCHS[arch]["machine"] != "virt":
        raise GuestRunError(f"{arch} guests boot with ACPI, not a device tree")
    cmd = base_command(arch, accel, cpus, mem_mib)
    i = cmd.index("-machine") + 1
    cmd[i] = f"{cmd[i]},dumpdtb={dest}"
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or not dest.exists():
        raise GuestRunError(f"qemu dumpdtb failed: {proc.stderr.strip()[-300:]}")


def kvm_usable(arch: str) -> tuple[bool, str]:
    """Can this host run ``arch`` under KVM at all? (same architecture and /dev/kvm opens)."""
    if platform.machine() != ARCHS[arch]["host_arch"]:
        return False, f"the guest is {arch} and this host is {platform.machine()}: only TCG can run it"
    try:
        fd = os.open("/dev/kvm", os.O_RDWR)
        os.close(fd)
    except OSError as exc:
        return False, f"/dev/kvm does not open ({exc.strerror})"
    return True, "/dev/kvm opens"


def _kill_on_signals(proc) -> dict:
    """Make SIGINT, SIGTERM and SIGHUP kill ``proc`` (QEMU) and raise KeyboardInterrupt here, so
    that the caller's ``finally`` cleans up; returns the old handlers for :func:`_restore_signals`.
    Outside the main thread (where handlers cannot be set) nothing changes."""
    def stop(signum, _frame):
        proc.kill()
        raise KeyboardInterrupt(f"signal {signum}")

    old = {}
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            old[s] = signal.signal(s, stop)
        except ValueError:  # not the main thread
            pass
    return old


def _restore_signals(old: dict) -> None:
    """Put back the handlers :func:`_kill_on_signals` replaced."""
    for s, h in old.items():
        signal.signal(s, h)


def boot(cmd: list[str], timeout: float, console_log: Path, say: Say, ready_marker: str | None = None,
         ready_timeout: float | None = None, job_line: Say | None = None) -> dict:
    """Run QEMU (``cmd``) until it exits, bounded by ``timeout`` seconds; every console line goes to
    ``console_log``, lines the job prints (after "PCB-GUEST: job start") go to ``say`` as
    progress (non-empty lines not starting with "[", prefixed "guest: "), or with ``job_line``
    every one of them to ``job_line`` as it is. With ``ready_marker``, the boot fails early when
    the marker has not appeared within ``ready_timeout`` seconds (the accelerator probe). QEMU is killed on timeout, on any exception,
    on SIGINT/SIGTERM/SIGHUP reaching this process, and (PR_SET_PDEATHSIG) when this process dies.

    Returns: {"exit": guest job exit status or None, "seconds": wall time, "boot_seconds": time to
    the job start or None, "qemu_status": QEMU's own exit status, "timed_out": bool}.
    """
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=_die_with_parent)
    os.set_blocking(proc.stdout.fileno(), False)
    result = {"exit": None, "seconds": None, "boot_seconds": None, "qemu_status": None, "timed_out": False}
    job = False
    buf = b""
    old = _kill_on_signals(proc)
    try:
        with open(console_log, "ab") as log:
            while True:
                chunk = b""
                try:
                    chunk = proc.stdout.read() or b""
                except BlockingIOError:
                    pass
                if chunk:
                    log.write(chunk)
                    log.flush()
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for raw in lines:
                        line = raw.decode(errors="replace").rstrip("\r")
                        if "PCB-GUEST: job start" in line:
                            job, result["boot_seconds"] = True, round(time.monotonic() - start, 2)
                        elif "PCB-GUEST: job done" in line:
                            job = False
                        elif job and job_line is not None:
                            job_line(line)
                        elif job and line and not line.startswith("["):
                            say(f"guest: {line}")
                        m = EXIT_RE.search(line)
                        if m:
                            result["exit"] = int(m.group(1))
                        if ready_marker and ready_marker in line:
                            ready_marker = None
                if proc.poll() is not None and not chunk:
                    break
                elapsed = time.monotonic() - start
                if ready_marker and ready_timeout and elapsed > ready_timeout:
                    proc.kill()
                    result["timed_out"] = True
                    break
                if elapsed > timeout:
                    say(f"guest: no exit after {timeout:.0f} s: stopping QEMU")
                    proc.kill()
                    result["timed_out"] = True
                    break
                if not chunk:
                    time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _restore_signals(old)
    result["qemu_status"] = proc.returncode
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


def interactive_console() -> list[str]:
    """QEMU options that put the guest's serial console on this terminal, for a person: Ctrl-C
    and Ctrl-Z go to the guest (``signal=off``), Ctrl-A x stops QEMU and Ctrl-A c switches to its
    monitor (``mux=on`` with the monitor on the same character device)."""
    return ["-chardev", "stdio,id=pcbcon,mux=on,signal=off", "-serial", "chardev:pcbcon",
            "-mon", "chardev=pcbcon,mode=readline"]


def boot_interactive(cmd: list[str], timeout: float | None = None) -> dict:
    """Run QEMU (``cmd``, with :func:`interactive_console`) on this process's terminal until it
    exits (or ``timeout`` seconds, when given). QEMU is killed on SIGINT/SIGTERM/SIGHUP reaching
    this process (a closed terminal sends SIGHUP), on any exception and (PR_SET_PDEATHSIG) when
    this process dies; the terminal's settings are put back afterwards (QEMU sets it raw).

    Returns: {"exit": None (the job's status is not on this console), "seconds",
    "boot_seconds": None, "qemu_status", "timed_out"}.
    """
    saved = None
    try:
        saved = termios.tcgetattr(sys.stdin.fileno())
    except (termios.error, OSError, ValueError):
        pass
    start = time.monotonic()
    proc = subprocess.Popen(cmd, preexec_fn=_die_with_parent)
    result = {"exit": None, "seconds": None, "boot_seconds": None, "qemu_status": None, "timed_out": False}
    old = _kill_on_signals(proc)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        result["timed_out"] = True
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        _restore_signals(old)
        if saved is not None:
            try:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
            except (termios.error, OSError):
                pass
    result["qemu_status"] = proc.returncode
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


def accel_cache_key() -> str:
    """This boot of the host (a probe result holds until the next reboot)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def load_probe(path: Path) -> dict | None:
    """A cached accelerator probe for this host boot, or None."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("boot_id") == accel_cache_key() else None


def save_probe(path: Path, data: dict) -> None:
    """Keep an accelerator probe for the rest of this host boot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**data, "boot_id": accel_cache_key()}) + "\n")


def stderr_say(msg: str) -> None:
    """Default progress: one line on standard error."""
    print(f"[guest] {msg}", file=sys.stderr, flush=True)
