"""Parsers on real arm64 outputs, captured in an arm64 QEMU guest (tests/fixtures/arm64, each
with the .cmd that made it): lscpu's JSON, perf stat without PMU counters, perf script stacks
(kernel frames resolve on arm64; user frames of Debian's binaries, built without frame
pointers, do not)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from labkit.run import probe
from labkit.parsers import perf

FIX = Path(__file__).resolve().parent / "fixtures" / "arm64"


def test_lscpu_json_names_the_arm64_core():
    got = probe.parse_lscpu_json((FIX / "lscpu-J.json").read_text())
    assert got["vendor"] == "ARM"
    assert got["models"] == ["Cortex-A72"]
    # the same core as /proc/cpuinfo's part number (0xd08 is Cortex-A72)
    assert "CPU part\t: 0xd08" in (FIX / "proc-cpuinfo.txt").read_text()


def test_lscpu_json_rejects_other_text():
    with pytest.raises(ValueError):
        probe.parse_lscpu_json((FIX / "proc-cpuinfo.txt").read_text())
    with pytest.raises(ValueError):
        probe.parse_lscpu_json('{"cpus": []}')


def test_perf_stat_without_pmu_on_arm64():
    rows = perf.perf_stat_csv((FIX / "perf-stat-instructions.csv").read_text())
    assert rows["instructions"]["counted"] is False


@pytest.mark.skipif(not shutil.which("inferno-collapse-perf"), reason="inferno not installed (make setup)")
def test_arm64_perf_script_folds_with_kernel_frames(tmp_path):
    folded = tmp_path / "dd.folded"
    total = perf.fold(FIX / "perf-script-dd.txt", folded)
    text = folded.read_text()
    samples = (FIX / "perf-script-dd.txt").read_text().count(" cpu-clock:")
    assert total == samples * 1001001  # inferno weights cpu-clock samples by their period (ns)
    assert "el0_svc_[k]" in text and "invoke_syscall_[k]" in text   # arm64 syscall entry, kernel side
    assert all(line.startswith("dd;") for line in text.splitlines())


def test_lscpu_json_gives_the_cpu_signature():
    """Family, model and stepping as lscpu prints them: an arm64 core has no family."""
    got = probe.parse_lscpu_json((FIX / "lscpu-J.json").read_text())
    assert got["signature"] == "model 3, stepping r0p3"
