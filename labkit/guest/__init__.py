"""Guests: machines a lab boots itself with QEMU, for what the host cannot do (another
architecture, another kernel, an NVMe drive, a device tree with a PCIe ``dma-ranges`` window,
the function_graph tracer, blktrace).

One runner for every lab::

    spec = GuestSpec(arch="arm64", kernel_release="bullseye", dt="dma-ranges")
    info = run(spec, Boot(job_dir, out_dir, work_dir, nvme_image=img))   # job_dir/run is a POSIX sh script

``prepare`` assembles everything from Debian packages only and caches it under
``$PCB_GUEST_CACHE`` (default ``$XDG_CACHE_HOME/perf-casebook/guest``, else
``~/.cache/perf-casebook/guest``; under ``sudo``, the invoking user's ``~``):

- ``kernels/<arch>/<package>_<version>/``: the kernel image and its whole module tree (from the
  release's ``linux-image-<flavour>`` meta package, downloaded with a private apt configuration),
  an ext4 image of the module tree, and initramfs files;
- ``rootfs/<arch>-<release>-<profile>-<hash>/``: an ext4 image of the guest's userspace
  (``mmdebstrap --variant=extract`` of the profile's packages: the guest architecture's own
  binaries, never the host's);
- ``index.json``: which entry serves (arch, release, profile) and (arch, kernel release), so a
  second run downloads and builds nothing (``refresh=True`` resolves the versions again).

A kernel the reader has (``GuestSpec.kernel``: a ``linux-image-*.deb``, or an image with its
modules folder) is kept under ``kernels/<arch>/local-<fingerprint>/`` instead (:mod:`.local`).
:func:`cache_usage` measures the cache, :func:`prune_cache` removes it.

``run`` boots QEMU with the root image (``snapshot=on``: the cache is never written), the job
as a tar on a disk, an empty disk for the job's ``/out`` (a tar written back by the guest), an
optional emulated NVMe drive, and on arm64 optionally a device tree: ``plain`` (QEMU's own tree,
dumped and recompiled with dtc), ``dma-ranges`` (the same tree plus one ``dma-ranges``
property on the PCIe host bridge), ``wide`` (that window widened to cover all RAM: the NVMe
investigation's fix), or any compiled tree (``GuestSpec.dtb``); ``guest.json``
records which (name, sha256, the bridge's ``dma-ranges`` as booted). It is bounded by a timeout
and QEMU never outlives it.

For a person rather than a lab: :func:`run_command` writes the job for one command (tracefs and
debugfs mounted, its output printed as it comes, its exit status returned) and :func:`shell`
puts an interactive shell on the guest's console on this terminal; both attach a sparse scratch
NVMe drive when given none, and remove every file they made on return, error or interrupt.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import json
import os
import platform
import pwd
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from . import command, debian, images, local, qemu
from .debian import GuestBuildError
from .qemu import ARCHS, GuestRunError, Say, stderr_say

__all__ = ["GuestSpec", "GuestBuildError", "GuestRunError", "CacheBusyError", "PROFILES", "cache_dir", "prepare",
           "run", "run_command", "shell", "accelerator", "cache_usage", "prune_cache", "human_size"]

# Userspace profiles: Debian packages (the guest architecture's own) and what pulls them in.
PROFILES = {
    # The NVMe investigation's tools: dd with its throughput line (coreutils), strace, perf, blktrace/btt.
    # dash starts the job (busybox sh runs its own applets before PATH, and busybox dd prints no
    # throughput line; dash runs the Debian programs); bash runs the step language (step.sh).
    "tools": ["busybox-static", "dash", "bash", "coreutils", "grep", "strace", "linux-perf", "blktrace", "kmod"],
    # Everything the labs use, to run a whole lab inside the guest (labs/<lab>/run.sh --guest ARCH):
    # the guest's own gcc builds the labs' C programs, its python3 runs labkit's probe. libc-bin
    # carries the C.UTF-8 locale (asciinema refuses to record without a UTF-8 one).
    "lab": ["busybox-static", "dash", "bash", "libc-bin", "coreutils", "grep", "sed", "gawk", "findutils", "diffutils",
            "util-linux", "mount", "procps", "psmisc", "kmod", "e2fsprogs", "xfsprogs", "tar", "gzip",
            "gcc", "make", "libc6-dev", "python3", "python3-jsonschema", "git",
            "fio", "linux-perf", "strace", "sysstat", "auditd", "iproute2", "blktrace", "trace-cmd",
            "sockperf", "sysbench", "bpftrace", "hwloc-nox", "asciinema", "gdb", "cscope", "numactl",
            "python3-numpy", "python3-matplotlib",   # labkit's heat map (optane_kyber's heat group)
            "python3-scipy"],                          # labkit's claims (t quantiles) at record time
}

# The PCIe host bridge of QEMU's arm64 virt machine, and the window the NVMe investigation's fix
# was about: PCI memory space (0x02000000), bus address 0x40000000 -> CPU address 0x40000000,
# size 1 GiB: the lower GiB of RAM (which starts at 0x40000000 on virt). RAM above it is out of
# the device's reach, and the kernel bounces I/O to buffers there through swiotlb. A 512 MiB
# window leaves the swiotlb pool itself outside (the nvme driver then warns and hangs).
PCIE_NODE = "pcie@10000000"
PCIE_PATH = "/" + PCIE_NODE   # its path in QEMU virt's tree (a child of the root)
DMA_WINDOW = "0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x40000000"
DEVICE_TREES = ("plain", "dma-ranges", "wide")
"""The ``--dt`` names: QEMU's own tree, it with the 1 GiB window, and the window widened to all RAM."""


