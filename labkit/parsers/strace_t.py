"""``strace -T`` call lines: one system call per line with the time spent in it.

strace(1): "-T: Show the time spent in system calls. This records the time
difference between the beginning and the end of each system call." A line looks
like (``-s 0`` prints no string contents)::

    read(0, ""..., 1048576)                 = 1048576 <0.001305>
    read(3, 0x7ffd..., 4096)                = -1 EAGAIN (Resource temporarily unavailable) <0.000004>

With ``-f`` a ``[pid N]`` or ``N`` prefix may precede the call; ``-t``/``-tt``/``-ttt``
add a timestamp. Unfinished/resumed pairs (``<unfinished ...>``) and signal or exit
lines (``--- SIG...``, ``+++ exited ...``) are skipped.
"""

from __future__ import annotations

import re

from .jsonline import ParseError

_CALL = re.compile(
    r"^(?:\[pid\s+(?P<pid1>\d+)\]\s+|(?P<pid2>\d+)\s+)?(?:(?P<ts>\d+(?::\d+:\d+)?(?:\.\d+)?)\s+)?"
    r"(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+|0x[0-9a-f]+|\?)"
    r"(?:\s+(?P<errno>E[A-Z0-9]+)\s+\([^)]*\))?(?:\s+\([^)]*\))?\s+<(?P<dur>\d+\.\d+)>\s*$")


def strace_calls(text: str, syscall: str | None = None) -> list[dict]:
    """Every completed system call line of ``strace -T`` output.

    Returns dicts ``{"pid": int|None, "name", "args" (raw text), "first_arg" (str),
    "ret": int|None, "errno": str|None, "seconds": float}``, in file order;
    only ``syscall`` if given.

    Raises:
        ParseError: no call line with a ``<duration>`` at all (strace ran without -T?).
    """
    calls = []
    for line in text.splitlines():
        m = _CALL.match(line.strip())
        if not m:
            continue
        if syscall and m["name"] != syscall:
            continue
        ret = m["ret"]
        calls.append({
            "pid": int(m["pid1"] or m["pid2"]) if (m["pid1"] or m["pid2"]) else None,
            "name": m["name"],
            "args": m["args"],
            "first_arg": m["args"].split(",", 1)[0].strip(),
            "ret": None if ret == "?" else int(ret, 16) if ret.startswith("0x") else int(ret),
            "errno": m["errno"],
            "seconds": float(m["dur"]),
        })
    if not calls:
        raise ParseError(f"no strace -T call lines{' for ' + syscall if syscall else ''} (was -T given?)")
    return calls


def log_histogram(values_us: list[float], per_octave: int = 1, lo: float = 1.0) -> list[tuple[float, int]]:
    """Counts of ``values_us`` in logarithmic bins: ``[(upper_edge_us, count), ...]``.

    Edges are ``lo * 2**(k / per_octave)`` (``per_octave=1``: powers of two; 4: four
    bins per doubling); a value v falls in the first bin whose edge is >= v. Bins run
    from the smallest to the largest non-empty one (empty bins between are kept, as 0).
    Edges are rounded to 4 significant digits.
    """
    if not values_us:
        return []
    if per_octave < 1:
        raise ValueError("per_octave must be >= 1")
    top = max(values_us)
    edges = []
    k = 0
    while True:
        e = lo * 2 ** (k / per_octave)
        edges.append(e)
        if e >= top:
            break
        k += 1
    counts = [0] * len(edges)
    for v in values_us:
        for i, edge in enumerate(edges):
            if v <= edge:
                counts[i] += 1
                break
    first = next(i for i, c in enumerate(counts) if c)
    return [(float(f"{e:.4g}"), c) for e, c in zip(edges[first:], counts[first:])]
