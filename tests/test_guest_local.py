"""A reader's own kernel (labkit.guest.local), without a boot (fast tier): the forms --kernel
takes, the architecture check, and the cache entry built from a .deb, on small packages made here
with dpkg-deb (a fake arm64 image header, a module tree with nothing in it)."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.guest import debian, local

pytestmark = pytest.mark.skipif(any(not shutil.which(t) for t in ("dpkg-deb", "depmod", "mke2fs")),
                                reason="dpkg-deb, depmod or mke2fs not installed")
REL = "4.19.0-27-arm64"


def arm64_image(path: Path, compress: bool = False) -> Path:
    """A file with the arm64 Image header's magic (Documentation/arch/arm64/booting.rst)."""
    head = bytearray(0x40)
    head[0x38:0x3C] = b"ARM\x64"
    data = bytes(head) + b"\0" * 4096
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def bzimage(path: Path) -> Path:
    head = bytearray(0x400)
    head[0x202:0x206] = b"HdrS"
    path.write_bytes(bytes(head))
    return path


def module_tree(root: Path, release: str = REL) -> Path:
    d = root / "lib" / "modules" / release
    (d / "kernel").mkdir(parents=True)
    (d / "modules.order").write_text("")
    (d / "modules.builtin").write_text("kernel/drivers/nvme/host/nvme.ko\n")
    return d


def fake_deb(tmp: Path, arch: str = "arm64", package: str = f"linux-image-{REL}") -> Path:
    src = tmp / "pkg"
    (src / "DEBIAN").mkdir(parents=True)
    (src / "boot").mkdir()
    arm64_image(src / "boot" / f"vmlinuz-{REL}", compress=True)
    (src / "boot" / f"config-{REL}").write_text("CONFIG_SWIOTLB=y\n")
    module_tree(src)
    (src / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: 4.19.320-1\nArchitecture: {arch}\n"
                                            "Maintainer: test <t@example.org>\nDescription: test kernel\n")
    deb = tmp / f"{package}_4.19.320-1_{arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(src), str(deb)], check=True, capture_output=True)
    shutil.rmtree(src)
    return deb


def test_image_arch_reads_the_header(tmp_path):
    assert local.image_arch(arm64_image(tmp_path / "Image")) == "arm64"
    assert local.image_arch(arm64_image(tmp_path / "Image.gz", compress=True)) == "arm64"
    assert local.image_arch(bzimage(tmp_path / "bzImage")) == "x86_64"
    (tmp_path / "vmlinux").write_bytes(b"\x7fELF" + b"\0" * 100)
    assert local.image_arch(tmp_path / "vmlinux") is None


def test_forms_of_kernel(tmp_path):
    img = arm64_image(tmp_path / "Image")
    mods = module_tree(tmp_path / "root")
    for given in (mods, mods.parent, tmp_path / "root"):      # lib/modules/<rel>, lib/modules, the root
        lk = local.locate(img, given)
        assert lk.kind == "image" and lk.image == img and lk.moddir == mods
    pkg = tmp_path / "unpacked"
    module_tree(pkg)
    (pkg / "boot").mkdir()
    arm64_image(pkg / "boot" / f"vmlinuz-{REL}")
    lk = local.locate(pkg)
    assert lk.image == pkg / "boot" / f"vmlinuz-{REL}" and lk.moddir.name == REL
    with pytest.raises(ValueError, match="give its modules folder"):
        local.locate(img)
    with pytest.raises(ValueError, match="holds no kernel modules"):
        local.locate(img, tmp_path / "unpacked" / "boot")
    module_tree(tmp_path / "root", "5.10.0-32-arm64")
    with pytest.raises(ValueError, match="several kernels"):
        local.locate(img, tmp_path / "root")
    arm64_image(pkg / "boot" / "vmlinuz-5.10.0-32-arm64")
    with pytest.raises(ValueError, match="several kernel images"):
        local.locate(pkg)


def test_architecture_is_checked(tmp_path):
    local.check_arch(local.locate(fake_deb(tmp_path)), "arm64")
    with pytest.raises(ValueError, match="is for amd64, the guest is arm64"):
        local.check_arch(local.locate(fake_deb(tmp_path / "x", arch="amd64")), "arm64")
    with pytest.raises(ValueError, match="not a linux-image"):
        local.check_arch(local.locate(fake_deb(tmp_path / "y", package="linux-headers-4.19")), "arm64")
    mods = module_tree(tmp_path / "root")
    with pytest.raises(ValueError, match="is an x86_64 kernel image, the guest is arm64"):
        local.check_arch(local.locate(bzimage(tmp_path / "bzImage"), mods), "arm64")
    (tmp_path / "bad.deb").write_text("not a package\n")
    with pytest.raises(ValueError, match="not a Debian package"):
        local.check_arch(local.locate(tmp_path / "bad.deb"), "arm64")


def test_a_deb_becomes_a_cache_entry(tmp_path):
    deb = fake_deb(tmp_path)
    lk = local.locate(deb)
    dest = tmp_path / "cache" / "kernels" / "arm64" / "local-x"
    man = local.build(lk, "arm64", dest, lambda m: None)
    assert man["package"] == f"linux-image-{REL}" and man["version"] == "4.19.320-1" and man["release"] == REL
    assert man["local"] == {"kind": "deb", "path": str(deb), "sha256": local.fingerprint(lk)}
    assert man["vmlinuz"] == f"tree/boot/vmlinuz-{REL}" and local.image_arch(dest / man["vmlinuz"]) == "arm64"
    assert (dest / man["modules"] / "modules.dep").exists()          # depmod ran
    assert (dest / "modules.img").stat().st_size > 0
    assert debian.read_manifest(dest / "manifest.json") == man


def test_an_image_and_modules_become_a_cache_entry(tmp_path):
    img = arm64_image(tmp_path / "Image")
    mods = module_tree(tmp_path / "root")
    (mods / "build").symlink_to("/nonexistent/linux-build-tree")
    lk = local.locate(img, mods)
    before = local.fingerprint(lk)
    dest = tmp_path / "entry"
    man = local.build(lk, "arm64", dest, lambda m: None)
    assert (man["package"], man["version"], man["release"]) == ("local", None, REL)
    assert (dest / man["vmlinuz"]).read_bytes() == img.read_bytes()
    assert (dest / man["modules"] / "modules.dep").exists() and not (dest / man["modules"] / "build").is_symlink()
    assert not (mods / "modules.dep").exists()                        # the reader's folder is not written
    (mods / "kernel" / "extra.ko").write_bytes(b"x")
    assert local.fingerprint(lk) != before                            # another module tree: another entry