def wide_window(mem_mib: int) -> str:
    """The ``dma-ranges`` cells of :data:`DMA_WINDOW` widened to the end of a virt machine's RAM
    (``mem_mib`` MiB from 0x40000000): the same window ``labs/nvme_swiotlb/dt_widen.py`` writes,
    PCI and CPU addresses kept, the size raised to cover all of RAM."""
    size = mem_mib * 1024 * 1024
    return f"0x2000000 0x00 0x40000000 0x00 0x40000000 0x{size >> 32:02x} 0x{size & 0xFFFFFFFF:02x}"

# What an interactive shell adds to the profile's packages: bash (line editing, history; the
# profiles' dash has neither, and busybox sh runs its own applets before the Debian programs) and
# the terminfo entries of common terminals.
SHELL_PACKAGES = ["bash", "ncurses-base"]
# The sparse NVMe image run_command and shell attach when given none: as large as the reads of the
# NVMe investigation (512 MiB), using no disk space until the guest writes to it.
SCRATCH_NVME_MIB = 512


class CacheBusyError(RuntimeError):
    """The cache is locked by a build in progress (another labkit.guest holds its lock)."""


@dataclass
class GuestSpec:
    """What to boot. ``kernel_release``: the Debian release whose kernel meta package picks the
    kernel (bookworm: 6.1, bullseye: 5.10). ``kernel``: instead, a kernel the reader has (a
    ``linux-image-*.deb``, an image file with ``modules``, or a folder holding both: see
    :mod:`.local`). ``dt``: None (QEMU's built-in tree or ACPI), "plain", "dma-ranges" or "wide"
    (arm64 only; :data:`DEVICE_TREES`); ``dtb``: instead, the path of a compiled device tree to
    boot as it is. ``append``:
    extra kernel command line (e.g. ``swiotlb=force``). ``mem_mib``/``cpus``: guest RAM and vCPUs;
    ``accel``: "auto" (KVM when a bounded probe boot works, else TCG), "kvm" or "tcg"."""
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
    kernel: str | None = None
    modules: str | None = None
    dtb: str | None = None

    def check(self) -> None:
        """Raises ValueError on an unknown architecture, profile, accelerator or device tree, on
        both ``dt`` and ``dtb``, on a ``dtb`` that is missing or not a compiled device tree, and on
        a ``kernel`` that is missing, incomplete or built for another architecture."""
        if self.arch not in ARCHS:
            raise ValueError(f"unknown guest architecture {self.arch!r} (one of {sorted(ARCHS)})")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown guest profile {self.profile!r} (one of {sorted(PROFILES)})")
        if self.dt is not None and self.dt not in DEVICE_TREES:
            raise ValueError(f"unknown device tree {self.dt!r} (plain, dma-ranges or wide)")
        if self.dt and self.dtb:
            raise ValueError("--dt and --dtb both name the device tree: give one")
        if (self.dt or self.dtb) and ARCHS[self.arch]["machine"] != "virt":
            raise ValueError(f"a device tree needs an arm64 guest ({self.arch} boots with ACPI)")
        if self.dtb:
            p = Path(self.dtb)
            if not p.is_file():
                raise ValueError(f"--dtb {self.dtb}: no such file")
            if not images.is_dtb(p):
                raise ValueError(f"--dtb {self.dtb}: not a compiled device tree (no 0xd00dfeed magic; dtc -O dtb makes one)")
        if self.accel not in ("auto", "kvm", "tcg"):
            raise ValueError(f"unknown accelerator {self.accel!r} (auto, kvm or tcg)")
        if self.modules and not self.kernel:
            raise ValueError("--modules goes with --kernel (an image and its modules folder)")
        if self.kernel:
            local.check_arch(local.locate(self.kernel, self.modules), self.arch)


def sudo_owner() -> tuple[str, int, int] | None:
    """(home, uid, gid) of the user who ran ``sudo``, when this process is root under sudo for
    another user; else None. sudo sets SUDO_USER and (by default, ``env_reset``) HOME to root's."""
    name = os.environ.get("SUDO_USER")
    if os.geteuid() != 0 or not name or name == "root":
        return None
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None
    return pw.pw_dir, pw.pw_uid, pw.pw_gid


