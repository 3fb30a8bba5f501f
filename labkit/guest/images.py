"""Images a guest boots from: a small initramfs (busybox and the modules that reach the disks),
an ext4 root image (the guest architecture's own Debian userspace), an ext4 image of one
kernel's whole module tree, and device trees edited with dtc.

Sources of the method:
- The kernel's initramfs format (Documentation/filesystems/ramfs-rootfs-initramfs.rst): a
  newc cpio archive, optionally gzip-compressed, whose ``/init`` runs as PID 1.
- mke2fs(8) ``-d DIR`` fills a new ext4 file system from a directory, without root or mounts.
- dtc(1) turns a flattened device tree (``-I dtb``) into source (``-O dts``) and back.
- modules.dep (depmod(8)): ``path: dep1 dep2 ...``; a module's dependencies load before it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from .debian import GuestBuildError, _run

# /init of the initramfs (busybox sh). It loads the boot modules, finds the guest's disks by their
# virtio serial (pcbroot, pcbjob, pcbout, pcbmods: the probe order of virtio-mmio is not the
# command-line order), mounts the root image (QEMU -snapshot: writes never reach the cached image),
# unpacks the job, runs /job/run in a chroot, and writes /out back as a tar onto the out disk.
INIT = r"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /mnt /bin /sbin
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "PCB-GUEST: init, kernel $(uname -r)"
while read -r m; do
  insmod "/lib/modules/$m" 2>/tmp-insmod || grep -q 'File exists' /tmp-insmod || echo "PCB-GUEST: insmod $m: $(cat /tmp-insmod)"
done < /modules.load
disk() { # disk SERIAL: /dev/vdX whose virtio serial is SERIAL
  for s in /sys/block/vd*/serial; do
    [ -r "$s" ] && [ "$(cat "$s")" = "$1" ] && { d=${s%/serial}; echo "/dev/${d##*/}"; return 0; }
  done
  return 1
}
i=0
while ! disk pcbout >/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
ROOT=$(disk pcbroot) JOB=$(disk pcbjob) OUT=$(disk pcbout) MODS=$(disk pcbmods) SCRATCH=$(disk pcbscratch)
if [ -z "$ROOT" ] || [ -z "$JOB" ] || [ -z "$OUT" ]; then
  echo "PCB-GUEST: disks not found (root=$ROOT job=$JOB out=$OUT): $(ls /sys/block)"
  echo "PCB-GUEST-EXIT 125"; poweroff -f
fi
mount -t ext4 "$ROOT" /mnt || { echo "PCB-GUEST-EXIT 125"; poweroff -f; }
K=$(uname -r)
if [ -n "$MODS" ]; then
  mkdir -p "/mnt/lib/modules/$K" && mount -t ext4 -o ro "$MODS" "/mnt/lib/modules/$K"
fi
mkdir -p /mnt/job /mnt/out /mnt/proc /mnt/sys /mnt/dev /mnt/tmp
tar -xf "$JOB" -C /mnt/job
for f in proc sys dev; do mount --move "/$f" "/mnt/$f"; done
# As a Debian system has them after boot (udev, systemd): /dev/fd and the std streams (bash's
# process substitution opens /dev/fd/N), /dev/pts, /dev/shm, tracefs and debugfs.
ln -sfn /proc/self/fd /mnt/dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -sfn "/proc/self/fd/${i%%:*}" "/mnt/dev/${i#*:}"; done
mkdir -p /mnt/dev/pts /mnt/dev/shm
grep -q ' /mnt/dev/pts ' /mnt/proc/mounts || mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /mnt/dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /mnt/dev/shm
mount -t tracefs nodev /mnt/sys/kernel/tracing 2>/dev/null
mount -t debugfs nodev /mnt/sys/kernel/debug 2>/dev/null
echo "PCB-GUEST: job start"
chroot /mnt /bin/busybox env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LC_ALL=C.UTF-8 \
  PCB_GUEST=1 PCB_JOB=/job PCB_OUT=/out PCB_EMULATION_FILE=/job/emulation.json PCB_SCRATCH_DEV="$SCRATCH" /bin/sh -c 'cd /job && exec /bin/sh /job/run'
rc=$?
echo "PCB-GUEST: job done"
tar -cf "/mnt$OUT" -C /mnt/out . # /dev moved into the chroot above
sync
echo "PCB-GUEST-EXIT $rc"
poweroff -f
"""


