"""`labkit guest` without a boot (fast tier): bad input is one line and exit 2 before anything is
built or started; the cache's size and --prune on a temporary cache; the jobs that `run -- CMD`
and `shell` write; the device-tree record of a boot."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labkit import guest
from labkit.guest import __main__ as guest_main
from labkit.guest import images

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures" / "guest"
needs_dtc = pytest.mark.skipif(not shutil.which("dtc"), reason="dtc not installed (make setup installs it)")


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path):
    """``labkit guest ARGS`` in this process with the guest cache at ``tmp_path/cache`` and a
    proxy that refuses every connection (a command that wrongly got as far as building fails at
    once instead of downloading); returns (exit status, stdout, stderr)."""
    monkeypatch.setenv("PCB_GUEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")

    def call(*args: str, cache: Path | None = None) -> tuple[int, str, str]:
        if cache is not None:
            monkeypatch.setenv("PCB_GUEST_CACHE", str(cache))
        capsys.readouterr()
        try:
            rc = guest_main.main(list(args), prog="labkit guest")
        except SystemExit as exc:   # argparse's own errors
            rc = exc.code
        out = capsys.readouterr()
        return rc, out.out, out.err
    return call


@pytest.fixture
def dtb(tmp_path) -> Path:
    """QEMU virt's device tree (fixture), compiled."""
    if not shutil.which("dtc"):
        pytest.skip("dtc not installed")
    out = tmp_path / "virt.dtb"
    images.dts_to_dtb((FIX / "virt-2cpu-2048m.dts").read_text(), out)
    return out


BAD = [
    (["run", "--dt", "wider", "--", "true"], "invalid choice: 'wider'"),
    (["run", "--dt", "plain", "--dtb", "{dtb}", "--", "true"], "--dt and --dtb"),
    (["run", "--dtb", "{tmp}/missing.dtb", "--", "true"], "no such file"),
    (["run", "--dtb", "{text}", "--", "true"], "not a compiled device tree"),
    (["run", "--arch", "x86_64", "--dtb", "{dtb}", "--", "true"], "needs an arm64 guest"),
    (["run", "--arch", "x86_64", "--dt", "plain", "--", "true"], "needs an arm64 guest"),
    (["run", "--arch", "sparc", "--", "true"], "invalid choice: 'sparc'"),
    (["run"], "--job DIR"),
    (["run", "--"], "nothing to run after --"),
    (["run", "--job", "{tmp}", "--", "true"], "not both"),
    (["run", "--job", "{tmp}"], "missing: --out, --work"),
    (["run", "--kernel", "{tmp}/missing.deb", "--", "true"], "no such file"),
    (["run", "--kernel", "{text}", "--", "true"], "give its modules folder"),
    (["run", "--modules", "{tmp}", "--", "true"], "--modules goes with --kernel"),
    (["run", "--nvme", "{tmp}/missing.img", "--", "true"], "no such file"),
    (["run", "--drive", "{tmp}/missing.img", "--", "true"], "give SERIAL=IMG"),
    (["run", "--drive", "Ctl=/dev/null", "--", "true"], "give SERIAL=IMG"),
    (["run", "--drive", "pcbout={text}", "--", "true"], "a serial of the runner's own disks"),
    (["run", "--drive", "pcbctl={tmp}/missing.img", "--", "true"], "no such file"),
    (["run", "--mem", "lots", "--", "true"], "invalid int value"),
    (["shell", "--dt", "dma-ranges"], "needs a terminal"),
    (["shell", "--", "ls"], "takes no command"),
    (["cache", "--", "ls"], "takes no command"),
    (["nonsense"], "invalid choice"),
]


@needs_dtc
@pytest.mark.parametrize("args,words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, dtb, cli, args, words):
    text = tmp_path / "notes.txt"
    text.write_text("not a kernel, not a device tree\n")
    args = [a.format(tmp=tmp_path, dtb=dtb, text=text) for a in args]
    rc, out, err = cli(*args)
    assert rc == 2, (rc, err)
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"labkit guest {args[0]}: error: " if args[0] != "nonsense" else "labkit guest: error: ")
    assert words in err
    assert not (tmp_path / "cache").exists()   # nothing was built


@pytest.mark.parametrize("argv,prefix", [
    (["-m", "labkit", "guest", "run", "--dt", "wider", "--", "true"], "labkit guest run: error:"),
    (["-m", "labkit.guest", "run", "--dt", "wider", "--", "true"], "python -m labkit.guest run: error:"),
    (["-m", "labkit", "guest", "shell"], "labkit guest shell: error: shell needs a terminal"),
])
def test_both_command_lines_refuse_in_one_line(argv, prefix):
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(prefix)


