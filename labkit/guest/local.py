"""A kernel the reader has, booted instead of the Debian release's own: a ``linux-image-*.deb``
(e.g. Debian buster's 4.19, which the NVMe investigation's board ran before its upgrade), or a
kernel image with its modules folder (``make Image modules_install INSTALL_MOD_PATH=...``, or an
unpacked package).

Accepted forms of ``--kernel PATH`` (:func:`locate`):

- ``PATH`` ends in ``.deb``: a Debian kernel package, unpacked with ``dpkg-deb -x`` (its
  ``boot/vmlinuz-<release>`` and ``lib/modules/<release>``), ``depmod`` run on it;
- ``PATH`` is a file: a kernel image (arm64 ``Image`` or ``Image.gz``/Debian ``vmlinuz``, x86
  ``bzImage``); ``--modules DIR`` names its modules: ``lib/modules/<release>`` itself, a folder
  holding ``<release>/``, or a root holding ``lib/modules/<release>/``;
- ``PATH`` is a folder: an unpacked package or install root, holding one image
  (``boot/vmlinuz-*``, ``vmlinuz-*``, ``vmlinuz``, ``Image``, ``Image.gz`` or
  ``arch/arm64/boot/Image``) and ``lib/modules/<release>/`` (or ``--modules DIR``).

Each kernel is kept in the guest cache under ``kernels/<arch>/local-<fingerprint>/`` (the same
layout as a Debian release's kernel: ``tree/``, ``modules.img``, initramfs files, manifest), so a
second boot of the same file builds nothing. The fingerprint is the .deb's sha256, or the sha256
of the image and of the module tree's file list (path, size, modification time).

Sources of the method: the arm64 boot protocol (Documentation/arch/arm64/booting.rst: the Image
header's magic ``ARM\\x64`` at offset 0x38), the x86 boot protocol (Documentation/arch/x86/boot.rst:
``HdrS`` at 0x202), RFC 1952 (gzip magic 1f 8b), dpkg-deb(1) ``-f`` (control fields), depmod(8).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import debian, images
from .debian import GuestBuildError

Say = Callable[[str], None]
IMAGE_NAMES = ["Image", "Image.gz", "vmlinuz", "arch/arm64/boot/Image", "arch/x86/boot/bzImage"]


@dataclass
class LocalKernel:
    """Where a reader's kernel comes from: ``deb`` (a package) or ``image`` + ``moddir`` (the
    folder ``lib/modules/<release>``, whose name is the release)."""
    source: Path
    deb: Path | None = None
    image: Path | None = None
    moddir: Path | None = None

    @property
    def kind(self) -> str:
        """"deb" or "image"."""
        return "deb" if self.deb else "image"


def image_arch(path: Path) -> str | None:
    """The architecture a kernel image file is built for, from its header: "arm64" (an Image,
    plain or gzip-compressed), "x86_64" (a bzImage), or None when the header says neither (an
    EFI zboot image, an ELF vmlinux, something else)."""
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 0x1000)
        except zlib.error:
            return None
    if head[0x38:0x3C] == b"ARM\x64":
        return "arm64"
    if head[0x202:0x206] == b"HdrS":
        return "x86_64"
    return None


def _modules_dir(d: Path) -> Path:
    """``lib/modules/<release>`` under ``d``: ``d`` itself, ``d/<release>``, or ``d/lib/modules/<release>``."""
    def is_release(p: Path) -> bool:
        return p.is_dir() and any((p / m).exists() for m in ("modules.dep", "modules.order", "kernel"))

    if is_release(d):
        return d
    for base in (d, d / "lib" / "modules"):
        found = [p for p in sorted(base.iterdir()) if is_release(p)] if base.is_dir() else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ValueError(f"{base} holds modules of several kernels ({', '.join(p.name for p in found)}): "
                             f"give --modules {found[0]}")
    raise ValueError(f"{d} holds no kernel modules (a lib/modules/<release> folder with modules.dep or kernel/)")


def locate(kernel: str | Path, modules: str | Path | None = None) -> LocalKernel:
    """Find the parts of a reader's kernel (see the module docstring for the forms).

    Raises:
        ValueError: a path that does not exist, a folder without an image or modules, an image
        without ``modules``, ``modules`` given with a .deb, or several candidates.
    """
    k = Path(kernel).expanduser()
    if not k.exists():
        raise ValueError(f"--kernel {kernel}: no such file or folder")
    if k.is_file() and k.name.endswith(".deb"):
        if modules:
            raise ValueError("--modules goes with a kernel image, not a .deb (the package holds its modules)")
        return LocalKernel(source=k.resolve(), deb=k.resolve())
    mods = Path(modules).expanduser() if modules else None
    if mods is not None and not mods.is_dir():
        raise ValueError(f"--modules {modules}: no such folder")
    if k.is_file():
        if mods is None:
            raise ValueError(f"--kernel {kernel} is an image: give its modules folder with --modules DIR "
                             "(lib/modules/<release>)")
        return LocalKernel(source=k.resolve(), image=k.resolve(), moddir=_modules_dir(mods).resolve())
    found = sorted((k / "boot").glob("vmlinuz-*")) + sorted(k.glob("vmlinuz-*"))
    found += [k / n for n in IMAGE_NAMES if (k / n).is_file()]
    if not found:
        raise ValueError(f"--kernel {kernel}: no kernel image in the folder (boot/vmlinuz-*, Image, Image.gz, vmlinuz)")
    if len(found) > 1:
        raise ValueError(f"--kernel {kernel}: several kernel images ({', '.join(str(f.relative_to(k)) for f in found)}): "
                         "give the image file and --modules DIR")
    return LocalKernel(source=k.resolve(), image=found[0].resolve(), moddir=_modules_dir(mods or k).resolve())


def deb_fields(deb: Path) -> dict:
    """{"Package", "Version", "Architecture"} of a .deb (dpkg-deb -f).

    Raises:
        GuestBuildError: not a Debian package.
    """
    out = debian._run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture"], f"dpkg-deb -f {deb.name}").stdout
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def check_arch(lk: LocalKernel, arch: str) -> None:
    """Refuse a kernel built for another architecture than the guest's.

    Raises:
        ValueError: a .deb of another Debian architecture, or an image whose header names another.
    """
    if lk.deb:
        try:
            fields = deb_fields(lk.deb)
        except GuestBuildError as exc:
            raise ValueError(f"--kernel {lk.deb.name}: not a Debian package ({exc})") from None
        want = debian.DEB_ARCH[arch]
        if fields.get("Architecture") not in (want, "all"):
            raise ValueError(f"--kernel {lk.deb.name} is for {fields.get('Architecture')}, the guest is {arch} ({want})")
        if not fields.get("Package", "").startswith("linux-image-"):
            raise ValueError(f"--kernel {lk.deb.name}: package {fields.get('Package')} is not a linux-image-* package")
    else:
        got = image_arch(lk.image)
        if got is not None and got != arch:
            raise ValueError(f"--kernel {lk.image.name} is an {got} kernel image, the guest is {arch}")


def fingerprint(lk: LocalKernel) -> str:
    """sha256 (hex) naming this kernel in the cache: of the .deb, or of the image and the module
    tree's file list (relative path, size, modification time in ns)."""
    if lk.deb:
        return images.sha256_file(lk.deb)
    h = hashlib.sha256()
    h.update(images.sha256_file(lk.image).encode())
    for root, dirs, files in os.walk(lk.moddir):
        dirs.sort()
        for name in sorted(files):
            p = Path(root) / name
            st = p.lstat()
            h.update(f"{p.relative_to(lk.moddir)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def build(lk: LocalKernel, arch: str, dest: Path, say: Say, digest: str | None = None) -> dict:
    """Assemble ``dest`` (a cache entry) from a reader's kernel: ``tree/`` with the image and the
    module tree (depmod run when the tree has no modules.dep, or always for a .deb), the ext4
    image ``modules.img`` of the module tree, and ``manifest.json`` written last. ``digest``: the
    kernel's :func:`fingerprint` when already known.

    Returns the manifest: {"package", "version", "arch", "debian_release": None, "release",
    "vmlinuz", "modules", "config" (paths relative to ``dest``), "local": {"kind", "path", "sha256"}}.

    Raises:
        GuestBuildError: dpkg-deb, depmod or mke2fs failing; a package without a kernel image.
    """
    digest = digest or fingerprint(lk)
    shutil.rmtree(dest, ignore_errors=True)
    tree = dest / "tree"
    tree.mkdir(parents=True)
    if lk.deb:
        fields = deb_fields(lk.deb)
        say(f"unpacking {lk.deb.name}")
        info = debian.unpack_kernel(lk.deb, tree)
        package, version = fields.get("Package", lk.deb.name), fields.get("Version")
    else:
        release = lk.moddir.name
        say(f"copying the modules of {release} ({lk.moddir})")
        moddir = tree / "lib" / "modules" / release
        shutil.copytree(lk.moddir, moddir, symlinks=True)
        for link in ("build", "source"):   # links into a build tree: not part of the guest
            if (moddir / link).is_symlink():
                (moddir / link).unlink()
        (tree / "boot").mkdir()
        vmlinuz = tree / "boot" / f"vmlinuz-{release}"
        shutil.copy2(lk.image, vmlinuz)
        if not (moddir / "modules.dep").exists():
            say(f"depmod {release}")
            debian._run(["depmod", "-b", str(tree), release], f"depmod {release}")
        info = {"release": release, "vmlinuz": str(vmlinuz), "modules": str(moddir),
                "config": str(tree / "boot" / f"config-{release}")}
        package, version = "local", None
    say("ext4 image of the module tree")
    images.ext4_image(Path(info["modules"]), dest / "modules.img", "pcbmods", slack_mib=16)
    manifest = {"package": package, "version": version, "arch": arch, "debian_release": None,
                "release": info["release"], "vmlinuz": str(Path(info["vmlinuz"]).relative_to(dest)),
                "modules": str(Path(info["modules"]).relative_to(dest)),
                "config": str(Path(info["config"]).relative_to(dest)),
                "local": {"kind": lk.kind, "path": str(lk.source), "sha256": digest}}
    debian.write_manifest(dest / "manifest.json", manifest)
    return manifest
