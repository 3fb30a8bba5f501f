"""The guest's QEMU command line, built and checked without booting (labkit/guest/command.py):
machine, accelerator and CPU, vCPUs and memory, kernel, initramfs and kernel command line,
device tree, and the disks the initramfs's init finds by their virtio serial; then that a boot
runs exactly that command (QEMU itself replaced by a recorder: nothing starts).

The paths are file names made up here; the values checked are the spec's own and QEMU's option
syntax (QEMU's system emulation manual), not measurements."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labkit import guest
from labkit.guest import command, images, qemu
from labkit.guest.qemu import ARCHS


def option(cmd: list[str], name: str) -> list[str]:
    """Every value given to QEMU option ``name`` (``-m 2048M`` → ["2048M"])."""
    return [cmd[i + 1] for i, word in enumerate(cmd[:-1]) if word == name]


def drives(cmd: list[str]) -> dict[str, dict[str, str]]:
    """``-drive`` options by id: {"file": ..., "format": "raw", "readonly": "on", ...}."""
    out = {}
    for value in option(cmd, "-drive"):
        opts = dict(kv.split("=", 1) for kv in value.split(","))
        out[opts["id"]] = opts
    return out


def devices(cmd: list[str]) -> dict[str, tuple[str, dict[str, str]]]:
    """``-device`` by drive id: (driver, its options)."""
    out = {}
    for value in option(cmd, "-device"):
        driver, *rest = value.split(",")
        opts = dict(kv.split("=", 1) for kv in rest)
        out[opts["drive"]] = (driver, opts)
    return out


def init_serials() -> set[str]:
    """The serials the initramfs's init looks for (``disk SERIAL``)."""
    return set(re.findall(r"\$\(disk (\w+)\)", images.INIT)) | set(re.findall(r"! disk (\w+)", images.INIT))


def images_of(tmp_path: Path, profile: str) -> dict:
    """The image paths a boot is given (what ``guest.prepare`` returns for the profile)."""
    return {"vmlinuz": str(tmp_path / "kernels" / "vmlinuz-6.1.0"), "initrd": str(tmp_path / "kernels" / "initrd.img"),
            "modules_img": str(tmp_path / "kernels" / "modules.img"),
            "rootfs_img": str(tmp_path / "rootfs" / profile / "rootfs.img")}


def build(spec: guest.GuestSpec, accel: str, prep: dict, tmp_path: Path, **kw) -> list[str]:
    return command.boot_command(spec.arch, accel, spec.cpus, spec.mem_mib, kernel=prep["vmlinuz"], initrd=prep["initrd"],
                                rootfs=prep["rootfs_img"], modules=prep["modules_img"], job_tar=tmp_path / "job.tar",
                                out_img=tmp_path / "out.img", append=spec.append, **kw)


CASES = [(arch, profile, accel) for arch in sorted(ARCHS) for profile in sorted(guest.PROFILES) for accel in ("kvm", "tcg")]


@pytest.mark.parametrize("arch,profile,accel", CASES, ids=lambda v: str(v))
def test_the_command_line_of_each_profile(arch, profile, accel, tmp_path):
    spec = guest.GuestSpec(arch=arch, profile=profile, append="swiotlb=force")
    spec.check()
    prep = images_of(tmp_path, profile)
    cmd = build(spec, accel, prep, tmp_path)
    a = ARCHS[arch]
    assert cmd[0] == a["qemu"]
    assert option(cmd, "-machine") == [a["machine"]]
    assert option(cmd, "-accel") == [accel]
    assert option(cmd, "-cpu") == ["host" if accel == "kvm" else a["cpu_tcg"]]
    assert option(cmd, "-smp") == [str(spec.cpus)] and spec.cpus == 2         # the spec's defaults
    assert option(cmd, "-m") == [f"{spec.mem_mib}M"] and spec.mem_mib == 2048  # MiB
    for flag in ("-nodefaults", "-no-user-config", "-no-reboot"):
        assert cmd.count(flag) == 1, flag
    assert option(cmd, "-display") == ["none"]
    assert option(cmd, "-kernel") == [prep["vmlinuz"]] and option(cmd, "-initrd") == [prep["initrd"]]
    assert option(cmd, "-append") == [f"console={a['console']} panic=-1 quiet loglevel=3 rdinit=/init swiotlb=force"]
    assert option(cmd, "-serial") == ["stdio"] and "-chardev" not in cmd
    assert "-dtb" not in cmd
    d, dev = drives(cmd), devices(cmd)
    assert list(d) == ["pcbroot", "pcbmods", "pcbjob", "pcbout"]
    assert d["pcbroot"]["file"] == prep["rootfs_img"] and d["pcbmods"]["file"] == prep["modules_img"]
    assert d["pcbjob"]["file"] == str(tmp_path / "job.tar") and d["pcbout"]["file"] == str(tmp_path / "out.img")
    for serial, opts in d.items():
        assert (opts["if"], opts["format"]) == ("none", "raw"), serial
        assert dev[serial] == (a["blk"], {"drive": serial, "serial": serial}), serial
        assert "file.locking" not in opts, serial
    # the root image is never written (snapshot); modules and job are read-only; /out is written
    assert d["pcbroot"].get("snapshot") == "on" and "readonly" not in d["pcbroot"]
    assert d["pcbmods"].get("readonly") == "on" and d["pcbjob"].get("readonly") == "on"
    assert "readonly" not in d["pcbout"] and "snapshot" not in d["pcbout"]
    assert "snapshot" not in d["pcbmods"] and "snapshot" not in d["pcbjob"]
    # every disk init looks for is given, except the optional scratch disk
    assert init_serials() - set(d) == {"pcbscratch"}
    assert "nvme" not in " ".join(cmd)


