"""Guests: machines a lab boots itself with QEMU, for what the host cannot do (another
architecture, another kernel, an NVMe drive, a device tree with a PCIe ``dma-ranges`` window,
the function_graph tracer, blktrace).

One runner for every lab::

    spec = GuestSpec(arch="arm64", kernel_release="bullseye", dt="dma-ranges")
    info = run(spec, job_dir, out_dir, work_dir, nvme_image=img)   # job_dir/run is a POSIX sh script

``prepare`` assembles everything from Debian packages only and caches it under
``$PCB_GUEST_CACHE`` (default ``$XDG_CACHE_HOME/perf-casebook/guest``, else
``~/.cache/perf-casebook/guest``):

- ``kernels/<arch>/<package>_<version>/``: the kernel image and its whole module tree (from the
  release's ``linux-image-<flavour>`` meta package, downloaded with a private apt configuration),
  an ext4 image of the module tree, and initramfs files;
- ``rootfs/<arch>-<release>-<profile>-<hash>/``: an ext4 image of the guest's userspace
  (``mmdebstrap --variant=extract`` of the profile's packages: the guest architecture's own
  binaries, never the host's);
- ``index.json``: which entry serves (arch, release, profile) and (arch, kernel release), so a
  second run downloads and builds nothing (``refresh=True`` resolves the versions again).

``run`` boots QEMU with the root image (``snapshot=on``: the cache is never written), the job
as a tar on a disk, an empty disk for the job's ``/out`` (a tar written back by the guest), an
optional emulated NVMe drive, and on arm64 optionally a device tree: ``plain`` (QEMU's own tree,
dumped and recompiled with dtc) or ``dma-ranges`` (the same tree plus one ``dma-ranges``
property on the PCIe host bridge). It is bounded by a timeout and QEMU never outlives it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import debian, images, qemu
from .debian import GuestBuildError
from .qemu import ARCHS, GuestRunError, Say, stderr_say

__all__ = ["GuestSpec", "GuestBuildError", "GuestRunError", "PROFILES", "cache_dir", "prepare", "run", "accelerator"]

# Userspace profiles: Debian packages (the guest architecture's own) and what pulls them in.
PROFILES = {
    # The NVMe investigation's tools: dd with its throughput line (coreutils), strace, perf, blktrace/btt.
    # dash is the job's shell: busybox sh runs its own applets before PATH (busybox dd prints no
    # throughput line), dash runs the Debian programs.
    "tools": ["busybox-static", "dash", "coreutils", "grep", "strace", "linux-perf", "blktrace", "kmod"],
    # Everything the labs use, to run a whole lab inside the guest (labs/<lab>/run.sh --guest ARCH):
    # the guest's own gcc builds the labs' C programs, its python3 runs labkit's probe. libc-bin
    # carries the C.UTF-8 locale (asciinema refuses to record without a UTF-8 one).
    "lab": ["busybox-static", "dash", "bash", "libc-bin", "coreutils", "grep", "sed", "gawk", "findutils", "diffutils",
            "util-linux", "mount", "procps", "psmisc", "kmod", "e2fsprogs", "xfsprogs", "tar", "gzip",
            "gcc", "make", "libc6-dev", "python3", "python3-jsonschema", "git",
            "fio", "linux-perf", "strace", "sysstat", "auditd", "iproute2", "blktrace", "trace-cmd",
            "sockperf", "sysbench", "bpftrace", "hwloc-nox", "asciinema", "gdb", "cscope", "numactl",
            "python3-numpy", "python3-matplotlib",   # labkit's heat map (optane_kyber's heat group)
            "python3-scipy"],                          # labkit's claims (bootstrap intervals) at record time
}

# The PCIe host bridge of QEMU's arm64 virt machine, and the window the NVMe investigation's fix
# was about: PCI memory space (0x02000000), bus address 0x40000000 -> CPU address 0x40000000,
# size 1 GiB: the lower GiB of RAM (which starts at 0x40000000 on virt). RAM above it is out of
# the device's reach, and the kernel bounces I/O to buffers there through swiotlb. A 512 MiB
# window leaves the swiotlb pool itself outside (the nvme driver then warns and hangs).
PCIE_NODE = "pcie@10000000"
DMA_WINDOW = "0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x40000000"


@dataclass
class GuestSpec:
    """What to boot. ``kernel_release``: the Debian release whose kernel meta package picks the
    kernel (bookworm: 6.1, bullseye: 5.10). ``dt``: None (QEMU's built-in tree or ACPI), "plain"
    or "dma-ranges" (arm64 only). ``append``: extra kernel command line (e.g. ``swiotlb=force``).
    ``mem_mib``/``cpus``: guest RAM and vCPUs; ``accel``: "auto" (KVM when a bounded probe boot
    works, else TCG), "kvm" or "tcg"."""
    arch: str = "arm64"
    release: str = "bookworm"
    kernel_release: str = "bookworm"
    profile: str = "tools"
    cpus: int = 2
    mem_mib: int = 2048
    dt: str | None = None
    append: str = ""
    accel: str = "auto"
    extra_packages: list[str] = field(default_factory=list)

    def check(self) -> None:
        """Raises ValueError on an unknown architecture, profile or device tree."""
        if self.arch not in ARCHS:
            raise ValueError(f"unknown guest architecture {self.arch!r} (one of {sorted(ARCHS)})")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown guest profile {self.profile!r} (one of {sorted(PROFILES)})")
        if self.dt not in (None, "plain", "dma-ranges"):
            raise ValueError(f"unknown device tree {self.dt!r} (plain or dma-ranges)")
        if self.dt and ARCHS[self.arch]["machine"] != "virt":
            raise ValueError(f"a device tree needs an arm64 guest ({self.arch} boots with ACPI)")
        if self.accel not in ("auto", "kvm", "tcg"):
            raise ValueError(f"unknown accelerator {self.accel!r} (auto, kvm or tcg)")


def cache_dir() -> Path:
    """Where guests are cached (see the module docstring)."""
    if os.environ.get("PCB_GUEST_CACHE"):
        return Path(os.environ["PCB_GUEST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "perf-casebook" / "guest"


@contextmanager
def _locked(cache: Path):
    """One builder at a time per cache (two labs starting at once share the downloads)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _index(cache: Path) -> dict:
    return debian.read_manifest(cache / "index.json") or {}


def _set_index(cache: Path, key: str, value: str) -> None:
    idx = _index(cache)
    idx[key] = value
    debian.write_manifest(cache / "index.json", idx)


def _kernel(spec: GuestSpec, cache: Path, say: Say, refresh: bool) -> Path:
    key = f"kernel/{spec.arch}/{spec.kernel_release}"
    entry = _index(cache).get(key)
    if entry and not refresh and debian.read_manifest(cache / entry / "manifest.json"):
        return cache / entry
    apt = debian.PrivateApt(cache / "apt" / f"{spec.arch}-{spec.kernel_release}", spec.arch, spec.kernel_release)
    say(f"resolving the kernel of Debian {spec.kernel_release} ({spec.arch}): apt-get update")
    apt.update()
    pkg, version = debian.resolve_kernel(apt, ARCHS[spec.arch]["kernel_meta"])
    rel = f"kernels/{spec.arch}/{pkg}_{version}"
    d = cache / rel
    if not debian.read_manifest(d / "manifest.json"):
        shutil.rmtree(d, ignore_errors=True)
        say(f"downloading {pkg} {version}")
        deb = apt.download(pkg, d / "deb")
        say(f"unpacking {deb.name}")
        info = debian.unpack_kernel(deb, d / "tree")
        shutil.rmtree(d / "deb")
        say("ext4 image of the module tree")
        images.ext4_image(Path(info["modules"]), d / "modules.img", "pcbmods", slack_mib=16)
        debian.write_manifest(d / "manifest.json", {"package": pkg, "version": version, "arch": spec.arch,
                                                    "debian_release": spec.kernel_release, **info,
                                                    "vmlinuz": str(Path(info["vmlinuz"]).relative_to(d)),
                                                    "modules": str(Path(info["modules"]).relative_to(d)),
                                                    "config": str(Path(info["config"]).relative_to(d))})
    _set_index(cache, key, rel)
    return d


# Links that packages' maintainer scripts (update-alternatives, dash's postinst) would make and
# that --variant=extract, which runs none, leaves out: (link, targets): the first target that
# exists. Bump ROOTFS_RECIPE when this changes, so cached images are rebuilt.
# {lib}: the architecture's multiarch library directory. BLAS and LAPACK for numpy come from
# whichever provider apt chose (OpenBLAS or the reference libblas3/liblapack3), each of which
# registers libblas.so.3/liblapack.so.3 with update-alternatives.
MAINTAINER_LINKS = [("bin/sh", ["dash"]), ("usr/bin/awk", ["gawk"]), ("usr/bin/cc", ["gcc"]),
                    ("{lib}/libblas.so.3", ["openblas-pthread/libblas.so.3", "blas/libblas.so.3"]),
                    ("{lib}/liblapack.so.3", ["openblas-pthread/liblapack.so.3", "lapack/liblapack.so.3"]),
                    ("{lib}/libopenblas.so.0", ["openblas-pthread/libopenblas.so.0"])]
ROOTFS_RECIPE = 5
MULTIARCH = {"arm64": "usr/lib/aarch64-linux-gnu", "x86_64": "usr/lib/x86_64-linux-gnu"}


def _maintainer_links(root: Path, arch: str) -> None:
    """Make :data:`MAINTAINER_LINKS` in the unpacked root ``root`` of a guest of ``arch``."""
    for link, targets in MAINTAINER_LINKS:
        path = root / link.format(lib=MULTIARCH[arch])
        if path.exists() or path.is_symlink():
            continue
        target = next((t for t in targets if (path.parent / t).exists()), None)
        if target:
            path.symlink_to(target)


def _rootfs(spec: GuestSpec, cache: Path, say: Say, refresh: bool) -> Path:
    packages = sorted(set(PROFILES[spec.profile]) | set(spec.extra_packages))
    key = f"rootfs/{spec.arch}/{spec.release}/{spec.profile}/r{ROOTFS_RECIPE}/{','.join(packages)}"
    entry = _index(cache).get(key)
    if entry and not refresh and debian.read_manifest(cache / entry / "manifest.json"):
        return cache / entry
    tmp = cache / "rootfs" / f".build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        versions = debian.mmdebstrap_rootfs(spec.arch, spec.release, packages, tmp / "root", say)
        digest = hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:12]
        rel = f"rootfs/{spec.arch}-{spec.release}-{spec.profile}-{digest}-r{ROOTFS_RECIPE}"
        d = cache / rel
        if not debian.read_manifest(d / "manifest.json"):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            root = tmp / "root"
            for sub in ("proc", "sys", "dev", "tmp", "job", "out", "root", "run", "mnt"):
                (root / sub).mkdir(exist_ok=True)
            os.chmod(root / "tmp", 0o1777)
            _maintainer_links(root, spec.arch)
            busybox = root / "bin" / "busybox"
            if not busybox.exists():
                raise GuestBuildError("the guest userspace has no /bin/busybox (busybox-static)")
            shutil.copy2(busybox, d / "busybox")
            say(f"ext4 image of the guest userspace ({len(versions)} packages)")
            images.ext4_image(root, d / "rootfs.img", "pcbroot")
            debian.write_manifest(d / "manifest.json", {"arch": spec.arch, "debian_release": spec.release,
                                                        "profile": spec.profile, "include": packages,
                                                        "packages": versions})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _set_index(cache, key, rel)
    return d


