"""arm64 correctness without an arm64 machine: every lab C program cross-compiled with
aarch64-linux-gnu-gcc and run under qemu-aarch64-static, for its flags, output format and
error paths. Timings under emulation are meaningless: nothing here is recorded as a result."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
PROGRAMS = sorted(ROOT.glob("labs/*/*.c"))

pytestmark = pytest.mark.skipif(not (CC and QEMU), reason="gcc-aarch64-linux-gnu and qemu-user-static not installed")


@pytest.fixture(scope="module")
def arm_bin(tmp_path_factory):
    out = tmp_path_factory.mktemp("arm64")
    built = {}
    for src in PROGRAMS:
        exe = out / src.stem
        proc = subprocess.run([CC, "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-std=c11", "-D_GNU_SOURCE",
                               "-o", str(exe), str(src), "-lm"], capture_output=True, text=True)
        built[src.stem] = (exe, proc)
    return built


def run(exe, *args, timeout=60, **kw):
    return subprocess.run([QEMU, str(exe), *args], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.mark.parametrize("src", PROGRAMS, ids=lambda p: p.stem)
def test_compiles_for_aarch64(arm_bin, src):
    exe, proc = arm_bin[src.stem]
    assert proc.returncode == 0, proc.stderr
    assert "ARM aarch64" in subprocess.run(["file", str(exe)], capture_output=True, text=True).stdout or exe.exists()


@pytest.mark.parametrize("src", PROGRAMS, ids=lambda p: p.stem)
def test_help_and_bad_flag_under_qemu(arm_bin, src):
    exe, _ = arm_bin[src.stem]
    assert run(exe, "--help").returncode == 0
    bad = run(exe, "--no-such-flag")
    assert bad.returncode == 2, bad.stderr
    assert "usage" in bad.stderr.lower()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not (ROOT / "labs/lat_tcp/lat_tcp.c").exists(), reason="no lat_tcp lab")
def test_lat_tcp_protocol_and_errors_under_qemu(arm_bin):
    exe, _ = arm_bin["lat_tcp"]
    port = str(_free_port())
    nosrv = run(exe, "-N", "2", "-t", "0.01", "-p", port, "127.0.0.1")
    assert nosrv.returncode == 1 and nosrv.stdout == "" and "microseconds" not in nosrv.stderr
    server = subprocess.Popen([QEMU, str(exe), "-s", "-p", port], stderr=subprocess.PIPE, text=True)
    try:
        assert "listening" in server.stderr.readline()
        c = run(exe, "-m", "64", "-N", "3", "-t", "0.02", "-p", port, "127.0.0.1")
        assert c.returncode == 0, c.stderr
        j = json.loads(c.stdout)
        assert j["msize"] == 64 and len(j["samples"]) == 3 and j["min"] <= j["median"] <= j["max"]
        assert re.fullmatch(r"TCP latency using 127\.0\.0\.1: [\d.]+ microseconds\n", c.stderr)
        assert run(exe, "-S", "-p", port, "127.0.0.1").returncode == 0
        assert server.wait(timeout=10) == 0
    finally:
        if server.poll() is None:
            server.kill()


@pytest.mark.skipif(not (ROOT / "labs/fstime/fstime.c").exists(), reason="no fstime lab")
def test_fstime_output_and_cleanup_under_qemu(arm_bin, tmp_path):
    exe, _ = arm_bin["fstime"]
    # short priming (-p) and copy (-t): the phases' default lengths are tested natively (test_fstime_program.py)
    p = run(exe, "-c", "-t", "0.3", "-p", "0.25", "-s", "0", "-b", "1024", "-m", "100", "-d", str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    assert lines and all(l["bytes"] % 1024 == 0 for l in lines)
    assert re.search(r"COUNT\|[\d.]+\|0\|KBps", p.stderr)
    assert list(tmp_path.iterdir()) == []
    assert run(exe, "-b", "100", "-d", str(tmp_path)).returncode == 3
