"""Direct reads of two block devices in alternation, each read timed on its own: the NVMe drive
and a control drive, 1 MiB at a time, so that both see the same moment of an emulator whose
speed drifts within a boot (what guest_job.sh runs in the plain and widened boots).

    python3 alternate.py --mib MIB --rounds N [--warmup W] DEVICE CONTROL

W rounds (default 1) run first and are not printed: the first round after boot reads slower.
Each round reads the first MIB MiB of both devices with O_DIRECT (``os.preadv`` into one
page-aligned buffer of the block size), block i of one then block i of the other, the order
swapped at every block; only the read calls are timed (``time.perf_counter_ns``), not the loop
around them. Prints one JSON line per round: ``{"tool": "alternate", "round", "bytes" (per
device), "seconds" [device, control], "mb_per_s" [device, control] (10^6 B/s), "ratio" (device
MB/s / control MB/s)}``. Exit status 2 on bad arguments, 1 when a device cannot be opened or
reads short.
"""
from __future__ import annotations

import argparse
import json
import mmap
import os
import sys
import time


def rounds(paths: tuple[str, str], mib: int, count: int, block: int = 1 << 20, warmup: int = 0):
    """Yield one dict per round (see the module docstring), after ``warmup`` rounds that are
    not yielded. ``paths``: (device, control); ``mib``: MiB read from each per round; ``block``:
    bytes per read (a multiple of the devices' logical block size, as O_DIRECT needs).

    Raises:
        OSError: a device cannot be opened or read (O_DIRECT refused, a short read).
    """
    buf = mmap.mmap(-1, block)                    # page-aligned, as O_DIRECT needs
    fds = [os.open(p, os.O_RDONLY | os.O_DIRECT) for p in paths]
    try:
        blocks = mib * (1 << 20) // block
        for r in range(1 - warmup, count + 1):
            ns = [0, 0]
            for i in range(blocks):
                for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                    t0 = time.perf_counter_ns()
                    got = os.preadv(fds[k], [buf], i * block)
                    ns[k] += time.perf_counter_ns() - t0
                    if got != block:
                        raise OSError(f"{paths[k]}: short read at {i * block} ({got} of {block} bytes)")
            nbytes = blocks * block
            mbs = [nbytes / (t / 1e9) / 1e6 for t in ns]
            if r < 1:
                continue
            yield {"tool": "alternate", "round": r, "bytes": nbytes, "seconds": [t / 1e9 for t in ns],
                   "mb_per_s": mbs, "ratio": mbs[0] / mbs[1]}
    finally:
        for fd in fds:
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="alternate.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, required=True, help="MiB read from each device per round")
    ap.add_argument("--rounds", type=int, required=True, help="rounds (one JSON line each)")
    ap.add_argument("--warmup", type=int, default=1, help="rounds read first and not printed (default 1)")
    ap.add_argument("device")
    ap.add_argument("control")
    a = ap.parse_args(argv)
    if a.mib < 1 or a.rounds < 1 or a.warmup < 0:
        ap.error("--mib and --rounds must be at least 1, --warmup at least 0")
    try:
        for line in rounds((a.device, a.control), a.mib, a.rounds, warmup=a.warmup):
            print(json.dumps(line), flush=True)
    except OSError as exc:
        print(f"alternate.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