def prepare(spec: GuestSpec, say: Say = stderr_say, refresh: bool = False) -> dict:
    """Make (or find in the cache) everything ``spec`` boots from.

    Returns {"kernel": kernel manifest, "kernel_dir", "vmlinuz", "initrd", "modules_img",
    "rootfs_img", "rootfs": rootfs manifest, "built": seconds spent building (0 when all cached)}.

    Raises:
        GuestBuildError: a package that cannot be resolved, downloaded or unpacked.
        ValueError: a bad spec.
    """
    spec.check()
    cache = cache_dir()
    t0 = time.monotonic()
    with _locked(cache):
        kdir = _kernel(spec, cache, say, refresh)
        rdir = _rootfs(spec, cache, say, refresh)
        kman = debian.read_manifest(kdir / "manifest.json")
        rman = debian.read_manifest(rdir / "manifest.json")
        # Named by what goes in (the init script, the module list, the busybox), so a change rebuilds it.
        recipe = hashlib.sha256((images.INIT + repr(ARCHS[spec.arch]["boot_modules"]) + rdir.name).encode()).hexdigest()[:12]
        initrd = kdir / f"initrd-{recipe}.img"
        if not initrd.exists():
            say(f"initramfs for {kman['release']}: busybox and the boot modules")
            tmp = initrd.with_suffix(".tmp")
            images.build_initramfs(rdir / "busybox", kdir / kman["modules"], ARCHS[spec.arch]["boot_modules"],
                                   qemu.OPTIONAL_MODULES, tmp)
            os.replace(tmp, initrd)
    return {"kernel": kman, "kernel_dir": str(kdir), "vmlinuz": str(kdir / kman["vmlinuz"]), "initrd": str(initrd),
            "modules_img": str(kdir / "modules.img"), "rootfs_img": str(rdir / "rootfs.img"), "rootfs": rman,
            "built": round(time.monotonic() - t0, 1)}


