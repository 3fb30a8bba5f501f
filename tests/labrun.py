"""Running labs for real from tests: one quick run, interrupting a run mid-step, and
checking what a lab leaves behind (processes, namespaces, mounts, loop devices)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_lab(lab: str, *args: str, timeout: float = 300, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``labs/<lab>/run.sh ARGS`` to completion; returns the finished process (text output)."""
    return subprocess.run(["bash", str(ROOT / "labs" / lab / "run.sh"), *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})), stdin=subprocess.DEVNULL)


def interrupt_at(lab: str, marker: str, *args: str, sig: int = signal.SIGINT, after: float = 0.3,
                 timeout: float = 120) -> tuple[int, str, str]:
    """Start a lab, wait until its progress output contains ``marker``, wait ``after`` s,
    send ``sig`` to the lab's shell, and wait for it to exit.

    Returns (exit status, stderr text, scratch directory the lab announced).

    Raises:
        AssertionError: the marker never appeared (the step did not start).
    """
    proc = subprocess.Popen(["bash", str(ROOT / "labs" / lab / "run.sh"), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    seen = threading.Event()

    def reader():
        for line in proc.stderr:
            lines.append(line)
            if marker in line:
                seen.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    if not seen.wait(timeout):
        proc.kill()
        raise AssertionError(f"{lab}: marker {marker!r} never appeared; output:\n{''.join(lines)[-3000:]}")
    time.sleep(after)
    proc.send_signal(sig)
    try:
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    t.join(timeout=5)
    text = "".join(lines)
    scratch = ""
    for line in lines:
        if "scratch /" in line:
            scratch = line.rsplit("scratch ", 1)[1].strip()
    return rc, text, scratch


def processes_matching(text: str) -> list[str]:
    """Command lines of running processes that contain ``text`` (from /proc)."""
    found = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and str(os.getpid()) != p.name:
            found.append(f"{p.name}: {cmd}")
    return found


def netns_list() -> list[str]:
    """Names of network namespaces (``ip netns list``)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def links() -> list[str]:
    """Network interface names in the current namespace."""
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


def mounts_under(prefix: str) -> list[str]:
    """Mount points whose path starts with ``prefix`` (from /proc/self/mounts)."""
    return [l.split()[1] for l in Path("/proc/self/mounts").read_text().splitlines() if l.split()[1].startswith(prefix)]


def loop_devices_backed_by(prefix: str) -> list[str]:
    """Loop devices whose backing file path starts with ``prefix`` (``losetup -l -J``)."""
    out = subprocess.run(["losetup", "-l", "-J"], capture_output=True, text=True).stdout
    if not out.strip():
        return []
    return [d["name"] for d in json.loads(out)["loopdevices"] if (d.get("back-file") or "").startswith(prefix)]


def is_root() -> bool:
    return os.geteuid() == 0


def check_quick_result(result: dict, seconds: float, label: str = "test-quick") -> None:
    """The lab contract every quick run must meet: quick, labelled, under 2 minutes, and every
    step either ran as designed (with its command kept) or says why it was skipped.

    Raises:
        AssertionError: naming the first step or figure that breaks the contract.
    """
    assert result["run"]["quick"] is True and result["host"]["label"] == label
    assert seconds < 120, f"quick mode took {seconds:.0f} s (contract: under 2 minutes)"
    for step in result["steps"]:
        assert step["status"] in ("ok", "skipped"), step
        if step["status"] == "skipped":
            assert step["reason"], step
        else:
            assert step["command"], step
