"""What a lab's terminal says while it runs, beyond its step lines: the time left before each
group (from the lab's previous result on this host) and, after each group, the figures it
measured (the lab's own ``record.py`` run on the partial run directory).

Both are best effort: a lab that has never run here gets no estimate, and a collector that
needs a later group's data prints no figures; neither ever fails the run. ``labs/lib/lab.sh``
calls them through ``python -m labkit.run.progress`` (:func:`main`), which imports little: it runs
between a lab's groups.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

from .. import formats

MAX_LINES = 8
"""Figures printed after a group at most (the rest is counted: "… and 12 more")."""


def group_seconds(previous: Path, quick: bool) -> dict[str, float]:
    """``{group: seconds}`` of the result file ``previous`` when it was a run in the same mode
    (quick or full): each group's step seconds, scaled so that they add up to the run's wall time
    (servers starting, pauses and parsing are spread in proportion); ``{}`` without such a result."""
    try:
        r = json.loads(Path(previous).read_text())
    except (OSError, ValueError):
        return {}
    if bool(r.get("run", {}).get("quick")) != bool(quick):
        return {}
    out: dict[str, float] = {}
    for s in r.get("steps", []):
        out[s["group"]] = out.get(s["group"], 0.0) + float(s.get("seconds") or 0.0)
    total, wall = sum(out.values()), float(r.get("run", {}).get("duration_s") or 0.0)
    scale = wall / total if total > 0 and wall > total else 1.0  # servers, pauses, parsing: spread evenly
    return {g: secs * scale for g, secs in out.items()}


def _case_text(case: dict, varying: list[str]) -> str:
    """``pin=same-cpu msize=1024`` from the case keys that differ within the group."""
    return " ".join(f"{k}={formats.fmt_case_value(case.get(k))}" for k in varying if k in case)


def group_figures(lab: str, lab_dir: Path, run_dir: Path, group: str, quick: bool) -> list[str]:
    """Lines ``"pinned same-cpu: median 17.6 µs, n = 10"`` for the measurements that the steps
    of ``group`` produced so far, from the lab's collector run on the partial ``run_dir``
    (its output silenced). ``[]`` when the collector cannot run on partial data."""
    from ..record import Run, collect
    try:
        run = Run(lab, Path(run_dir), quick, Path(lab_dir))
        steps = {s["name"] for s in run.steps if s["group"] == group}
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            collect(run, Path(lab_dir))
    except Exception:  # noqa: BLE001 - best effort by design: the full record runs at the end
        return []
    ms = [m for m in run.measurements if m.get("step") in steps]
    varying: dict[str, list[str]] = {}  # per metric: the case keys whose values differ
    for metric in {m["metric"] for m in ms}:
        same = [m for m in ms if m["metric"] == metric]
        keys = list(dict.fromkeys(k for m in same for k in m["case"]))
        varying[metric] = [k for k in keys if len({json.dumps(m["case"].get(k)) for m in same}) > 1]
    lines = []
    for m in ms[:MAX_LINES]:
        case = _case_text(m["case"], varying[m["metric"]])
        lines.append(f"{m['metric']}{' ' + case if case else ''}: median {formats.fmt(m['median'])} "
                     f"{formats.unit(m['unit'])}, n = {m['n']}")
    if len(ms) > MAX_LINES:
        lines.append(f"… and {len(ms) - MAX_LINES} more (labkit show {lab}, once recorded)")
    return lines


def main(argv: list[str] | None = None) -> int:
    """``eta --lab L --quick 0|1 --previous FILE``: ``group<TAB>seconds`` lines;
    ``figures --lab L --lab-dir D --run-dir R --group G --quick 0|1``: the group's figures.
    Both print nothing when they cannot tell; exit 0 (2 on bad usage)."""
    p = argparse.ArgumentParser(prog="python -m labkit.run.progress", description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["eta", "figures"])
    p.add_argument("--lab", required=True)
    p.add_argument("--quick", choices=["0", "1"], default="0")
    p.add_argument("--previous", default="", help="eta: the lab's previous result file in this out directory")
    p.add_argument("--lab-dir", default="")
    p.add_argument("--run-dir", default="")
    p.add_argument("--group", default="")
    a = p.parse_args(argv)
    quick = a.quick == "1"
    if a.what == "eta":
        for group, secs in group_seconds(Path(a.previous), quick).items():
            print(f"{group}\t{secs:.0f}")
    else:
        for line in group_figures(a.lab, Path(a.lab_dir), Path(a.run_dir), a.group, quick):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