def norm(name: str) -> str:
    """A module's name as the kernel sees it: ``crc64-rocksoft`` and ``crc64_rocksoft`` are one."""
    return name.replace("-", "_")


def module_order(moddir: Path, wanted: list[str], optional: set[str] = frozenset()) -> list[str]:
    """Module files (relative to ``moddir``) to insmod, dependencies first, for ``wanted`` modules.

    Built-in modules (``modules.builtin``; a tree without that file lists none) are left out. A
    wanted name that is neither a module nor built in raises, unless it is in ``optional`` (e.g. a
    crypto helper that only newer kernels split out).

    Raises:
        GuestBuildError: a required module that this kernel does not have.
    """
    moddir = Path(moddir)
    deps: dict[str, list[str]] = {}
    files: dict[str, str] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        path, _, rest = line.partition(":")
        name = norm(Path(path).name.split(".ko")[0])
        files[name], deps[path] = path, rest.split()
    listed = moddir / "modules.builtin"
    builtin = {norm(Path(p).name.split(".ko")[0]) for p in (listed.read_text().split() if listed.exists() else [])}
    order: list[str] = []

    def add(path: str) -> None:
        for d in reversed(deps.get(path, [])):
            add(d)
        if path not in order:
            order.append(path)

    for w in wanted:
        n = norm(w)
        if n in files:
            add(files[n])
        elif n not in builtin and w not in optional:
            raise GuestBuildError(f"kernel {moddir.name} has no module {w} (neither loadable nor built in)")
    return order