def test_the_kernel_command_line_without_an_append_ends_with_rdinit():
    for arch, a in ARCHS.items():
        assert command.kernel_cmdline(arch) == f"console={a['console']} panic=-1 quiet loglevel=3 rdinit=/init"
        assert command.kernel_cmdline(arch, "a=1 b") == f"console={a['console']} panic=-1 quiet loglevel=3 rdinit=/init a=1 b"
    bare = command.boot_command("arm64", "tcg", 1, 512, kernel="k", initrd="i", rootfs="r", modules="m", job_tar="j",
                                out_img="o")                                    # no append given: none added
    assert option(bare, "-append") == ["console=ttyAMA0 panic=-1 quiet loglevel=3 rdinit=/init"]


def test_the_optional_parts_device_tree_scratch_extra_disks_nvme(tmp_path):
    spec = guest.GuestSpec(arch="arm64", cpus=4, mem_mib=3072)
    prep = images_of(tmp_path, spec.profile)
    cmd = build(spec, "tcg", prep, tmp_path, dtb=tmp_path / "dma-ranges.dtb", scratch=tmp_path / "scratch.img",
                drives={"pcbz": tmp_path / "z.img", "pcba": tmp_path / "a.img"}, nvme_image=tmp_path / "nvme.img")
    assert option(cmd, "-smp") == ["4"] and option(cmd, "-m") == ["3072M"]
    assert option(cmd, "-append") == ["console=ttyAMA0 panic=-1 quiet loglevel=3 rdinit=/init"]
    assert option(cmd, "-dtb") == [str(tmp_path / "dma-ranges.dtb")]
    d, dev = drives(cmd), devices(cmd)
    # extra disks after the system disks, by serial; read-only and unlocked (one file may back two)
    assert list(d) == ["pcbroot", "pcbmods", "pcbjob", "pcbout", "pcbscratch", "pcba", "pcbz", "nvm"]
    assert "readonly" not in d["pcbscratch"] and "snapshot" not in d["pcbscratch"]
    assert d["pcbscratch"]["file"] == str(tmp_path / "scratch.img")
    for serial in ("pcba", "pcbz"):
        assert d[serial]["readonly"] == "on" and d[serial]["file.locking"] == "off"
        assert dev[serial] == ("virtio-blk-device", {"drive": serial, "serial": serial})
    assert d["pcba"]["file"] == str(tmp_path / "a.img")
    assert d["nvm"] == {"file": str(tmp_path / "nvme.img"), "if": "none", "id": "nvm", "format": "raw"}
    assert dev["nvm"] == ("nvme", {"drive": "nvm", "serial": "pcbnvme"})
    assert init_serials() <= set(d)


def test_an_interactive_boot_puts_the_console_on_the_terminal(tmp_path):
    spec = guest.GuestSpec(arch="x86_64")
    cmd = build(spec, "kvm", images_of(tmp_path, "tools"), tmp_path, interactive=True)
    assert option(cmd, "-serial") == ["chardev:pcbcon"]
    assert option(cmd, "-chardev") == ["stdio,id=pcbcon,mux=on,signal=off"]
    assert option(cmd, "-mon") == ["chardev=pcbcon,mode=readline"]
    assert "stdio" not in option(cmd, "-serial")


@pytest.mark.parametrize("profile", sorted(guest.PROFILES))
def test_a_boot_runs_the_built_command(profile, tmp_path, monkeypatch):
    """guest.boot_prepared hands QEMU the builder's command line (and writes it to qemu.cmd); QEMU is
    replaced by a recorder, so nothing starts."""
    seen = []

    def fake_boot(cmd, timeout, console_log, say, **kw):
        seen.append(list(cmd))
        return {"exit": None, "seconds": 0.0, "boot_seconds": None, "qemu_status": 1, "timed_out": False}
    monkeypatch.setattr(qemu, "boot", fake_boot)
    spec = guest.GuestSpec(arch="arm64", profile=profile, cpus=3, mem_mib=1536, append="swiotlb=force")
    prep = images_of(tmp_path, profile)
    job = tmp_path / "job"
    job.mkdir()
    (job / "run").write_text("true\n")
    work = tmp_path / "work"
    nvme = tmp_path / "nvme.img"
    res = guest.boot_prepared(spec, prep, guest.Boot(job, tmp_path / "out", work, "tcg", timeout=30, nvme_image=nvme, scratch_mib=16,
                                             drives={"pcbextra": tmp_path / "extra.img"}), lambda m: None)
    assert res["device_tree"] is None
    want = command.boot_command("arm64", "tcg", 3, 1536, kernel=prep["vmlinuz"], initrd=prep["initrd"],
                                rootfs=prep["rootfs_img"], modules=prep["modules_img"], job_tar=work / "job.tar",
                                out_img=work / "out.img", append="swiotlb=force", scratch=work / "scratch.img",
                                drives={"pcbextra": tmp_path / "extra.img"}, nvme_image=nvme)
    assert seen == [want]
    assert (work / "qemu.cmd").read_text() == " ".join(want) + "\n"
    # the run's disks are removed whatever ended it
    assert not (work / "job.tar").exists() and not (work / "out.img").exists() and not (work / "scratch.img").exists()
