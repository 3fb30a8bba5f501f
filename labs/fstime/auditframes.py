"""List the kernel audit functions found in the folded stacks of a copy phase.

    python3 labs/fstime/auditframes.py FOLDED

FOLDED holds folded stacks (``frame;frame;... WEIGHT`` per line) as written by
``labkit flame --folded`` (inferno-collapse-perf --all: kernel frames end in ``_[k]``,
weights are sample periods). For each audit function on some stack (a frame whose name
starts with ``audit_`` or ``__audit_``) it prints one line on standard output: the
function and the share of the samples that have it on the stack, largest first. Standard
output stays empty when no sample has an audit function on its stack, which is what a
process started before audit was ever enabled on this boot shows: the kernel then gives
it no audit context, and its system calls never enter audit code. The total share goes
to standard error in both cases. Shares: labkit.parsers.perf.share_under.

Exit status: 0 ok (with or without audit frames), 1 the file holds no samples, 2 bad usage.
"""

from __future__ import annotations

import sys
from pathlib import Path

from labkit.parsers.perf import folded_samples, share_under

PREFIXES = ["audit_", "__audit_"]


def audit_functions(folded: str) -> list[str]:
    """Distinct frames of ``folded`` that start with an audit prefix, in first-seen order."""
    seen: dict[str, None] = {}
    for line in folded.splitlines():
        if line.strip():
            for frame in line.rsplit(" ", 1)[0].split(";"):
                if any(frame.startswith(p) for p in PREFIXES):
                    seen.setdefault(frame)
    return list(seen)


def main(argv: list[str]) -> int:
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) != 1:
        print("usage: auditframes.py FOLDED", file=sys.stderr)
        return 2
    try:
        folded = Path(argv[0]).read_text()
    except OSError as exc:
        print(f"auditframes.py: {exc}", file=sys.stderr)
        return 1
    if not folded_samples(folded):
        print(f"auditframes.py: {argv[0]} holds no samples", file=sys.stderr)
        return 1
    shares = sorted(((share_under(folded, [f]), f) for f in audit_functions(folded)), reverse=True)
    for share, frame in shares:
        name = frame.removesuffix("_[k]")
        print(f"{name}: on the stack in {100 * share:.1f}% of the samples")
    total = share_under(folded, PREFIXES)
    print(f"{100 * total:.1f}% of the samples have an audit function on the stack"
          + ("" if total else ": the process has no audit context (audit had not been enabled on this boot"
             " when it started, or a task,never rule excluded it)"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
