"""The QEMU command line of a guest boot, built from its parts without starting anything (a
fast test checks it for every architecture and profile; :func:`labkit.guest.boot_prepared` runs it).

The disks are found in the guest by their virtio serial (``disk SERIAL`` in the initramfs's
init, :data:`labkit.guest.images.INIT`): ``pcbroot`` (the profile's root image, ``snapshot=on``:
the guest's writes never reach the cached image), ``pcbmods`` (the kernel's module tree,
read-only), ``pcbjob`` (the job as a tar, read-only), ``pcbout`` (an empty disk the guest writes
``/out`` to as a tar), optionally ``pcbscratch`` (an empty disk for the job's scratch) and extra
read-only disks named by their serial; an NVMe drive is ``-device nvme`` with serial ``pcbnvme``.
"""

from __future__ import annotations

from pathlib import Path

from .qemu import ARCHS, base_command, interactive_console

KERNEL_ARGS = "panic=-1 quiet loglevel=3 rdinit=/init"
"""Kernel command line after the console: a panic reboots at once (``-no-reboot`` turns that into
QEMU's exit), the boot is quiet, and the initramfs's ``/init`` runs."""


def drive(arch: str, path: Path | str, serial: str, readonly: bool = False, snapshot: bool = False,
          unlocked: bool = False) -> list[str]:
    """``-drive`` and ``-device`` of one raw image on the architecture's virtio disk (``blk``:
    virtio-mmio on arm64 virt, PCI on x86_64 q35), its id and serial both ``serial``."""
    opts = f"file={path},if=none,id={serial},format=raw"
    if readonly:
        opts += ",readonly=on"
    if unlocked:  # the file may also be another drive's (QEMU's image locking would refuse it)
        opts += ",file.locking=off"
    if snapshot:
        opts += ",snapshot=on"
    return ["-drive", opts, "-device", f"{ARCHS[arch]['blk']},drive={serial},serial={serial}"]


def kernel_cmdline(arch: str, append: str = "") -> str:
    """The kernel command line: the architecture's serial console, :data:`KERNEL_ARGS`, then
    ``append`` (the spec's own, e.g. ``swiotlb=force``; nothing when empty)."""
    return f"console={ARCHS[arch]['console']} {KERNEL_ARGS} {append}".strip()


def boot_command(arch: str, accel: str, cpus: int, mem_mib: int, *, kernel: Path | str, initrd: Path | str,
                 rootfs: Path | str, modules: Path | str, job_tar: Path | str, out_img: Path | str,
                 append: str = "", dtb: Path | str | None = None, scratch: Path | str | None = None,
                 drives: dict[str, Path | str] | None = None, nvme_image: Path | str | None = None,
                 interactive: bool = False) -> list[str]:
    """The whole QEMU command line of a boot, as a list of words.

    Args:
        arch: "arm64" or "x86_64" (:data:`labkit.guest.qemu.ARCHS`).
        accel: "kvm" (the host's CPU) or "tcg" (the architecture's emulated CPU).
        cpus: vCPUs (``-smp``); mem_mib: guest RAM in MiB (``-m <n>M``).
        kernel, initrd: the kernel image and the initramfs (``-kernel``, ``-initrd``).
        rootfs, modules, job_tar, out_img: the images of ``pcbroot``, ``pcbmods``, ``pcbjob``
            and ``pcbout`` (see the module docstring).
        append: extra kernel command line (:func:`kernel_cmdline`).
        dtb: a compiled device tree to boot (``-dtb``), or None (QEMU's own, or ACPI).
        scratch: the image of ``pcbscratch``, or None for no scratch disk.
        drives: serial → image of more read-only disks (unlocked: one file may back several),
            added in serial order.
        nvme_image: the image of an emulated NVMe drive, or None.
        interactive: the serial console on this terminal (:func:`labkit.guest.qemu.interactive_console`)
            instead of stdio.
    """
    cmd = base_command(arch, accel, cpus, mem_mib)
    cmd += ["-kernel", str(kernel), "-initrd", str(initrd), "-append", kernel_cmdline(arch, append)]
    cmd += interactive_console() if interactive else ["-serial", "stdio"]
    if dtb is not None:
        cmd += ["-dtb", str(dtb)]
    cmd += drive(arch, rootfs, "pcbroot", snapshot=True)
    cmd += drive(arch, modules, "pcbmods", readonly=True)
    cmd += drive(arch, job_tar, "pcbjob", readonly=True)
    cmd += drive(arch, out_img, "pcbout")
    if scratch is not None:
        cmd += drive(arch, scratch, "pcbscratch")
    for serial, image in sorted((drives or {}).items()):
        cmd += drive(arch, image, serial, readonly=True, unlocked=True)
    if nvme_image is not None:
        cmd += ["-drive", f"file={nvme_image},if=none,id=nvm,format=raw", "-device", "nvme,drive=nvm,serial=pcbnvme"]
    return cmd
