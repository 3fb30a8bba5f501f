"""perf outputs: ``perf stat -x,`` CSV, and ``perf script`` → folded stacks and flame
graphs via inferno (https://github.com/jonhoo/inferno; Brendan Gregg's flame graphs).
We never fold or draw stacks ourselves."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .jsonline import ParseError


def perf_stat_csv(text: str) -> dict[str, dict]:
    """Parse ``perf stat -x,`` output (perf-stat(1), "CSV FORMAT").

    Returns ``{event: {"value": float|None, "unit": str, "supported": bool,
    "counted": bool, "raw": str}}``; ``value`` is None for ``<not supported>`` and
    ``<not counted>`` rows.
    """
    events = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        raw, unit, event = parts[0].strip(), parts[1].strip(), parts[2].strip()
        if not event:
            continue
        supported = raw != "<not supported>"
        counted = supported and raw != "<not counted>"
        try:
            value = float(raw) if counted else None
        except ValueError:
            continue
        events[event] = {"value": value, "unit": unit, "supported": supported, "counted": counted, "raw": raw}
    if not events:
        raise ParseError("no perf stat CSV rows")
    return events


def _inferno(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise FileNotFoundError(f"{tool} not found: install inferno (make setup runs cargo install --locked inferno)")
    return path


def fold(perf_script: Path, folded: Path) -> int:
    """Collapse ``perf script`` output into folded stacks with ``inferno-collapse-perf``.

    Returns the total weight of the folded file (sum of its counts): inferno weights each
    stack by perf's sample period, so for cpu-clock this is nanoseconds, not a sample count.

    Raises:
        FileNotFoundError: inferno missing; subprocess.CalledProcessError: inferno failed.
    """
    with open(perf_script, "rb") as src, open(folded, "wb") as dst:
        subprocess.run([_inferno("inferno-collapse-perf"), "--all"], stdin=src, stdout=dst, check=True)
    return folded_samples(Path(folded).read_text())


def folded_samples(text: str) -> int:
    """Total weight of folded stacks text (``frame;frame;... COUNT`` per line): samples, or
    sample periods when the folder weighted by period (inferno-collapse-perf does)."""
    return sum(int(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.strip())


def flamegraph(folded: Path, svg: Path, title: str, *, diff: bool = False, negate: bool = False,
               width: int = 1200) -> None:
    """Draw an interactive flame graph SVG (search, zoom) with ``inferno-flamegraph``.

    ``diff=True`` expects the two-count lines of ``inferno-diff-folded``; ``negate=True``
    switches a differential graph's hues (``--negate``), for a diff of the profiles taken in
    the other order (:func:`diff_folded`).
    """
    cmd = [_inferno("inferno-flamegraph"), "--title", title, "--width", str(width), "--minwidth", "0.2"]
    if not diff:
        cmd += ["--colors", "java", "--hash"]
    if negate:
        cmd.append("--negate")
    with open(folded, "rb") as src, open(svg, "wb") as dst:
        subprocess.run(cmd, stdin=src, stdout=dst, check=True)


def diff_folded(before: Path, after: Path, out: Path) -> None:
    """Differential folded stacks (``inferno-diff-folded -n before after``), for a diff flame
    graph: each line is a stack of ``after`` with its count in ``before`` and in ``after``; ``-n``
    scales ``before``'s counts to ``after``'s total, so that two recordings of different lengths
    (or sample counts) compare as shares, not as raw counts (Brendan Gregg, "Differential Flame
    Graphs", 2014: difffolded.pl -n). Frame widths are ``after``'s: a stack only ``before`` has
    does not show; swap the files and draw with ``inferno-flamegraph --negate`` to see those."""
    with open(out, "wb") as dst:
        subprocess.run([_inferno("inferno-diff-folded"), "-n", str(before), str(after)], stdout=dst, check=True)


def share_under(folded_text: str, frames: list[str]) -> float:
    """Fraction of samples whose stack contains any frame starting with one of ``frames``."""
    total = hit = 0
    for line in folded_text.splitlines():
        if not line.strip():
            continue
        stack, count = line.rsplit(" ", 1)
        n = int(count)
        total += n
        if any(f.startswith(p) for f in stack.split(";") for p in frames):
            hit += n
    return hit / total if total else 0.0