def cpio_gz(src: Path, dest: Path) -> None:
    """Pack the directory ``src`` as a gzip-compressed newc cpio archive (an initramfs)."""
    names = sorted(str(p.relative_to(src)) for p in src.rglob("*"))
    with open(dest, "wb") as out:
        cpio = subprocess.Popen(["cpio", "--quiet", "-o", "-H", "newc", "--owner=0:0"], cwd=src,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1", "-n"], stdin=cpio.stdout, stdout=out)
        cpio.stdout.close()
        cpio.stdin.write(("\n".join(["."] + names) + "\n").encode())
        cpio.stdin.close()
        if cpio.wait() != 0 or gz.wait() != 0:
            raise GuestBuildError(f"cpio | gzip of {src} failed")


def build_initramfs(busybox: Path, moddir: Path, boot_modules: list[str], optional: set[str], dest: Path) -> None:
    """The initramfs: /init (INIT above), a static busybox, and the boot modules in load order.

    ``busybox`` must be a statically linked busybox of the guest's architecture (Debian
    busybox-static, from the guest's root file system).
    """
    work = Path(str(dest) + ".d")
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    shutil.copy2(busybox, work / "bin" / "busybox")
    order = module_order(moddir, boot_modules, optional)
    for rel in order:
        target = work / "lib" / "modules" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(moddir / rel, target)
    (work / "modules.load").write_text("".join(f"{r}\n" for r in order))
    (work / "init").write_text(INIT)
    os.chmod(work / "init", 0o755)
    cpio_gz(work, dest)
    shutil.rmtree(work)


def ext4_image(src: Path, dest: Path, label: str, slack_mib: int = 256) -> None:
    """An ext4 image of the directory ``src`` (mke2fs -d), sized to its content plus ``slack_mib``."""
    used = int(_run(["du", "-s", "--block-size=1M", str(src)], "du").stdout.split()[0])
    size = int(used * 1.15) + slack_mib
    dest.unlink(missing_ok=True)
    with open(dest, "wb") as f:
        f.truncate(size * 1024 * 1024)
    _run(["mke2fs", "-q", "-F", "-t", "ext4", "-L", label, "-d", str(src), str(dest)], f"mke2fs -d {src.name}")


def fdtget(dtb: Path, *args: str) -> str | None:
    """Standard output of ``fdtget DTB ARGS`` (fdtget(1): ``-t x NODE PROP`` for cells, ``-l
    NODE`` for subnodes, ``-p NODE`` for property names); None when the node or the property is
    missing.

    Raises:
        GuestBuildError: fdtget is not installed, or the file is not a device tree.
    """
    try:
        proc = subprocess.run(["fdtget", str(dtb), *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise GuestBuildError("fdtget is not installed (package device-tree-compiler)") from None
    if proc.returncode != 0:
        if "FDT_ERR_NOTFOUND" in proc.stderr:
            return None
        raise GuestBuildError(f"fdtget {dtb.name} {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def fdtput(dtb: Path, node: str, prop: str, cells: list[int]) -> None:
    """Set ``prop`` of the node at path ``node`` in ``dtb`` to the 32-bit ``cells`` (``fdtput -t
    x``; fdtput(1)), adding the property if it is missing.

    Raises:
        GuestBuildError: the node is missing, or fdtput failed or is not installed.
    """
    _run(["fdtput", "-t", "x", str(dtb), node, prop, *(f"{c:x}" for c in cells)], f"fdtput {node} {prop}")


def property_cells(dtb: Path, node: str, prop: str) -> str | None:
    """The 32-bit cells of ``prop`` in the node at path ``node`` (e.g. ``/pcie@10000000``) of the
    flattened tree ``dtb`` (``fdtget -t x``), written as dtc prints them (``0x2000000 0x00 ...``);
    None when the node or the property is missing.

    Raises:
        GuestBuildError: fdtget is not installed, or the file is not a device tree.
    """
    out = fdtget(dtb, "-t", "x", node, prop)
    return None if out is None else " ".join(f"0x{int(c, 16):02x}" for c in out.split())


def recompile_dtb(src: Path, dest: Path) -> None:
    """Write to ``dest`` the flattened tree ``src`` recompiled by dtc (``-I dtb -O dtb``): a QEMU
    ``dumpdtb`` is padded to 1 MiB, and a guest booted with it as it is hangs silently.

    Raises:
        GuestBuildError: dtc failed or is not installed.
    """
    _run(["dtc", "-q", "-I", "dtb", "-O", "dtb", "-o", str(dest), str(src)], f"dtc {src.name}")


def dtb_with_property(src: Path, dest: Path, node: str, prop: str, cells: str) -> None:
    """Write to ``dest`` the flattened tree ``src`` recompiled (:func:`recompile_dtb`) with the
    property ``prop`` added to the node at path ``node`` as the 32-bit ``cells``
    (``"0x2000000 0x00 ..."``), by ``fdtput -t x``; nothing else of the tree changes.

    Raises:
        GuestBuildError: the node is missing, it already has ``prop``, or dtc/fdtput failed.
    """
    recompile_dtb(src, dest)
    have = fdtget(dest, "-p", node)
    if have is None:
        raise GuestBuildError(f"device tree has no node {node}")
    if prop in have.split():
        raise GuestBuildError(f"node {node} already has {prop}")
    fdtput(dest, node, prop, [int(c, 16) for c in cells.split()])


def dtb_to_dts(dtb: Path) -> str:
    """Device-tree source of a flattened tree (dtc -I dtb -O dts)."""
    return _run(["dtc", "-q", "-I", "dtb", "-O", "dts", str(dtb)], f"dtc {dtb.name}").stdout


def dts_to_dtb(dts: str, dest: Path) -> None:
    """Compile device-tree source to a flattened tree. A QEMU ``dumpdtb`` is padded to 1 MiB and a
    guest booted with it as it is hangs silently; a tree compiled by dtc has no such padding."""
    src = Path(str(dest) + ".dts")
    src.write_text(dts)
    _run(["dtc", "-q", "-I", "dts", "-O", "dtb", "-o", str(dest), str(src)], f"dtc {src.name}")


DTB_MAGIC = b"\xd0\x0d\xfe\xed"   # a flattened device tree's first four bytes (big-endian 0xd00dfeed)


def is_dtb(path: Path) -> bool:
    """True when ``path`` starts like a flattened device tree (Devicetree Specification, 5.2:
    ``magic`` 0xd00dfeed, big-endian)."""
    with open(path, "rb") as f:
        return f.read(4) == DTB_MAGIC


def sha256_file(path: Path) -> str:
    """sha256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
