"""Debian packages for guests: kernels through a private apt configuration, userspace through
mmdebstrap. Nothing here touches the host's own apt state (its sources, lists, cache or dpkg
status), and nothing needs emulation: packages are only downloaded and unpacked.

Sources of the method:
- apt.conf(5): ``Dir::Etc::SourceList``, ``Dir::State::Lists``, ``Dir::Cache``,
  ``Dir::State::status`` and ``APT::Architecture`` give apt-get a configuration of its own.
- dpkg-deb(1) ``-x`` unpacks a package without root and without running its scripts.
- mmdebstrap(1) ``--variant=extract`` resolves the dependencies of ``--include`` and only
  unpacks them (no maintainer script runs, so a foreign architecture needs no emulator).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable

MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

# Debian's name for each guest architecture, and the kernel flavour it boots.
DEB_ARCH = {"arm64": "arm64", "x86_64": "amd64"}

Say = Callable[[str], None]


class GuestBuildError(RuntimeError):
    """A package could not be resolved, downloaded or unpacked (the message says which and why)."""


def _run(cmd: list[str], what: str, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except FileNotFoundError:
        raise GuestBuildError(f"{what}: {cmd[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise GuestBuildError(f"{what}: {cmd[0]} took longer than {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise GuestBuildError(f"{what}: {' '.join(cmd[:3])} ... exited {proc.returncode}: {tail}")
    return proc


class PrivateApt:
    """apt-get and apt-cache with a configuration of their own under ``root`` (one per
    architecture and release), so the host's apt state is never read or written.

    ``root`` holds ``sources.list``, ``lists/``, ``cache/`` and an empty dpkg ``status``. Only the
    release's main archive is used, not its security archive: a point release's packages stay
    downloadable, while a security update's .deb can vanish from the mirror when the next one lands.
    """

    def __init__(self, root: Path, arch: str, release: str):
        self.root, self.arch, self.release = Path(root), DEB_ARCH[arch], release

    def _opts(self) -> list[str]:
        r = self.root
        return ["-o", f"Dir::Etc::SourceList={r / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/dev/null",
                "-o", f"Dir::State::Lists={r / 'lists'}", "-o", f"Dir::Cache={r / 'cache'}",
                "-o", f"Dir::State::status={r / 'status'}", "-o", f"APT::Architecture={self.arch}",
                "-o", f"APT::Architectures::={self.arch}", "-o", "Dir::Etc::Preferences=/dev/null",
                "-o", "Dir::Etc::PreferencesParts=/dev/null", "-o", "Debug::NoLocking=1",
                "-o", "APT::Sandbox::User=root", "-q"]

    def update(self) -> None:
        """Write the sources list (the release's main archive) and fetch its package lists."""
        for d in ("lists/partial", "cache/archives/partial"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        (self.root / "status").touch()
        (self.root / "sources.list").write_text(f"deb [arch={self.arch} signed-by={KEYRING}] {MIRROR} {self.release} main\n")
        _run(["apt-get", *self._opts(), "update"], f"apt-get update ({self.release}/{self.arch})")

    def depends(self, package: str) -> list[str]:
        """Direct ``Depends`` of the candidate version of ``package`` (names only)."""
        out = _run(["apt-cache", *self._opts(), "depends", package], f"apt-cache depends {package}").stdout
        return [m.group(1) for m in re.finditer(r"^\s+Depends: (\S+)", out, re.M)]

    def candidate(self, package: str) -> str:
        """The version apt would install of ``package``.

        Raises:
            GuestBuildError: when the release has no such package.
        """
        out = _run(["apt-cache", *self._opts(), "policy", package], f"apt-cache policy {package}").stdout
        m = re.search(r"Candidate: (\S+)", out)
        if not m or m.group(1) == "(none)":
            raise GuestBuildError(f"no package {package} for {self.arch} in Debian {self.release}")
        return m.group(1)

    def download(self, package: str, dest: Path) -> Path:
        """Download the candidate .deb of ``package`` into ``dest``; returns its path."""
        dest.mkdir(parents=True, exist_ok=True)
        _run(["apt-get", *self._opts(), "download", package], f"apt-get download {package}", cwd=dest)
        debs = sorted(dest.glob(f"{package}_*.deb"))
        if not debs:
            raise GuestBuildError(f"apt-get download {package}: no .deb in {dest}")
        return debs[-1]


def resolve_kernel(apt: PrivateApt, meta: str) -> tuple[str, str]:
    """(package, version) of the kernel image a meta package (e.g. ``linux-image-arm64``) pulls
    in for the release: its first ``linux-image-*`` dependency.

    Raises:
        GuestBuildError: when the meta package names no kernel image.
    """
    deps = [d for d in apt.depends(meta) if d.startswith("linux-image-")]
    if not deps:
        raise GuestBuildError(f"{meta} in Debian {apt.release} depends on no linux-image-* package")
    return deps[0], apt.candidate(deps[0])


def unpack_kernel(deb: Path, dest: Path) -> dict:
    """Unpack a linux-image .deb into ``dest`` and run ``depmod`` on its modules (the package's
    own postinst would; ours never runs). Returns ``{"release", "vmlinuz", "modules", "config"}``
    with paths inside ``dest``.

    Raises:
        GuestBuildError: when the package holds no kernel image.
    """
    _run(["dpkg-deb", "-x", str(deb), str(dest)], f"dpkg-deb -x {deb.name}")
    images = sorted((dest / "boot").glob("vmlinuz-*"))
    if not images:
        raise GuestBuildError(f"{deb.name}: no boot/vmlinuz-* inside")
    release = images[0].name[len("vmlinuz-"):]
    moddir = dest / "lib" / "modules" / release
    _run(["depmod", "-b", str(dest), release], f"depmod {release}")
    return {"release": release, "vmlinuz": str(images[0]), "modules": str(moddir),
            "config": str(dest / "boot" / f"config-{release}")}


def mmdebstrap_rootfs(arch: str, release: str, packages: list[str], dest: Path, say: Say) -> dict[str, str]:
    """Unpack ``packages`` and their dependencies for ``arch`` into the directory ``dest`` with
    ``mmdebstrap --variant=extract``. Returns {package: version} of everything unpacked (read from
    the downloaded .deb names, which are then removed).

    Raises:
        GuestBuildError: mmdebstrap missing or failing (its last lines in the message).
    """
    if not shutil.which("mmdebstrap"):
        raise GuestBuildError("mmdebstrap is not installed (Debian package mmdebstrap; make setup installs it)")
    say(f"mmdebstrap --variant=extract --arch={DEB_ARCH[arch]} {release}: {len(packages)} packages and their dependencies")
    _run(["mmdebstrap", "--variant=extract", f"--arch={DEB_ARCH[arch]}", "--skip=cleanup/apt",
          f"--include={','.join(packages)}", release, str(dest), MIRROR], "mmdebstrap", timeout=1800)
    archives = dest / "var" / "cache" / "apt" / "archives"
    versions = {}
    for deb in sorted(archives.glob("*.deb")):
        name, version, _ = deb.name.split("_", 2)
        versions[name] = version.replace("%3a", ":")
        deb.unlink()
    shutil.rmtree(dest / "var" / "lib" / "apt" / "lists", ignore_errors=True)
    return versions


def read_manifest(path: Path) -> dict | None:
    """A cache entry's manifest.json, or None when missing or unreadable (then it is rebuilt)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def write_manifest(path: Path, data: dict) -> None:
    """Write manifest.json last, atomically: an entry without it is incomplete and ignored."""
    tmp = Path(str(path) + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