def _drive(arch: str, path: Path, serial: str, readonly: bool = False, snapshot: bool = False) -> list[str]:
    opts = f"file={path},if=none,id={serial},format=raw"
    if readonly:
        opts += ",readonly=on"
    if snapshot:
        opts += ",snapshot=on"
    return ["-drive", opts, "-device", f"{ARCHS[arch]['blk']},drive={serial},serial={serial}"]


def _accel(spec: GuestSpec, prep: dict, work: Path, say: Say) -> tuple[str, str]:
    if spec.accel != "auto":
        return spec.accel, f"asked for {spec.accel}"
    ok, why = qemu.kvm_usable(spec.arch)
    if not ok:
        return "tcg", why
    cached = qemu.load_probe(cache_dir() / f"accel-{spec.arch}.json")
    if cached:
        return cached["accel"], cached["reason"] + " (probed earlier on this boot)"
    say("probing KVM with a bounded boot (falls back to TCG)")
    job = work / "probe-job"
    job.mkdir(parents=True, exist_ok=True)
    (job / "run").write_text("echo kvm-probe-ok\n")
    res = _boot(spec, prep, job, work / "probe-out", work / "probe", "kvm", None, 40, lambda m: None, probe=True)
    if res["exit"] == 0:
        accel, reason = "kvm", f"a KVM probe boot finished in {res['seconds']:.1f} s"
    else:
        accel, reason = "tcg", "a KVM probe boot did not finish within 40 s (e.g. it hangs at 'Booting from ROM')"
    qemu.save_probe(cache_dir() / f"accel-{spec.arch}.json", {"accel": accel, "reason": reason})
    return accel, reason


