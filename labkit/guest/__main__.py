"""``python -m labkit.guest`` (also ``labkit guest``): prepare, run or open a shell on a guest from
the command line (a lab step is one such command, so a reader can type it).

    labkit guest shell --arch arm64 --kernel-release bullseye --dt dma-ranges
    labkit guest run --arch arm64 --kernel-release bullseye --dt dma-ranges -- dd if=/dev/nvme0n1 of=/dev/null bs=1M count=8 iflag=direct
    labkit guest run --arch arm64 --kernel-release bullseye --dt dma-ranges \\
        --job DIR --out DIR --work DIR [--nvme IMG] [--timeout S] [--append ARGS] [--mem MIB] [--cpus N]
    labkit guest prepare --arch arm64 [--kernel-release bullseye] [--profile tools] [--refresh]
    labkit guest accel --arch arm64         (prints tcg or kvm: what a run would use here)
    labkit guest cache [--prune]            (the cache's folder and size; --prune removes it)

Every boot takes ``--kernel PATH`` (a ``linux-image-*.deb``, or an image with ``--modules DIR``,
or a folder holding both) instead of the release's kernel, and on arm64 ``--dt
plain|dma-ranges|wide`` (``wide``: the window widened to all RAM, the fix) or ``--dtb FILE`` (a
compiled device tree, booted as it is). ``shell`` and ``run -- CMD`` attach
a sparse scratch NVMe drive when given no ``--nvme``, and remove everything they made on exit.

Exit status: ``run`` returns the job's (or CMD's) exit status, ``shell`` the shell's; 1 when the
guest could not be built or gave no exit status, or the cache is in use; 2 on bad usage (one
line on stderr); 130 when interrupted (QEMU stopped, files removed).
"""

from __future__ import annotations

import argparse
import platform
import os
import re
import signal
import sys

from . import (DEVICE_TREES, Boot, CacheBusyError, GuestBuildError, GuestRunError, GuestSpec, PROFILES, accelerator, cache_dir,
               cache_usage, human_size, prepare, prune_cache, run, run_command, shell)
from .qemu import ARCHS


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line: ``labkit guest run: error: ... (see ... --help)``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", choices=sorted(ARCHS),
                   help="guest architecture (default: arm64 with --dt or --dtb, else the host's own when it is "
                        "one of these, so that KVM can run it; else arm64)")
    p.add_argument("--release", default="bookworm", help="Debian release of the userspace (default bookworm)")
    p.add_argument("--kernel-release", default="bookworm",
                   help="Debian release whose kernel to boot: bookworm (6.1), bullseye (5.10); default bookworm")
    p.add_argument("--kernel", metavar="PATH",
                   help="boot this kernel instead: a linux-image-*.deb, a kernel image (with --modules), or a "
                        "folder holding an image and lib/modules/<release>")
    p.add_argument("--modules", metavar="DIR", help="the modules folder of a --kernel image (lib/modules/<release>)")
    p.add_argument("--profile", default="tools", choices=sorted(PROFILES), help="userspace package set")
    p.add_argument("--cpus", type=int, default=2, help="vCPUs (default 2)")
    p.add_argument("--mem", type=int, default=2048, help="guest RAM in MiB (default 2048)")
    p.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"],
                   help="auto: KVM when a bounded probe boot works, else TCG")
    p.add_argument("--refresh", action="store_true", help="resolve package versions again (downloads)")


def _boot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dt", choices=list(DEVICE_TREES),
                   help="arm64: QEMU's own device tree (plain), it with a 1 GiB PCIe dma-ranges window "
                        "(dma-ranges), or that window widened to cover all RAM (wide: the fix)")
    p.add_argument("--dtb", metavar="FILE", help="arm64: boot this compiled device tree as it is (not with --dt)")
    p.add_argument("--append", default="", help="extra kernel command line")
    p.add_argument("--nvme", metavar="IMG", help="raw image the guest sees as an NVMe drive")


