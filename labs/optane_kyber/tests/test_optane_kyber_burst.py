"""labs/optane_kyber/burst.c: bursts on a fixed sub-second phase of CLOCK_MONOTONIC, and
errors that print no windows."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.parsers.jsonline import json_line

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def burst(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc not installed")
    exe = tmp_path_factory.mktemp("burst") / "burst"
    subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror", "-std=c11",
                    "-o", str(exe), str(ROOT / "labs" / "optane_kyber" / "burst.c")], check=True)
    return exe


def test_bursts_start_at_the_phase_and_last_the_busy_time(burst):
    proc = subprocess.run([str(burst), "-n", "2", "-b", "50", "-o", "100"], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0, proc.stderr
    out = json_line(proc.stdout, "burst")
    assert out["clock"] == "CLOCK_MONOTONIC" and (out["busy_ms"], out["phase_ms"]) == (50, 100)
    assert len(out["bursts"]) == 2 and out["iterations"] > 0
    (a0, b0), (a1, b1) = out["bursts"]
    for a, b in out["bursts"]:
        offset_ms = (a - math.floor(a)) * 1000
        assert 100 <= offset_ms < 250, "a burst starts at (or, woken late, just after) its phase"
        # the times are printed to the microsecond: 50 ms can come out as 0.049999... in binary
        assert b - a >= 0.050 - 1e-6, "it spins at least the busy time"
    assert math.floor(a1) == math.floor(a0) + 1, "one burst per second, in consecutive seconds"


def test_one_busy_second_fills_its_second_between_quiet_ones(burst):
    """`-n 1 -b 1000 -o 0 -q 1`: a whole second of CLOCK_MONOTONIC busy, never past its end (the
    heat map's column), with one quiet second slept through before it and one after it."""
    proc = subprocess.run([str(burst), "-n", "1", "-b", "1000", "-o", "0", "-q", "1"], capture_output=True, text=True,
                          timeout=10)
    assert proc.returncode == 0, proc.stderr
    out = json_line(proc.stdout, "burst")
    assert (out["busy_ms"], out["phase_ms"], out["quiet_s"]) == (1000, 0, 1)
    ((a, b),) = out["bursts"]
    second = math.floor(a)
    # it spins until the second's end, and stops at its first look at the clock after it (a
    # preempted look comes late: the bound is one 20 ms slice of the map, not a microsecond)
    assert second + 1.0 - 1e-6 <= b < second + 1.02, "the burst ends with its second"


@pytest.mark.parametrize("args", [["-n", "0"], ["-n", "x"], ["-b", "1000"], ["-b", "1001", "-o", "0"],
                                  ["-o", "900", "-b", "200"], ["-q", "61"], ["-q", "-1"], ["extra"], ["-z"]])
def test_bad_arguments_exit_2_without_output(burst, args):
    proc = subprocess.run([str(burst), *args], capture_output=True, text=True, timeout=5)
    assert proc.returncode == 2
    assert proc.stdout == "" and proc.stderr.strip()