def cache_dir() -> Path:
    """Where guests are cached (see the module docstring). Under ``sudo`` the default is the
    invoking user's cache, not root's, so that a lab run with sudo and a later ``labkit guest
    shell`` without it share one download (:func:`give_back` hands what root made to that user)."""
    if os.environ.get("PCB_GUEST_CACHE"):
        return Path(os.environ["PCB_GUEST_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "perf-casebook" / "guest"
    owner = sudo_owner()
    home = owner[0] if owner else os.path.expanduser("~")
    return Path(home) / ".cache" / "perf-casebook" / "guest"


def give_back(cache: Path) -> None:
    """Root under sudo, with the cache inside the invoking user's home: make that user the owner
    of every entry root created there (and of the ``.cache`` folders on the way), so that the
    user's own runs can read, lock and prune it. Nothing otherwise. An entry that cannot be
    changed is left as it is (no error)."""
    owner = sudo_owner()
    if owner is None:
        return
    home, uid, gid = owner
    try:
        cache.resolve().relative_to(Path(home).resolve())
    except ValueError:
        return
    def own(path: str) -> None:
        try:
            if os.lstat(path).st_uid == 0:
                os.lchown(path, uid, gid)
        except OSError:
            pass
    parent = cache
    while parent != Path(home) and Path(home) in parent.parents:
        own(str(parent))
        parent = parent.parent
    for top, dirs, files in os.walk(cache):
        for name in (*dirs, *files):
            own(os.path.join(top, name))


@contextmanager
def _locked(cache: Path):
    """One builder at a time per cache (two labs starting at once share the downloads)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            give_back(cache)
            fcntl.flock(fh, fcntl.LOCK_UN)


def _index(cache: Path) -> dict:
    return debian.read_manifest(cache / "index.json") or {}


def _set_index(cache: Path, key: str, value: str) -> None:
    idx = _index(cache)
    idx[key] = value
    debian.write_manifest(cache / "index.json", idx)


def _local_kernel(spec: GuestSpec, cache: Path, say: Say, made: list[str]) -> Path:
    lk = local.locate(spec.kernel, spec.modules)
    digest = local.fingerprint(lk)
    d = cache / "kernels" / spec.arch / f"local-{digest[:16]}"
    if not debian.read_manifest(d / "manifest.json"):
        say(f"kernel from {lk.source}")
        local.build(lk, spec.arch, d, say, digest=digest)
        made.append(str(d.relative_to(cache)))
    return d


def _kernel(spec: GuestSpec, cache: Path, say: Say, refresh: bool, made: list[str]) -> Path:
    if spec.kernel:
        return _local_kernel(spec, cache, say, made)
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
        made.append(rel)
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


def _rootfs(spec: GuestSpec, cache: Path, say: Say, refresh: bool, made: list[str]) -> Path:
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
            made.append(rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    _set_index(cache, key, rel)
    return d


def prepare(spec: GuestSpec, say: Say = stderr_say, refresh: bool = False) -> dict:
    """Make (or find in the cache) everything ``spec`` boots from.

    Returns {"kernel": kernel manifest, "kernel_dir", "vmlinuz", "initrd", "modules_img",
    "rootfs_img", "rootfs": rootfs manifest, "built": seconds spent (about 0 when all cached),
    "new": the cache entries this call made (paths relative to the cache; [] when all cached)}.

    Raises:
        GuestBuildError: a package that cannot be resolved, downloaded or unpacked.
        ValueError: a bad spec.
    """
    spec.check()
    cache = cache_dir()
    t0 = time.monotonic()
    made: list[str] = []
    with _locked(cache):
        kdir = _kernel(spec, cache, say, refresh, made)
        rdir = _rootfs(spec, cache, say, refresh, made)
        kman = debian.read_manifest(kdir / "manifest.json")
        rman = debian.read_manifest(rdir / "manifest.json")
        # Named by what goes in (the init script, the module list, the busybox), so a change rebuilds it.
        recipe = hashlib.sha256((images.INIT + repr(ARCHS[spec.arch]["boot_modules"]) + rdir.name).encode()).hexdigest()[:12]
        initrd = kdir / f"initrd-{recipe}.img"
        if not initrd.exists():
            say(f"initramfs for {kman['release']}: busybox and the boot modules")
            tmp = initrd.with_suffix(".tmp")
            optional = set(qemu.OPTIONAL_MODULES)
            if not (kdir / kman["modules"] / "modules.builtin").exists():
                # A module tree that does not list its built-ins (a reader's own build): a boot
                # module it lacks may be built in, and init then names what did not load.
                optional |= set(ARCHS[spec.arch]["boot_modules"])
            images.build_initramfs(rdir / "busybox", kdir / kman["modules"], ARCHS[spec.arch]["boot_modules"],
                                   optional, tmp)
            os.replace(tmp, initrd)
            made.append(str(initrd.relative_to(cache)))
    return {"kernel": kman, "kernel_dir": str(kdir), "vmlinuz": str(kdir / kman["vmlinuz"]), "initrd": str(initrd),
            "modules_img": str(kdir / "modules.img"), "rootfs_img": str(rdir / "rootfs.img"), "rootfs": rman,
            "built": round(time.monotonic() - t0, 1), "new": made}


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
    res = boot_prepared(spec, prep, Boot(job, work / "probe-out", work / "probe", "kvm", timeout=40, probe=True), lambda m: None)
    if res["exit"] == 0:
        accel, reason = "kvm", f"a KVM probe boot finished in {res['seconds']:.1f} s"
    else:
        accel, reason = "tcg", "a KVM probe boot did not finish within 40 s (e.g. it hangs at 'Booting from ROM')"
    qemu.save_probe(cache_dir() / f"accel-{spec.arch}.json", {"accel": accel, "reason": reason})
    give_back(cache_dir())
    return accel, reason


def accelerator(spec: GuestSpec, work_dir: Path | str, say: Say = stderr_say) -> tuple[str, str]:
    """(accelerator, reason) that :func:`run` would use for ``spec`` on this host: "tcg" at once
    for a foreign architecture, else the result of the cached or a new bounded KVM probe boot."""
    spec.check()
    if spec.accel != "auto" or not qemu.kvm_usable(spec.arch)[0]:
        return _accel(spec, {}, Path(work_dir), say)
    return _accel(spec, prepare(spec, say), Path(work_dir), say)


def device_tree(spec: GuestSpec, work: Path, accel: str) -> tuple[Path | None, dict | None]:
    """The compiled tree to boot and its record: {"name" (the --dt name, or the --dtb file's name),
    "origin" ("built": made here from QEMU's own; "work-dir": a tree of that name already in the work
    directory, booted as it is; "file": --dtb), "path", "sha256", "pcie_dma_ranges" (the cells of
    the PCIe host bridge's dma-ranges in that tree, None when it has none)}; (None, None) without
    a device tree. A tree built here is written to ``work``.

    Raises:
        GuestRunError: QEMU could not dump its own tree (:func:`labkit.guest.qemu.dump_dtb`);
        GuestBuildError: dtc, fdtput or fdtget failed or is missing, or the tree has no PCIe host bridge.
    """
    if spec.dtb:
        dtb, name, origin = Path(spec.dtb).resolve(), Path(spec.dtb).name, "file"
    elif spec.dt:
        dtb, name, origin = work / f"{spec.dt}.dtb", spec.dt, "work-dir"
        if not dtb.exists():
            origin = "built"
            raw = work / "qemu.dtb"
            qemu.dump_dtb(spec.arch, accel, spec.cpus, spec.mem_mib, raw)
            if spec.dt == "plain":
                images.recompile_dtb(raw, dtb)
            else:
                cells = DMA_WINDOW if spec.dt == "dma-ranges" else wide_window(spec.mem_mib)
                images.dtb_with_property(raw, dtb, PCIE_PATH, "dma-ranges", cells)
    else:
        return None, None
    window = images.property_cells(dtb, PCIE_PATH, "dma-ranges")
    return dtb, {"name": name, "origin": origin, "path": str(dtb), "sha256": images.sha256_file(dtb),
                 "pcie_dma_ranges": window}


STEP_WRITER = Path(__file__).resolve().parent / "step.sh"   # a job's step language, /job/.pcb/step.sh in the guest
# The step record writer lab.sh sources on the host, /job/.pcb/case.sh beside it: one writer of a step's record.
STEP_RECORD = Path(__file__).resolve().parents[2] / "labs" / "lib" / "case.sh"


def case_types_file(env: dict[str, str] | None = None) -> bytes:
    """The text of /job/.pcb/case-types, which :data:`STEP_WRITER` checks a step's KEY=VALUE
    fields against: the lab's declared case keys and types (lab.toml [case]) as ``KEY=TYPE``
    lines, from the lab run's ``PCB_LAB_CASE`` (labkit.steps.env_words) in ``env`` (default:
    this process's environment); empty outside a lab run (then no file is written)."""
    words = (os.environ if env is None else env).get("PCB_LAB_CASE", "").split()
    return "".join(f"{w}\n" for w in words).encode()


def job_contract_files(env: dict[str, str] | None = None) -> dict[str, bytes]:
    """The files of a job's step language, by name under /job/.pcb: ``step.sh``
    (:data:`STEP_WRITER`) and ``case.sh`` (:data:`STEP_RECORD`), and what they read: ``case-types``
    (:func:`case_types_file`), ``lab``, the lab's name (``PCB_LAB_NAME``, for a refused field's
    message), and ``one-repetition`` (``1`` when ``PCB_ONE_REPETITION=1``: the job's steps keep
    their first repetition only, as the lab's do, labs/lib/case.sh), these three only when the
    lab run in ``env`` (default: this process's environment) gives them."""
    env = os.environ if env is None else env
    files = {"step.sh": STEP_WRITER.read_bytes(), "case.sh": STEP_RECORD.read_bytes(),
             "case-types": case_types_file(env), "lab": env.get("PCB_LAB_NAME", "").encode(),
             "one-repetition": b"1" if env.get("PCB_ONE_REPETITION") == "1" else b""}
    return {name: data for name, data in files.items() if data}


class GuestInfo(TypedDict, total=False):
    """A boot's record (:func:`run`; ``guest.json``, which labs read): the machine (arch,
    machine, cpu, cpus, mem_mib, accelerator and why, QEMU's version, this host's arch and CPU),
    the kernel (Debian package, version, release; ``kernel_source`` a reader's kernel as
    {"kind", "path", "sha256"}, else None), the userspace (release, profile, packages), the
    device tree (``dt``, ``device_tree`` as :func:`device_tree` describes it, ``dma_ranges``:
    the PCIe host bridge's window in the booted tree), the kernel command line added
    (``append``), the disks (``nvme_image``, ``drives`` {serial: path}), the job's ``exit``
    status (None: none came back), ``boot_seconds`` (QEMU's start to the job's start),
    ``seconds`` (the whole boot), ``prepare_seconds`` and ``cache_built`` (the cache entries
    made for it), ``timed_out``; :func:`run_command` and :func:`shell` add ``command`` and
    ``nvme_scratch``."""

    arch: str
    machine: str
    cpu: str
    cpus: int
    mem_mib: int
    accelerator: str
    accel_reason: str
    qemu_version: str
    host_arch: str
    host_cpu: str
    kernel_package: str
    kernel_version: str
    kernel_release: str
    kernel_source: dict | None
    userspace_release: str
    profile: str
    packages: list
    dt: str | None
    device_tree: dict | None
    dma_ranges: str | None
    append: str
    nvme_image: str | None
    drives: dict[str, str]
    exit: int | None
    boot_seconds: float | None
    seconds: float
    prepare_seconds: float
    cache_built: list
    timed_out: bool
    command: list[str] | None
    nvme_scratch: int | None


@dataclass
class Boot:
    """One boot of a guest (:func:`run`, :func:`boot_prepared`).

    ``job_dir``: the job directory (its ``run``); ``out_dir``: where the guest's ``/out`` comes
    back; ``work``: the boot's disks, ``console.log``, ``qemu.cmd``, the device tree; ``accel``:
    "kvm" or "tcg" (for :func:`boot_prepared`; :func:`run` picks it); ``timeout``: seconds (None:
    none); ``nvme_image``: a raw file the guest sees as /dev/nvme0n1; ``drives``: read-only virtio
    drives {serial: raw image}; ``out_mib``, ``scratch_mib``: the out and scratch disks' sizes in
    MiB (0: no scratch disk); ``probe``: the KVM probe (the boot ends at the job's exit marker);
    ``interactive``: the console is this terminal. Paths may be given as strings; they are kept
    as :class:`~pathlib.Path`."""

    job_dir: Path
    out_dir: Path
    work: Path
    accel: str = ""
    timeout: float | None = 600
    nvme_image: Path | None = None
    drives: dict[str, Path] | None = None
    out_mib: int = 256
    scratch_mib: int = 0
    probe: bool = False
    interactive: bool = False

    def __post_init__(self) -> None:
        self.job_dir, self.out_dir, self.work = Path(self.job_dir), Path(self.out_dir), Path(self.work)
        if self.nvme_image is not None:
            self.nvme_image = Path(self.nvme_image)
        if self.drives:
            self.drives = {k: Path(v) for k, v in self.drives.items()}


def boot_prepared(spec: GuestSpec, prep: dict, boot: Boot, say: Say, job_line: Say | None = None) -> dict:
    """Boot ``spec`` with the images ``prep`` (:func:`prepare`) as ``boot`` says, every line of
    the job to ``job_line`` when given. Returns :func:`labkit.guest.qemu.boot`'s record plus
    "device_tree" (:func:`device_tree`'s record, or None); the boot's disks are removed whatever
    happens. :func:`run` is the entry point that prepares the images first.

    Raises:
        GuestRunError: the guest's ``/out`` could not be read back, or QEMU could not dump its
        device tree; GuestBuildError: as :func:`device_tree`.
    """
    work = boot.work
    work.mkdir(parents=True, exist_ok=True)
    boot.out_dir.mkdir(parents=True, exist_ok=True)
    job_tar, out_img, scratch = work / "job.tar", work / "out.img", work / "scratch.img"
    try:
        with tarfile.open(job_tar, "w", format=tarfile.USTAR_FORMAT) as tar:
            for p in sorted(Path(boot.job_dir).rglob("*")):
                tar.add(p, arcname=str(p.relative_to(boot.job_dir)), recursive=False)
            for name, data in job_contract_files().items():
                info = tarfile.TarInfo(f".pcb/{name}")
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        with open(out_img, "wb") as f:
            f.truncate(boot.out_mib * 1024 * 1024)
        dtb, tree = device_tree(spec, work, boot.accel)
        if boot.scratch_mib:
            # An empty disk of the guest's own for scratch (sparse here: only what the guest writes uses
            # space); the job finds it as $PCB_SCRATCH_DEV and puts a file system on it.
            with open(scratch, "wb") as f:
                f.truncate(boot.scratch_mib * 1024 * 1024)
        cmd = command.boot_command(spec.arch, boot.accel, spec.cpus, spec.mem_mib, kernel=prep["vmlinuz"],
                                   initrd=prep["initrd"], rootfs=prep["rootfs_img"], modules=prep["modules_img"],
                                   job_tar=job_tar, out_img=out_img, append=spec.append, dtb=dtb,
                                   scratch=scratch if boot.scratch_mib else None, drives=boot.drives,
                                   nvme_image=boot.nvme_image, interactive=boot.interactive)
        (work / "qemu.cmd").write_text(" ".join(cmd) + "\n")
        if boot.interactive:
            res = qemu.boot_interactive(cmd, boot.timeout)
        else:
            limit = boot.timeout if boot.timeout is not None else float("inf")
            res = qemu.boot(cmd, limit, work / "console.log", say, ready_marker="PCB-GUEST-EXIT" if boot.probe else None,
                            ready_timeout=boot.timeout if boot.probe else None, job_line=job_line)
        if res["exit"] is not None or boot.interactive:
            proc = subprocess.run(["tar", "-xf", str(out_img), "-C", str(boot.out_dir)], capture_output=True,
                                  text=True)
            if proc.returncode != 0 and not boot.interactive:
                raise GuestRunError(f"the guest's /out could not be read back: {proc.stderr.strip()[-200:]}")
        res["device_tree"] = tree
        return res
    finally:
        # The run's disks go whatever happened (an error, an interrupt); the console log, the
        # QEMU command line and the device tree stay in the work directory.
        for f in (out_img, job_tar, scratch):
            f.unlink(missing_ok=True)


def run(spec: GuestSpec, boot: Boot, *, say: Say = stderr_say, refresh: bool = False, host_label: str | None = None,
        job_line: Say | None = None, extra: dict | None = None) -> GuestInfo:
    """Boot ``spec`` as ``boot`` says (:class:`Boot`), run ``boot.job_dir/run`` (POSIX sh, as
    root, cwd /job, ``$PCB_OUT`` = /out; the step writer :data:`STEP_WRITER` beside it as
    /job/.pcb/step.sh) and bring ``/out`` back into ``boot.out_dir``. ``boot.work`` (in the lab's
    scratch) holds the per-run disks, the device tree and ``console.log``; ``boot.scratch_mib``:
    an empty disk of that size for the job's scratch (``$PCB_SCRATCH_DEV`` in the guest);
    ``boot.drives``: {serial: raw image} attached read-only as virtio disks (not behind the PCIe
    host bridge: a control for the NVMe drive's reads, which may be the same file); the job finds
    each as the /dev/vdX whose /sys/block/vdX/serial is the serial. The accelerator is chosen
    here, KVM where it boots, else TCG (:func:`accelerator`), whatever ``boot.accel`` says. Also
    writes ``out_dir/guest.json`` (the returned dict) and ``job_dir/emulation.json`` (the
    ``host.emulation`` record of results made in the guest: labkit's probe reads it through
    ``$PCB_EMULATION_FILE``; ``host_label`` names this host). ``refresh``: assemble the images again (:func:`prepare`); ``job_line``:
    receives every line the job prints, as it is (instead of progress through ``say``);
    ``boot.interactive``: the console is this terminal (:func:`qemu.boot_interactive`; the job's
    exit status then comes from ``/out/.pcb-exit`` when the job writes one); ``extra``: more keys
    for the record.

    Returns: the boot's record (:class:`GuestInfo`), also written as ``out_dir/guest.json``;
    its "exit" is the job's exit status.

    Raises:
        GuestBuildError, GuestRunError: assembling failed, or the guest gave no exit status
        (timeout, QEMU error): the message names the console log.
    """
    spec.check()
    work, out_dir, job_dir = boot.work, boot.out_dir, boot.job_dir
    work.mkdir(parents=True, exist_ok=True)
    prep = prepare(spec, say, refresh)
    accel, reason = _accel(spec, prep, work, say)
    emu = {"emulator": f"QEMU {qemu.qemu_version(spec.arch)} ({ARCHS[spec.arch]['qemu']})", "accelerator": accel,
           "machine": ARCHS[spec.arch]["machine"], "guest_cpu": "host" if accel == "kvm" else ARCHS[spec.arch]["cpu_tcg"],
           "host_arch": platform.machine(), "host_cpu": qemu.host_cpu(), "host_label": host_label}
    (job_dir / "emulation.json").write_text(json.dumps(emu) + "\n")
    if boot.interactive:
        (out_dir / ".pcb-exit").unlink(missing_ok=True)   # only this boot's shell may leave one
    tree_name = spec.dt or (Path(spec.dtb).name if spec.dtb else None)
    say(f"booting {spec.arch} ({accel}) kernel {prep['kernel']['release']}"
        + (f", device tree {tree_name}" if tree_name else "") + (f", append '{spec.append}'" if spec.append else ""))
    res = boot_prepared(spec, prep, dataclasses.replace(boot, accel=accel), say, job_line=job_line)
    if boot.interactive:
        status = out_dir / ".pcb-exit"
        if status.exists():
            res["exit"] = int(status.read_text().strip() or 0)
            status.unlink()
    tree = res["device_tree"]
    info = {"arch": spec.arch, "machine": ARCHS[spec.arch]["machine"],
            "cpu": "host" if accel == "kvm" else ARCHS[spec.arch]["cpu_tcg"], "cpus": spec.cpus,
            "mem_mib": spec.mem_mib, "accelerator": accel, "accel_reason": reason,
            "qemu_version": qemu.qemu_version(spec.arch), "host_arch": platform.machine(), "host_cpu": qemu.host_cpu(),
            "kernel_package": prep["kernel"]["package"], "kernel_version": prep["kernel"]["version"],
            "kernel_release": prep["kernel"]["release"], "kernel_source": prep["kernel"].get("local"),
            "userspace_release": spec.release, "profile": spec.profile,
            "packages": prep["rootfs"]["packages"], "dt": spec.dt, "device_tree": tree,
            "dma_ranges": tree["pcie_dma_ranges"] if tree else None, "append": spec.append,
            "nvme_image": str(boot.nvme_image) if boot.nvme_image else None,
            "drives": {k: str(v) for k, v in sorted((boot.drives or {}).items())},
            "exit": res["exit"], "boot_seconds": res["boot_seconds"], "seconds": res["seconds"],
            "prepare_seconds": prep["built"], "cache_built": prep["new"], "timed_out": res["timed_out"], **(extra or {})}
    (out_dir / "guest.json").write_text(json.dumps(info, indent=1) + "\n")
    if res["exit"] is None:
        if boot.interactive:
            raise GuestRunError("the guest stopped before the shell exited "
                                + ("(timed out)" if res["timed_out"] else f"(QEMU exited {res['qemu_status']})"))
        raise GuestRunError(f"the guest gave no exit status ({'timed out after %.0f s' % boot.timeout if res['timed_out'] else 'QEMU exited %s' % res['qemu_status']}); "
                            f"console: {work / 'console.log'}")
    return info


# Written first in every job of run_command and shell: tracefs and debugfs where tools look for
# them (init mounts both; a kernel without one leaves it unmounted, and the job tries again),
# busybox's applets after the Debian programs on PATH (dmesg, ps, free, lsmod, vi, less, hexdump:
# the tools profile has no util-linux or procps), the commands run from /root.
JOB_PREAMBLE = """grep -q ' /sys/kernel/tracing tracefs ' /proc/mounts || busybox mount -t tracefs nodev /sys/kernel/tracing
grep -q ' /sys/kernel/debug debugfs ' /proc/mounts || busybox mount -t debugfs nodev /sys/kernel/debug
mkdir -p /tmp/pcb-busybox && busybox --install -s /tmp/pcb-busybox && PATH=$PATH:/tmp/pcb-busybox && export PATH
cd /root || cd /
"""


def command_job(command: list[str]) -> str:
    """The ``run`` script of a job that runs one command: :data:`JOB_PREAMBLE`, then ``command``
    (its words each quoted for sh, so none is expanded or split again) with stdin from /dev/null;
    the script's exit status is the command's."""
    if not command:
        raise ValueError("no command to run")
    return ("# Written by labkit.guest: one command (labkit guest run -- CMD).\n" + JOB_PREAMBLE
            + " ".join(shlex.quote(w) for w in command) + " </dev/null\n")


def shell_job(arch: str, rows: int, cols: int, term: str) -> str:
    """The ``run`` script of an interactive shell on the guest's console (``/dev/<console>``): the
    preamble, the terminal's size and type (vt100 when the guest has no terminfo entry for
    ``term``), then bash (or the profile's sh) as the leader of a new session whose controlling
    terminal is the console (busybox ``setsid -c``: job control and Ctrl-C work); its exit
    status is written to ``/out/.pcb-exit`` and is the job's."""
    tty = f"/dev/{ARCHS[arch]['console']}"
    return f"""# Written by labkit.guest: an interactive shell on the console (labkit guest shell).
{JOB_PREAMBLE}stty -F {tty} rows {int(rows)} cols {int(cols)} 2>/dev/null
TERM={shlex.quote(term)}
first=$(printf %.1s "$TERM")
[ -e "/lib/terminfo/$first/$TERM" ] || [ -e "/usr/share/terminfo/$first/$TERM" ] || TERM=vt100
export TERM
[ -d /usr/lib/locale/C.utf8 ] || {{ LC_ALL=C; export LC_ALL; }}   # the locale is libc-bin's (not in every profile)
if [ -x /bin/bash ]; then
  PS1='pcb-{arch}:\w# '; export PS1
  set -- /bin/bash --norc --noprofile -i
else
  PS1='pcb-{arch}# '; export PS1
  set -- /bin/sh -i
fi
busybox setsid -c "$@" <{tty} >{tty} 2>&1
rc=$?
echo $rc > "$PCB_OUT/.pcb-exit"
exit $rc
"""


def scratch_nvme(path: Path, mib: int = SCRATCH_NVME_MIB) -> Path:
    """A sparse raw image of ``mib`` MiB at ``path`` (zeros to the guest; no disk space used until
    written), for a guest's NVMe drive."""
    with open(path, "wb") as f:
        f.truncate(mib * 1024 * 1024)
    return path


@contextmanager
def _private_dir(parent: Path | str | None):
    """A new directory (``pcb-guest.*``) in ``parent`` (default $TMPDIR), removed with all it holds
    on leaving, whatever ends the block."""
    if parent is not None:
        Path(parent).mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="pcb-guest.", dir=parent))
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _console_tail(work: Path, lines: int = 15) -> str:
    try:
        return "\n".join((work / "console.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def run_command(spec: GuestSpec, command: list[str], *, nvme_image: Path | str | None = None,
                out_dir: Path | str | None = None, work_dir: Path | str | None = None, timeout: float = 600,
                say: Say = stderr_say, output: Say | None = None, refresh: bool = False,
                nvme_mib: int = SCRATCH_NVME_MIB, drives: dict[str, Path | str] | None = None) -> GuestInfo:
    """Boot ``spec`` and run one command in it (``labkit guest run -- CMD``): the job is
    :func:`command_job`; every line the guest prints while it runs goes to ``output`` (default:
    this process's stdout; the command's stdout and stderr share the console). ``nvme_image``:
    the NVMe drive's image, else a sparse scratch image of ``nvme_mib`` MiB; ``drives``: as
    :func:`run`. ``out_dir``: where
    ``/out`` and ``guest.json`` land (default: nowhere, removed). The job, the disks, the scratch
    image and the console log live in a private ``pcb-guest.*`` directory in ``work_dir`` (default
    $TMPDIR), removed on return, on an error and on KeyboardInterrupt (which the runner raises on
    SIGINT/SIGTERM/SIGHUP while QEMU runs).

    Returns: :func:`run`'s record (with "command"); its "exit" is the command's exit status.

    Raises:
        ValueError: an empty command or a bad spec.
        GuestBuildError, GuestRunError: as :func:`run` (the message ends with the console's last lines).
    """
    spec.check()
    job_text = command_job(command)
    if output is None:
        def output(line: str) -> None:
            print(line, flush=True)
    with _private_dir(work_dir) as base:
        job = base / "job"
        job.mkdir()
        (job / "run").write_text(job_text)
        nvme = Path(nvme_image) if nvme_image else scratch_nvme(base / "nvme-scratch.img", nvme_mib)
        try:
            return run(spec, Boot(job, Path(out_dir) if out_dir else base / "out", base / "work", timeout=timeout,
                                  nvme_image=nvme, drives=drives),
                       say=say, refresh=refresh, job_line=output,
                       extra={"command": list(command), "nvme_scratch": None if nvme_image else nvme_mib})
        except GuestRunError as exc:
            tail = _console_tail(base / "work")
            raise GuestRunError(str(exc).split("; console:")[0] + (f"; the console's last lines:\n{tail}" if tail else "")) from None


def shell(spec: GuestSpec, *, nvme_image: Path | str | None = None, out_dir: Path | str | None = None,
          work_dir: Path | str | None = None, timeout: float | None = None, say: Say = stderr_say,
          refresh: bool = False, nvme_mib: int = SCRATCH_NVME_MIB) -> GuestInfo:
    """Boot ``spec`` with an interactive shell on its console, on this process's terminal
    (``labkit guest shell``): the job is :func:`shell_job`; the userspace is the profile's plus
    :data:`SHELL_PACKAGES`. The NVMe drive, ``out_dir`` and the private directory in ``work_dir``
    are as in :func:`run_command`. ``exit`` (or Ctrl-D) ends the shell and powers the guest off;
    Ctrl-A x stops QEMU at once.

    Returns: :func:`run`'s record; its "exit" is the shell's exit status.

    Raises:
        ValueError: no terminal on stdin and stdout, or a bad spec.
        GuestBuildError, GuestRunError: as :func:`run` (GuestRunError also when QEMU was stopped
        before the shell exited).
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ValueError("shell needs a terminal on stdin and stdout (to run one command: labkit guest run ... -- CMD)")
    extras = [p for p in SHELL_PACKAGES if p not in PROFILES[spec.profile] and p not in spec.extra_packages]
    spec = dataclasses.replace(spec, extra_packages=list(spec.extra_packages) + extras)
    spec.check()
    # The terminal's own size: shutil.get_terminal_size() would prefer $COLUMNS and $LINES,
    # which a parent may have exported for its own use (pytest-xdist's workers export 80 and 24).
    size = os.get_terminal_size(sys.stdout.fileno())
    job_text = shell_job(spec.arch, size.lines, size.columns, os.environ.get("TERM") or "vt100")
    with _private_dir(work_dir) as base:
        job = base / "job"
        job.mkdir()
        (job / "run").write_text(job_text)
        nvme = Path(nvme_image) if nvme_image else scratch_nvme(base / "nvme-scratch.img", nvme_mib)
        built = prepare(spec, say, refresh)["new"]   # builds (if needed) before the console is handed over
        say(f"NVMe drive /dev/nvme0n1 ({nvme if nvme_image else f'scratch, {nvme_mib} MiB of zeros'}), tracefs at "
            "/sys/kernel/tracing; `exit` powers the guest off, Ctrl-A x stops it")
        return run(spec, Boot(job, Path(out_dir) if out_dir else base / "out", base / "work", timeout=timeout,
                              nvme_image=nvme, interactive=True),
                   say=say, extra={"command": None, "nvme_scratch": None if nvme_image else nvme_mib, "cache_built": built})


# What a guest cache holds at its top level (anything else: not a cache, never pruned).
CACHE_ENTRIES = {".lock", "index.json", "index.json.tmp", "apt", "kernels", "rootfs"}


def cache_usage(path: Path | str | None = None) -> int:
    """Bytes the cache (default :func:`cache_dir`) takes on disk: allocated blocks of every file
    and folder, each inode once (its images are sparse: their apparent size overstates); 0 when
    there is no cache."""
    root = Path(path) if path is not None else cache_dir()
    if not root.exists():
        return 0
    seen: set[tuple[int, int]] = set()
    total = 0
    for d, dirs, files in os.walk(root):
        for name in [*dirs, *files, None]:
            p = os.path.join(d, name) if name else d
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def human_size(n: int) -> str:
    """``n`` bytes as people read it: "0 B", "12.0 KiB", "2.9 GiB"."""
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"


def prune_cache(path: Path | str | None = None) -> int:
    """Remove the cache (default :func:`cache_dir`) and everything in it; returns the bytes it
    took (0 when there was none: a folder without the cache's ``.lock`` or ``index.json`` stays).

    Raises:
        ValueError: the folder holds something a guest cache does not (it is then left alone:
            $PCB_GUEST_CACHE pointing at a folder of other files never loses them).
        CacheBusyError: a build holds the cache's lock.
    """
    root = Path(path) if path is not None else cache_dir()
    if not root.exists():
        return 0
    if root.resolve() in (Path("/"), Path.home().resolve()) or not root.is_dir():
        raise ValueError(f"{root} is not a guest cache: not removed")
    odd = sorted(p.name for p in root.iterdir()
                 if p.name not in CACHE_ENTRIES and not (p.name.startswith("accel-") and p.name.endswith(".json")))
    if odd:
        raise ValueError(f"{root} holds {', '.join(odd[:3])}{' ...' if len(odd) > 3 else ''}, which a guest cache "
                         "does not: not removed")
    if not (root / ".lock").exists() and not (root / "index.json").exists():
        return 0   # an empty folder, or one only a guest cache's subfolders: nothing labkit.guest made
    size = cache_usage(root)
    with open(root / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CacheBusyError(f"a build is using the cache {root} (it holds {root / '.lock'}): "
                                 "try again when it has finished") from None
        shutil.rmtree(root)
    return size
