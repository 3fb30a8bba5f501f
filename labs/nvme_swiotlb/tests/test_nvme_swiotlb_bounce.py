"""Tests for labs/nvme_swiotlb/bounce.c, the bounce-buffer model: usage and exit codes, the
JSON lines, and that its numbers follow from its own counts. Compiled once with -Werror;
runs on a small file in tmp_path (O_DIRECT on the test machine's filesystem)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "bounce.c"
CFLAGS = ["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE"]


@pytest.fixture(scope="module")
def bounce(tmp_path_factory):
    exe = tmp_path_factory.mktemp("bounce") / "bounce"
    p = subprocess.run([os.environ.get("CC", "gcc"), *CFLAGS, "-o", str(exe), str(SRC)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stderr == "", "warnings from the compiler:\n" + p.stderr
    return str(exe)


@pytest.fixture(scope="module")
def datafile(tmp_path_factory):
    f = tmp_path_factory.mktemp("bounce-data") / "data.img"
    f.write_bytes(os.urandom(8 * 2**20 + 12345))      # not a whole number of blocks: reads wrap
    return f


def run(exe, *args, timeout=60):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)


def o_direct_supported(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


@pytest.mark.parametrize("args", [[], ["-f"], ["-x"], ["-f", "x", "-b", "1000"], ["-f", "x", "-b", "4k,,"],
                                  ["-f", "x", "-b", "0"], ["-f", "x", "-m", "copy"], ["-f", "x", "-n", "0"],
                                  ["-f", "x", "-t", "abc"], ["-f", "x", "extra"], ["-f", "x", "-b", "128m"]])
def test_bad_usage_exits_2_without_numbers(bounce, args):
    p = run(bounce, *args)
    assert p.returncode == 2, (args, p.stderr)
    assert p.stdout == ""
    assert "usage: bounce" in p.stderr


def test_help(bounce):
    p = run(bounce, "-h")
    assert p.returncode == 0 and p.stdout.startswith("usage: bounce")


def test_missing_file_and_small_file_exit_1(bounce, tmp_path):
    p = run(bounce, "-f", str(tmp_path / "nope"))
    assert p.returncode == 1 and p.stdout == "" and "No such file" in p.stderr
    small = tmp_path / "small"
    small.write_bytes(b"x" * 4096)
    if not o_direct_supported(small):
        pytest.skip("no O_DIRECT on the test filesystem")
    p = run(bounce, "-f", str(small), "-b", "8k")
    assert p.returncode == 1 and p.stdout == "" and "less than the largest block" in p.stderr


def test_json_lines_follow_from_counts(bounce, datafile):
    if not o_direct_supported(datafile):
        pytest.skip("no O_DIRECT on the test filesystem")
    p = run(bounce, "-f", str(datafile), "-b", "4k,64k,1m", "-n", "3", "-t", "0.02")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(l) for l in p.stdout.splitlines()]
    assert [(r["block"], r["mode"]) for r in rows] == [(b, m) for b in (4096, 65536, 2**20) for m in ("direct", "bounce")]
    for r in rows:
        assert r["tool"] == "bounce" and r["unit"] == "MB/s" and r["file"] == str(datafile)
        assert len(r["samples"]) == len(r["ios"]) == 3
        assert all(s > 0 for s in r["samples"]) and all(n >= 1 for n in r["ios"])
        assert r["median"] == pytest.approx(statistics.median(r["samples"]), abs=1e-3)
        assert r["min"] == min(r["samples"]) and r["max"] == max(r["samples"])
        # each sample lasts at least -t: bytes/rate >= 0.02 s
        for s, n in zip(r["samples"], r["ios"]):
            assert n * r["block"] / (s * 1e6) >= 0.02 * 0.999
        if r["mode"] == "bounce":
            assert len(r["copy_ns_per_io"]) == 3 and all(c > 0 for c in r["copy_ns_per_io"])
        else:
            assert "copy_ns_per_io" not in r
    assert p.stderr.count("bounce: block") == 6


def test_one_mode_only(bounce, datafile):
    if not o_direct_supported(datafile):
        pytest.skip("no O_DIRECT on the test filesystem")
    p = run(bounce, "-f", str(datafile), "-b", "16k", "-n", "1", "-t", "0.01", "-m", "bounce")
    assert p.returncode == 0, p.stderr
    (row,) = [json.loads(l) for l in p.stdout.splitlines()]
    assert row["mode"] == "bounce" and row["block"] == 16384


def test_source_has_no_architecture_specific_code():
    """bounce.c must build for aarch64 too: no x86 intrinsics or instructions."""
    text = SRC.read_text()
    for needle in ("immintrin", "x86intrin", "__x86_64__", "rdtsc", "_mm_", "cpuid"):
        assert needle not in text, needle