def fake_cache(root: Path, mib: int = 3) -> Path:
    """A guest cache's layout with ``mib`` MiB of data written and a 1 GiB sparse image."""
    (root / "kernels" / "arm64" / "k").mkdir(parents=True)
    (root / "rootfs" / "r").mkdir(parents=True)
    (root / ".lock").touch()
    (root / "index.json").write_text("{}\n")
    (root / "kernels" / "arm64" / "k" / "modules.img").write_bytes(os.urandom(mib << 20))
    with open(root / "rootfs" / "r" / "rootfs.img", "wb") as f:
        f.truncate(1 << 30)
    return root


def test_cache_size_is_what_the_files_take_on_disk(tmp_path, cli):
    cache = fake_cache(tmp_path / "cache")
    used = guest.cache_usage(cache)
    assert 3 << 20 <= used < (3 << 20) + (1 << 20)   # the sparse GiB takes (almost) nothing
    assert guest.human_size(used) == "3.0 MiB"
    assert guest.human_size(0) == "0 B" and guest.human_size(1536) == "1.5 KiB"
    assert guest.human_size(int(2.94 * (1 << 30))) == "2.9 GiB"
    assert guest.cache_usage(tmp_path / "none") == 0
    assert cli("cache", cache=cache) == (0, f"cache {cache}: 3.0 MiB (labkit guest cache --prune removes it)\n", "")


def test_prune_removes_the_cache(tmp_path, cli):
    cache = fake_cache(tmp_path / "cache")
    assert cli("cache", "--prune", cache=cache) == (0, f"removed {cache} (3.0 MiB)\n", "")
    assert not cache.exists() and tmp_path.exists()
    assert cli("cache", "--prune", cache=cache) == (0, f"no cache at {cache}\n", "")


def test_prune_leaves_a_folder_that_is_not_a_cache(tmp_path, cli):
    cache = fake_cache(tmp_path / "cache")
    (cache / "thesis.tex").write_text("mine\n")
    rc, _, err = cli("cache", "--prune", cache=cache)
    assert rc == 2 and err.count("\n") == 1, err
    assert "thesis.tex" in err
    assert (cache / "thesis.tex").exists() and (cache / "index.json").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    assert guest.prune_cache(plain) == 0 and plain.exists()   # no .lock, no index.json: not a cache


def test_prune_waits_for_a_build_to_finish(tmp_path, cli):
    cache = fake_cache(tmp_path / "cache")
    with open(cache / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)            # as prepare() holds it while it builds
        rc, _, err = cli("cache", "--prune", cache=cache)
    assert rc == 1 and "a build is using the cache" in err
    assert (cache / "index.json").exists()


def test_cache_size_is_printed_after_a_build(tmp_path, monkeypatch, capsys):
    cache = fake_cache(tmp_path / "cache")
    monkeypatch.setenv("PCB_GUEST_CACHE", str(cache))
    line = f"cache {cache}: 3.0 MiB (labkit guest cache --prune removes it)"
    kernel = {"package": "linux-image-5.10.0-32-arm64", "version": "5.10.223-1", "release": "5.10.0-32-arm64"}
    monkeypatch.setattr(guest_main, "prepare", lambda spec, refresh=False: {
        "kernel": kernel, "rootfs": {"packages": {"dash": "0.5.12-2"}}, "built": 12.0, "new": ["rootfs/r"]})
    assert guest_main.main(["prepare", "--arch", "arm64"], prog="labkit guest") == 0
    assert capsys.readouterr().out.splitlines()[-1] == line
    record = {"arch": "arm64", "accelerator": "tcg", "kernel_release": "5.10.0-32-arm64", "exit": 0,
              "boot_seconds": 9.0, "seconds": 11.0}
    for built, printed in ((["rootfs/r"], True), ([], False)):
        monkeypatch.setattr(guest_main, "run_command", lambda *a, **k: {**record, "cache_built": built})
        assert guest_main.main(["run", "--", "true"], prog="labkit guest") == 0
        assert (line in capsys.readouterr().err) == printed


def test_run_returns_the_commands_exit_status(monkeypatch, capsys):
    record = {"arch": "arm64", "accelerator": "tcg", "kernel_release": "6.1.0-50-arm64", "exit": 7,
              "boot_seconds": 9.0, "seconds": 11.0, "cache_built": []}
    seen = {}

    def fake(spec, command, **kw):
        seen.update(spec=spec, command=command, **kw)
        return record

    monkeypatch.setattr(guest_main, "run_command", fake)
    argv = ["run", "--dt", "dma-ranges", "--kernel-release", "bullseye", "--", "sh", "-c", "exit 7", "--", "x"]
    assert guest_main.main(argv, prog="labkit guest") == 7
    assert seen["command"] == ["sh", "-c", "exit 7", "--", "x"]        # only the first -- ends the options
    assert seen["spec"].dt == "dma-ranges" and seen["spec"].kernel_release == "bullseye"
    assert seen["nvme_image"] is None                                   # run_command attaches a scratch drive