def default_arch(device_tree: bool, machine: str | None = None) -> str:
    """The guest architecture when ``--arch`` is not given: arm64 when a device tree is asked for
    (``--dt``/``--dtb`` are arm64's), else the host's own (``machine``, default
    ``platform.machine()``) when :data:`ARCHS` has it (KVM can then run the guest), else arm64."""
    machine = machine or platform.machine()
    if device_tree:
        return "arm64"
    return next((name for name, a in ARCHS.items() if a["host_arch"] == machine), "arm64")


def _cache_line() -> str:
    return f"cache {cache_dir()}: {human_size(cache_usage())} (labkit guest cache --prune removes it)"


def _parser(prog: str) -> _Parser:
    ap = _Parser(prog=prog, description="QEMU guests assembled from Debian packages: a shell on one, one command in "
                 "one, or a lab's job (labkit/guest).")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    p = sub.add_parser("prepare", help="download and build what a guest boots from (cached)")
    _spec_args(p)
    r = sub.add_parser("run", help="boot a guest and run JOB/run in it, or one command (run [options] -- CMD...)",
                       usage=f"{prog} run [options] (--job DIR --out DIR --work DIR | -- CMD...)")
    _spec_args(r)
    _boot_args(r)
    r.add_argument("--job", help="directory with the job's 'run' script (POSIX sh)")
    r.add_argument("--out", help="directory that receives the guest's /out (and guest.json)")
    r.add_argument("--work", help="scratch directory for the run's disks and console log "
                                  "(with -- CMD: a private folder is made in it, default $TMPDIR, and removed)")
    r.add_argument("--timeout", type=float, default=600, help="seconds before QEMU is stopped (default 600)")
    r.add_argument("--out-mib", type=int, default=256, help="size of the disk that carries /out back (MiB)")
    r.add_argument("--host-label", help="label of this host, recorded in the guest's emulation record")
    r.add_argument("--scratch-mib", type=int, default=0, help="an empty disk of this size for the job's scratch")
    r.add_argument("--drive", action="append", default=[], metavar="SERIAL=IMG",
                   help="attach raw image IMG read-only as a virtio disk with this serial (repeatable; "
                        "IMG may be the --nvme image: a control drive outside the PCIe host bridge)")
    sh = sub.add_parser("shell", help="boot a guest with a shell on this terminal (the NVMe drive attached, tracefs mounted)")
    _spec_args(sh)
    _boot_args(sh)
    sh.add_argument("--out", help="directory that receives the guest's /out (and guest.json)")
    sh.add_argument("--work", help="where the private folder of the boot is made (default $TMPDIR; removed)")
    sh.add_argument("--timeout", type=float, default=None, help="seconds before QEMU is stopped (default: none)")
    c = sub.add_parser("accel", help="print the accelerator a run would use here (tcg or kvm)")
    _spec_args(c)
    c.add_argument("--work", default=None, help="scratch directory for a KVM probe boot")
    k = sub.add_parser("cache", help="print the cache's folder and size")
    k.add_argument("--prune", action="store_true", help="remove the cache (everything is downloaded and built again)")
    return ap


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None, prog: str = "python -m labkit.guest") -> int:
    """Run the command line ``argv`` (default sys.argv[1:]); returns the exit status (see the
    module docstring). SIGTERM and SIGHUP end it as SIGINT does: QEMU stopped, files removed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    dashdash = "--" in argv
    if dashdash:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    ap = _parser(prog)
    a = ap.parse_args(argv)
    where = f"{prog} {a.cmd}"

    def usage(msg: str) -> int:
        print(f"{where}: error: {msg}", file=sys.stderr)
        return 2

    if a.cmd == "cache":
        if command:
            return usage("cache takes no command")
        if not a.prune:
            print(_cache_line())
            return 0
        try:
            freed = prune_cache()
        except ValueError as exc:
            return usage(str(exc))
        except CacheBusyError as exc:
            print(f"{where}: {exc}", file=sys.stderr)
            return 1
        print(f"removed {cache_dir()} ({human_size(freed)})" if freed else f"no cache at {cache_dir()}")
        return 0
    if command and a.cmd != "run":
        return usage(f"{a.cmd} takes no command after -- (run [options] -- CMD runs one)")
    if a.cmd == "run":
        if command and a.job:
            return usage("give --job DIR or -- CMD, not both")
        if dashdash and not command:
            return usage("nothing to run after --")
        if not command and not a.job:
            return usage("give --job DIR (with --out and --work), or -- CMD to run one command")
        if a.job and not (a.out and a.work):
            return usage(f"--job needs --out DIR and --work DIR (missing: "
                         f"{', '.join(o for o, v in (('--out', a.out), ('--work', a.work)) if not v)})")
    arch = a.arch or default_arch(bool(getattr(a, "dt", None) or getattr(a, "dtb", None)))
    try:
        spec = GuestSpec(arch=arch, release=a.release, kernel_release=a.kernel_release, profile=a.profile,
                         cpus=a.cpus, mem_mib=a.mem, accel=a.accel, dt=getattr(a, "dt", None),
                         dtb=getattr(a, "dtb", None), append=getattr(a, "append", ""),
                         kernel=a.kernel, modules=a.modules)
        spec.check()
        if getattr(a, "nvme", None) and not os.path.isfile(a.nvme):
            raise ValueError(f"--nvme {a.nvme}: no such file")
        drives = {}
        for d in getattr(a, "drive", []):
            serial, _, img = d.partition("=")
            if not re.fullmatch(r"[a-z][a-z0-9]{0,19}", serial) or not img:
                raise ValueError(f"--drive {d}: give SERIAL=IMG, SERIAL lowercase letters and digits (at most 20)")
            if serial in {"pcbroot", "pcbjob", "pcbout", "pcbmods", "pcbscratch"}:
                raise ValueError(f"--drive {d}: {serial} is a serial of the runner's own disks")
            if not os.path.isfile(img):
                raise ValueError(f"--drive {d}: no such file")
            drives[serial] = img
        if a.cmd == "shell" and not (sys.stdin.isatty() and sys.stdout.isatty()):
            raise ValueError("shell needs a terminal on stdin and stdout (to run one command: "
                             f"{prog} run [options] -- CMD)")
    except ValueError as exc:
        return usage(str(exc))
    old = {s: signal.signal(s, _interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if a.cmd == "accel":
            import tempfile
            with tempfile.TemporaryDirectory(prefix="pcb-accel.") as tmp:
                accel, reason = accelerator(spec, a.work or tmp)
            print(accel)
            print(f"labkit.guest: {accel}: {reason}", file=sys.stderr)
            return 0
        if a.cmd == "prepare":
            info = prepare(spec, refresh=a.refresh)
            print(f"kernel {info['kernel']['package']} {info['kernel']['version'] or ''} ({info['kernel']['release']}), "
                  f"userspace {len(info['rootfs']['packages'])} packages ({a.release}/{arch}), built in {info['built']} s")
            print(_cache_line())
            return 0
        if a.cmd == "shell":
            info = shell(spec, nvme_image=a.nvme, out_dir=a.out, work_dir=a.work, timeout=a.timeout, refresh=a.refresh)
        elif command:
            info = run_command(spec, command, nvme_image=a.nvme, out_dir=a.out, work_dir=a.work, timeout=a.timeout,
                               refresh=a.refresh, drives=drives)
        else:
            info = run(spec, Boot(a.job, a.out, a.work, timeout=a.timeout, nvme_image=a.nvme, drives=drives,
                                  out_mib=a.out_mib, scratch_mib=a.scratch_mib),
                       refresh=a.refresh, host_label=a.host_label)
    except ValueError as exc:
        return usage(str(exc))
    except (GuestBuildError, GuestRunError, OSError) as exc:
        print(f"labkit.guest: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("labkit.guest: interrupted: QEMU stopped", file=sys.stderr)
        return 130
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    print(f"guest {info['arch']} {info['accelerator']} {info['kernel_release']}: "
          f"{'shell' if a.cmd == 'shell' else 'job'} exit {info['exit']}, "
          f"boot {info['boot_seconds']} s, total {info['seconds']} s", file=sys.stderr)
    if info.get("cache_built"):
        print(_cache_line(), file=sys.stderr)
    return info["exit"]


if __name__ == "__main__":
    sys.exit(main())
