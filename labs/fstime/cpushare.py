"""Print, in one line, what htop's CPU meters showed between two /proc/stat readings.

    python3 labs/fstime/cpushare.py FILE [PID]

FILE holds two snapshots as printed by ``labs/fstime/cpusample.sh PID SECONDS`` (the cpu
lines of /proc/stat and /proc/PID/stat, twice), or by ``cat /proc/stat /proc/PID/stat``
run twice.
For each CPU: the share of its time in user mode (user + nice), in the kernel (system +
irq + softirq), waiting for I/O, stolen by the hypervisor, and idle; then, for PID (if
given), its own user and system time as a share of one CPU over the same interval.
Method: proc(5), "/proc/stat" and "/proc/pid/stat"; parsing: labkit.parsers.procstat.

Exit status: 0 ok, 1 the file does not hold two snapshots (or not the PID), 2 bad usage.
"""

from __future__ import annotations

import sys

from labkit.parsers.jsonline import ParseError
from labkit.parsers.procstat import cpu_shares, elapsed_ticks, process_shares, snapshots


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if not 1 <= len(argv) <= 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print("usage: cpushare.py FILE [PID]", file=sys.stderr)
        return 2
    try:
        snaps = snapshots(open(argv[0]).read())
        if len(snaps) < 2:
            raise ParseError(f"{argv[0]}: one snapshot, need two")
        before, after = snaps[0], snaps[-1]
        shares = cpu_shares(before, after)
        parts = []
        for cpu in sorted((c for c in shares if c != "all"), key=lambda c: int(c[3:])):
            s = shares[cpu]
            extra = "".join(f" {k} {pct(s[k])}" for k in ("iowait", "steal") if s[k] >= 0.005)
            parts.append(f"{cpu.upper()} usr {pct(s['user'])} sys {pct(s['system'])}{extra} idle {pct(s['idle'])}")
        line = f"over {elapsed_ticks(before, after) / 100:.2f} s: " + " | ".join(parts)
        if len(argv) == 2:
            p = process_shares(before, after, int(argv[1]))
            line += (f" || {p['comm']} (pid {argv[1]}, state {p['states'][1]}): usr {pct(p['user'])}"
                     f" sys {pct(p['system'])} of one CPU")
    except (OSError, ParseError) as exc:
        print(f"cpushare.py: {exc}", file=sys.stderr)
        return 1
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
