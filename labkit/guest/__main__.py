"""``python -m labkit.guest``: prepare or run a guest from the command line (a lab step is one
such command, so a reader can type it).

    python -m labkit.guest prepare --arch arm64 [--kernel-release bullseye] [--profile tools] [--refresh]
    python -m labkit.guest accel --arch arm64         (prints tcg or kvm: what a run would use here)
    python -m labkit.guest run --arch arm64 --kernel-release bullseye --dt dma-ranges \\
        --job DIR --out DIR --work DIR [--nvme IMG] [--timeout S] [--append ARGS] [--mem MIB] [--cpus N]

Exit status: ``run`` returns the job's own exit status; 1 when the guest could not be built or
gave no exit status; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import sys

from . import GuestBuildError, GuestRunError, GuestSpec, PROFILES, accelerator, cache_dir, prepare, run
from .qemu import ARCHS


def _spec_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", default="arm64", choices=sorted(ARCHS), help="guest architecture (default arm64)")
    p.add_argument("--release", default="bookworm", help="Debian release of the userspace (default bookworm)")
    p.add_argument("--kernel-release", default="bookworm",
                   help="Debian release whose kernel to boot: bookworm (6.1), bullseye (5.10); default bookworm")
    p.add_argument("--profile", default="tools", choices=sorted(PROFILES), help="userspace package set")
    p.add_argument("--cpus", type=int, default=2, help="vCPUs (default 2)")
    p.add_argument("--mem", type=int, default=2048, help="guest RAM in MiB (default 2048)")
    p.add_argument("--accel", default="auto", choices=["auto", "kvm", "tcg"],
                   help="auto: KVM when a bounded probe boot works, else TCG")
    p.add_argument("--refresh", action="store_true", help="resolve package versions again (downloads)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m labkit.guest", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="download and build what a guest boots from (cached)")
    _spec_args(p)
    r = sub.add_parser("run", help="boot a guest, run JOB/run in it, bring /out back")
    _spec_args(r)
    r.add_argument("--dt", choices=["plain", "dma-ranges"], help="arm64: boot with this device tree")
    r.add_argument("--append", default="", help="extra kernel command line")
    r.add_argument("--job", required=True, help="directory with the job's 'run' script (POSIX sh)")
    r.add_argument("--out", required=True, help="directory that receives the guest's /out")
    r.add_argument("--work", required=True, help="scratch directory for the run's disks and console log")
    r.add_argument("--nvme", help="raw image the guest sees as an NVMe drive")
    r.add_argument("--timeout", type=float, default=600, help="seconds before QEMU is stopped (default 600)")
    r.add_argument("--out-mib", type=int, default=256, help="size of the disk that carries /out back (MiB)")
    r.add_argument("--host-label", help="label of this host, recorded in the guest's emulation record")
    r.add_argument("--scratch-mib", type=int, default=0, help="an empty disk of this size for the job's scratch")
    c = sub.add_parser("accel", help="print the accelerator a run would use here (tcg or kvm)")
    _spec_args(c)
    c.add_argument("--work", default=None, help="scratch directory for a KVM probe boot")
    sub.add_parser("cache", help="print the cache directory")
    a = ap.parse_args(argv)
    if a.cmd == "cache":
        print(cache_dir())
        return 0
    try:
        spec = GuestSpec(arch=a.arch, release=a.release, kernel_release=a.kernel_release, profile=a.profile,
                         cpus=a.cpus, mem_mib=a.mem, accel=a.accel, dt=getattr(a, "dt", None),
                         append=getattr(a, "append", ""))
        spec.check()
    except ValueError as exc:
        print(f"labkit.guest: {exc}", file=sys.stderr)
        return 2
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
            print(f"kernel {info['kernel']['package']} {info['kernel']['version']}, userspace "
                  f"{len(info['rootfs']['packages'])} packages ({a.release}/{a.arch}), built in {info['built']} s")
            return 0
        info = run(spec, a.job, a.out, a.work, nvme_image=a.nvme, timeout=a.timeout, refresh=a.refresh,
                   out_mib=a.out_mib, host_label=a.host_label, scratch_mib=a.scratch_mib)
    except (GuestBuildError, GuestRunError, OSError) as exc:
        print(f"labkit.guest: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("labkit.guest: interrupted: QEMU stopped", file=sys.stderr)
        return 130
    print(f"guest {info['arch']} {info['accelerator']} {info['kernel_release']}: job exit {info['exit']}, "
          f"boot {info['boot_seconds']} s, total {info['seconds']} s", file=sys.stderr)
    return info["exit"]


if __name__ == "__main__":
    sys.exit(main())
