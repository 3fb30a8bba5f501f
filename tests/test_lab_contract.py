"""The lab contract's command line, once for every lab (labs/*/run.sh): bad usage is one
error plus usage on stderr, exit 2, and starts nothing; --help exits 0 and lists every group
the lab declares with lab_group."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from labrun import run_lab

ROOT = Path(__file__).resolve().parent.parent
LABS = sorted(p.parent.name for p in ROOT.glob("labs/*/run.sh"))
BAD = [["--bogus"], ["--only", "nosuchgroup"], ["--host", "bad label"], ["--out"], ["--scratch", "/nonexistent/x"]]


def scratch_dirs(lab: str) -> set[str]:
    return {p.name for p in Path("/tmp").glob(f"pcb-{lab}.*")}


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a))
@pytest.mark.parametrize("lab", LABS)
def test_bad_usage_exits_2_and_starts_nothing(lab, args, tmp_path):
    out = tmp_path / "out"
    before = scratch_dirs(lab)
    proc = run_lab(lab, *args, *([] if args == ["--out"] else ["--out", str(out)]), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("run.sh: "), proc.stderr
    assert "usage:" in proc.stderr
    assert not out.exists(), "bad usage must not start a run"
    assert scratch_dirs(lab) == before


@pytest.mark.parametrize("lab", LABS)
def test_help_lists_every_group(lab):
    groups = re.findall(r"^lab_group\s+(\S+)", (ROOT / "labs" / lab / "run.sh").read_text(), re.M)
    assert groups, f"{lab} declares no groups"
    proc = run_lab(lab, "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--quick" in proc.stdout
    for g in groups:
        assert re.search(rf"^\s+{re.escape(g)}\s", proc.stdout, re.M), g
