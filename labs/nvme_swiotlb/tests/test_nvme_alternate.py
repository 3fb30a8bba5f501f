"""labs/nvme_swiotlb/alternate.py, the guest's alternating reader, run on this host against two
files (fast tier): rounds, bytes and ratio as the lab's record.py reads them; bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "alternate.py"


def _file(path: Path, mib: int) -> Path:
    path.write_bytes(os.urandom(mib << 20))
    return path


def test_rounds_time_both_devices_and_skip_the_warmup(tmp_path):
    a, b = _file(tmp_path / "a.img", 2), _file(tmp_path / "b.img", 2)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--mib", "2", "--rounds", "3", "--warmup", "1", str(a), str(b)],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == 1 and "Invalid argument" in proc.stderr:
        pytest.skip(f"{tmp_path} takes no O_DIRECT: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["round"] for r in rows] == [1, 2, 3] and all(r["tool"] == "alternate" for r in rows)
    for r in rows:
        assert r["bytes"] == 2 << 20 and all(s > 0 for s in r["seconds"])
        assert r["mb_per_s"] == pytest.approx([r["bytes"] / s / 1e6 for s in r["seconds"]])
        assert r["ratio"] == pytest.approx(r["mb_per_s"][0] / r["mb_per_s"][1])


@pytest.mark.parametrize(("args", "code", "says"), [
    (["--mib", "0", "--rounds", "1", "a", "b"], 2, "at least 1"),
    (["--mib", "1", "a", "b"], 2, "--rounds"),
    (["--mib", "1", "--rounds", "1", "{tmp}/missing", "{tmp}/missing"], 1, "No such file"),
    (["--mib", "4", "--rounds", "1", "{small}", "{small}"], 1, "short read"),
])
def test_bad_input_is_refused(tmp_path, args, code, says):
    small = _file(tmp_path / "small.img", 1)
    argv = [a.format(tmp=tmp_path, small=small) for a in args]
    proc = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)
    if "Invalid argument" in proc.stderr:
        pytest.skip(f"{tmp_path} takes no O_DIRECT")
    assert proc.returncode == code and says in proc.stderr, proc.stderr
