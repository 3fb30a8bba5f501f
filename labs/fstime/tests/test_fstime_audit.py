"""The fstime lab's auditframes.py on real folded stacks of a copy loop recorded before and after
audit was enabled (tests/fixtures/fstime, each with its .cmd). Whether audit had been enabled
before a run, as the probe reads it, is tests/test_probe_audit.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labkit.parsers.perf import share_under

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"


def auditframes(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "labs" / "fstime" / "auditframes.py"), *args],
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})


def test_auditframes_lists_audit_functions_with_their_shares():
    path = FIX / "fstime" / "copy-xfs-on-tmpfs.folded"
    folded = path.read_text()
    p = auditframes(str(path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    names = [line.split(":")[0] for line in lines]
    assert {"__audit_syscall_exit", "audit_reset_context"} <= set(names)
    shares = [float(line.rsplit(" in ", 1)[1].split("%")[0]) for line in lines]
    assert shares == sorted(shares, reverse=True)
    for name, share in zip(names, shares):
        assert share == pytest.approx(100 * share_under(folded, [name + "_[k]"]), abs=0.05)
    total = 100 * share_under(folded, ["audit_", "__audit_"])
    assert p.stderr.startswith(f"{total:.1f}% of the samples")


def test_auditframes_prints_nothing_for_a_copy_loop_without_audit():
    p = auditframes(str(FIX / "fstime" / "copy-tmpfs-audit-never-enabled.folded"))
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert p.stderr.startswith("0.0% of the samples") and "no audit context" in p.stderr


def test_auditframes_usage_and_errors(tmp_path):
    h = auditframes("--help")
    assert h.returncode == 0 and "auditframes.py FOLDED" in h.stdout
    assert auditframes().returncode == 2
    assert auditframes("a", "b").returncode == 2
    assert auditframes(str(tmp_path / "missing")).returncode == 1
    empty = tmp_path / "empty.folded"
    empty.write_text("")
    assert auditframes(str(empty)).returncode == 1