def accelerator(spec: GuestSpec, work_dir: Path | str, say: Say = stderr_say) -> tuple[str, str]:
    """(accelerator, reason) that :func:`run` would use for ``spec`` on this host: "tcg" at once
    for a foreign architecture, else the result of the cached or a new bounded KVM probe boot."""
    spec.check()
    if spec.accel != "auto" or not qemu.kvm_usable(spec.arch)[0]:
        return _accel(spec, {}, Path(work_dir), say)
    return _accel(spec, prepare(spec, say), Path(work_dir), say)


def _boot(spec: GuestSpec, prep: dict, job_dir: Path, out_dir: Path, work: Path, accel: str, nvme_image: Path | None,
          timeout: float, say: Say, out_mib: int = 256, probe: bool = False, scratch_mib: int = 0) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    job_tar, out_img = work / "job.tar", work / "out.img"
    with tarfile.open(job_tar, "w", format=tarfile.USTAR_FORMAT) as tar:
        for p in sorted(Path(job_dir).rglob("*")):
            tar.add(p, arcname=str(p.relative_to(job_dir)), recursive=False)
    with open(out_img, "wb") as f:
        f.truncate(out_mib * 1024 * 1024)
    a = ARCHS[spec.arch]
    cmd = qemu.base_command(spec.arch, accel, spec.cpus, spec.mem_mib)
    cmd += ["-kernel", prep["vmlinuz"], "-initrd", prep["initrd"],
            "-append", f"console={a['console']} panic=-1 quiet loglevel=3 rdinit=/init {spec.append}".strip(),
            "-serial", "stdio"]
    if spec.dt:
        dtb = work / f"{spec.dt}.dtb"
        if not dtb.exists():
            raw = work / "qemu.dtb"
            qemu.dump_dtb(spec.arch, accel, spec.cpus, spec.mem_mib, raw)
            dts = images.dtb_to_dts(raw)
            if spec.dt == "dma-ranges":
                dts = images.add_dma_ranges(dts, PCIE_NODE, DMA_WINDOW)
            images.dts_to_dtb(dts, dtb)
        cmd += ["-dtb", str(dtb)]
    cmd += _drive(spec.arch, Path(prep["rootfs_img"]), "pcbroot", snapshot=True)
    cmd += _drive(spec.arch, Path(prep["modules_img"]), "pcbmods", readonly=True)
    cmd += _drive(spec.arch, job_tar, "pcbjob", readonly=True)
    cmd += _drive(spec.arch, out_img, "pcbout")
    if scratch_mib:
        # An empty disk of the guest's own for scratch (sparse here: only what the guest writes uses
        # space); the job finds it as $PCB_SCRATCH_DEV and puts a file system on it.
        scratch = work / "scratch.img"
        with open(scratch, "wb") as f:
            f.truncate(scratch_mib * 1024 * 1024)
        cmd += _drive(spec.arch, scratch, "pcbscratch")
    if nvme_image is not None:
        cmd += ["-drive", f"file={nvme_image},if=none,id=nvm,format=raw", "-device", "nvme,drive=nvm,serial=pcbnvme"]
    (work / "qemu.cmd").write_text(" ".join(cmd) + "\n")
    res = qemu.boot(cmd, timeout, work / "console.log", say,
                    ready_marker="PCB-GUEST-EXIT" if probe else None, ready_timeout=timeout if probe else None)
    if res["exit"] is not None:
        proc = subprocess.run(["tar", "-xf", str(out_img), "-C", str(out_dir)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise GuestRunError(f"the guest's /out could not be read back: {proc.stderr.strip()[-200:]}")
    out_img.unlink(missing_ok=True)
    job_tar.unlink(missing_ok=True)
    (work / "scratch.img").unlink(missing_ok=True)
    return res


def run(spec: GuestSpec, job_dir: Path | str, out_dir: Path | str, work_dir: Path | str, *,
        nvme_image: Path | str | None = None, timeout: float = 600, say: Say = stderr_say,
        out_mib: int = 256, refresh: bool = False, host_label: str | None = None, scratch_mib: int = 0) -> dict:
    """Boot ``spec``, run ``job_dir/run`` (POSIX sh, as root, cwd /job, ``$PCB_OUT`` = /out) and
    bring ``/out`` back into ``out_dir``. ``work_dir`` (in the lab's scratch) holds the per-run
    disks, the device tree and ``console.log``; ``nvme_image``: a raw file the guest sees as an NVMe
    drive (/dev/nvme0n1); ``scratch_mib``: an empty disk of that size for the job's scratch
    (``$PCB_SCRATCH_DEV`` in the guest). Also writes ``out_dir/guest.json`` (the returned dict), and
    ``job_dir/emulation.json`` (the ``host.emulation`` record of results made in the guest:
    labkit's probe reads it through ``$PCB_EMULATION_FILE``; ``host_label`` names this host).

    Returns: {"arch", "machine", "cpu", "cpus", "mem_mib", "accelerator", "accel_reason",
    "qemu_version", "host_arch", "host_cpu", "kernel_package", "kernel_version", "kernel_release",
    "userspace_release", "profile", "packages", "dt", "append", "exit", "boot_seconds", "seconds",
    "prepare_seconds"}; "exit" is the job's exit status.

    Raises:
        GuestBuildError, GuestRunError: assembling failed, or the guest gave no exit status
        (timeout, QEMU error): the message names the console log.
    """
    spec.check()
    work, out_dir = Path(work_dir), Path(out_dir)
    work.mkdir(parents=True, exist_ok=True)
    prep = prepare(spec, say, refresh)
    accel, reason = _accel(spec, prep, work, say)
    emu = {"emulator": f"QEMU {qemu.qemu_version(spec.arch)} ({ARCHS[spec.arch]['qemu']})", "accelerator": accel,
           "machine": ARCHS[spec.arch]["machine"], "guest_cpu": "host" if accel == "kvm" else ARCHS[spec.arch]["cpu_tcg"],
           "host_arch": platform.machine(), "host_cpu": qemu.host_cpu(), "host_label": host_label}
    (Path(job_dir) / "emulation.json").write_text(json.dumps(emu) + "\n")
    say(f"booting {spec.arch} ({accel}) kernel {prep['kernel']['release']}"
        + (f", device tree {spec.dt}" if spec.dt else "") + (f", append '{spec.append}'" if spec.append else ""))
    res = _boot(spec, prep, Path(job_dir), out_dir, work, accel, Path(nvme_image) if nvme_image else None, timeout,
                say, out_mib, scratch_mib=scratch_mib)
    info = {"arch": spec.arch, "machine": ARCHS[spec.arch]["machine"],
            "cpu": "host" if accel == "kvm" else ARCHS[spec.arch]["cpu_tcg"], "cpus": spec.cpus,
            "mem_mib": spec.mem_mib, "accelerator": accel, "accel_reason": reason,
            "qemu_version": qemu.qemu_version(spec.arch), "host_arch": platform.machine(), "host_cpu": qemu.host_cpu(),
            "kernel_package": prep["kernel"]["package"], "kernel_version": prep["kernel"]["version"],
            "kernel_release": prep["kernel"]["release"], "userspace_release": spec.release, "profile": spec.profile,
            "packages": prep["rootfs"]["packages"], "dt": spec.dt,
            "dma_ranges": DMA_WINDOW if spec.dt == "dma-ranges" else None, "append": spec.append,
            "exit": res["exit"], "boot_seconds": res["boot_seconds"], "seconds": res["seconds"],
            "prepare_seconds": prep["built"], "timed_out": res["timed_out"]}
    (out_dir / "guest.json").write_text(json.dumps(info, indent=1) + "\n")
    if res["exit"] is None:
        raise GuestRunError(f"the guest gave no exit status ({'timed out after %.0f s' % timeout if res['timed_out'] else 'QEMU exited %s' % res['qemu_status']}); "
                            f"console: {work / 'console.log'}")
    return info