def test_command_job_passes_every_word_unchanged(tmp_path):
    words = ["printf", "[%s]\\n", "a b", "it's", "$HOME", "*", "`id`", "", "-- x"]
    job = guest.command_job(words)
    last = job.rstrip("\n").splitlines()[-1]
    assert last.endswith(" </dev/null") and "mount -t tracefs" in job
    assert shlex.split(last) == words + ["</dev/null"]
    out = subprocess.run(["sh", "-c", last], capture_output=True, text=True, cwd=tmp_path).stdout
    assert out.splitlines() == ["[a b]", "[it's]", "[$HOME]", "[*]", "[`id`]", "[]", "[-- x]"]
    with pytest.raises(ValueError):
        guest.command_job([])


def test_job_scripts_are_valid_sh(tmp_path):
    for arch, tty in (("arm64", "/dev/ttyAMA0"), ("x86_64", "/dev/ttyS0")):
        shell = guest.shell_job(arch, 40, 132, "xterm-256color")
        assert f"busybox setsid -c \"$@\" <{tty} >{tty}" in shell
        assert f"stty -F {tty} rows 40 cols 132" in shell and 'exit $rc' in shell
        for text in (shell, guest.command_job(["dd", "if=/dev/nvme0n1"])):
            (tmp_path / "run").write_text(text)
            check = subprocess.run(["sh", "-n", str(tmp_path / "run")], capture_output=True, text=True)
            assert check.returncode == 0, check.stderr


def test_scratch_nvme_is_sparse(tmp_path):
    img = guest.scratch_nvme(tmp_path / "nvme.img")
    assert img.stat().st_size == guest.SCRATCH_NVME_MIB << 20
    assert img.stat().st_blocks * 512 < 1 << 20


def test_device_tree_record_names_the_tree_booted(tmp_path, dtb):
    work = tmp_path / "work"
    work.mkdir()
    images.dtb_with_property(dtb, tmp_path / "window.dtb", guest.PCIE_PATH, "dma-ranges", guest.DMA_WINDOW)
    wide = "0x2000000 0x00 0x40000000 0x00 0x40000000 0x00 0x80000000"
    images.dtb_with_property(dtb, work / "dma-ranges.dtb", guest.PCIE_PATH, "dma-ranges", wide)
    for spec, name, origin, path, ranges in (
            (guest.GuestSpec(dtb=str(dtb)), "virt.dtb", "file", dtb, None),
            (guest.GuestSpec(dtb=str(tmp_path / "window.dtb")), "window.dtb", "file", tmp_path / "window.dtb",
             guest.DMA_WINDOW),
            # A tree already in the work directory under the --dt name is booted as it is (how
            # the nvme lab boots its widened tree); the record says so, and which window it has.
            (guest.GuestSpec(dt="dma-ranges"), "dma-ranges", "work-dir", work / "dma-ranges.dtb", wide)):
        spec.check()
        booted, rec = guest.device_tree(spec, work, "tcg")
        assert booted == path.resolve() or booted == path
        assert rec == {"name": name, "origin": origin, "path": str(booted),
                       "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "pcie_dma_ranges": ranges}
    assert guest.device_tree(guest.GuestSpec(), work, "tcg") == (None, None)


def test_property_cells_reads_the_nodes_own_property(dtb, tmp_path):
    assert images.property_cells(dtb, guest.PCIE_PATH, "dma-ranges") is None
    assert images.property_cells(dtb, guest.PCIE_PATH, "bus-range") == "0x00 0xff"
    assert images.property_cells(dtb, "/pcie@deadbeef", "dma-ranges") is None
    nested = tmp_path / "nested.dtb"
    images.dts_to_dtb("/dts-v1/;\n/ {\n\tbus {\n\t\treg = <0x02>;\n\t\tchild {\n\t\t\treg = <0x01>;\n\t\t};\n\t};\n};\n",
                      nested)
    assert images.property_cells(nested, "/bus", "reg") == "0x02"
    assert images.property_cells(nested, "/bus/child", "reg") == "0x01"
    bad = tmp_path / "bad.dtb"
    bad.write_bytes(b"not a tree")
    with pytest.raises(guest.GuestBuildError, match="fdtget"):
        images.property_cells(bad, "/", "reg")


def test_labkit_passes_guest_through():
    from labkit import cli
    assert "labkit guest shell|run" in cli.__doc__
    helped = subprocess.run([sys.executable, "-m", "labkit", "guest", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert helped.returncode == 0 and "{prepare,run,shell,accel,cache}" in helped.stdout


def test_the_default_architecture_is_the_hosts_unless_a_device_tree_is_asked_for():
    """Without --arch a guest runs the host's architecture (KVM can run it), arm64 when --dt or
    --dtb asks for a device tree, and arm64 on a host architecture the runner has no guest for."""
    from labkit.guest.__main__ import default_arch
    assert default_arch(False, "x86_64") == "x86_64"
    assert default_arch(False, "aarch64") == "arm64"
    assert default_arch(True, "x86_64") == "arm64"
    assert default_arch(False, "riscv64") == "arm64"
