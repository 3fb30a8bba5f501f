"""Parsers of the fstime lab on real captured outputs (tests/fixtures/procstat, auditctl,
fstime; each with the .cmd that made it): /proc/stat snapshots, auditctl -s / -l, the
folded stacks of a copy phase, and the lab's cpushare.py and audit_exec.sh front ends."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.parsers.auditctl import audit_config, audit_rules, audit_status
from labkit.parsers.jsonline import ParseError
from labkit.parsers.perf import share_under
from labkit.parsers.procstat import cpu_shares, elapsed_ticks, process_shares, snapshots

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures"


def fixture(tool: str, name: str) -> str:
    path = FIX / tool / name
    assert (path.parent / (path.stem + ".cmd")).exists(), f"{path} has no .cmd file"
    return path.read_text()


def pid_in(text: str) -> int:
    return next(int(line.split()[0]) for line in text.splitlines() if line[:1].isdigit())


# ---- /proc/stat ------------------------------------------------------------------------

def test_two_snapshots_with_every_cpu_and_the_process():
    text = fixture("procstat", "fstime-copy-tmpfs.txt")
    snaps = snapshots(text)
    assert len(snaps) == 2
    ncpu = sum(1 for line in text.splitlines() if line.startswith("cpu") and not line.startswith("cpu ")) // 2
    for s in snaps:
        assert set(s.cpus) == {"cpu"} | {f"cpu{i}" for i in range(ncpu)}
        assert len(s.cpus["cpu"]) == 10          # user .. guest_nice
    pid = pid_in(text)
    assert snaps[0].procs[pid].comm == "fstime"
    assert snaps[1].procs[pid].stime >= snaps[0].procs[pid].stime


def test_cpu_shares_add_up_and_follow_the_fields():
    text = fixture("procstat", "fstime-copy-tmpfs.txt")
    before, after = snapshots(text)
    shares = cpu_shares(before, after)
    assert "all" in shares and "cpu0" in shares
    for s in shares.values():
        assert set(s) == {"user", "system", "iowait", "steal", "idle"}
        assert sum(s.values()) == pytest.approx(1.0)
        assert all(v >= 0 for v in s.values())
    # system = system + irq + softirq of the deltas, over the sum of the first eight deltas
    b, a = before.cpus["cpu0"], after.cpus["cpu0"]
    d = [x - y for x, y in zip(a, b)]
    assert shares["cpu0"]["system"] == pytest.approx((d[2] + d[5] + d[6]) / sum(d[:8]))
    assert shares["cpu0"]["user"] == pytest.approx((d[0] + d[1]) / sum(d[:8]))


def test_process_share_is_ticks_over_wall_ticks():
    text = fixture("procstat", "fstime-copy-tmpfs.txt")
    before, after = snapshots(text)
    pid = pid_in(text)
    p = process_shares(before, after, pid)
    wall = elapsed_ticks(before, after)
    assert p["system"] == pytest.approx((after.procs[pid].stime - before.procs[pid].stime) / wall)
    assert p["user"] == pytest.approx((after.procs[pid].utime - before.procs[pid].utime) / wall)
    assert p["comm"] == "fstime" and p["states"][1] == "R"
    # fstime in its copy phase: busy, and busy in the kernel.
    assert p["cpu"] > 0.5 and p["system"] > p["user"]


def test_command_name_with_spaces_and_parentheses():
    text = fixture("procstat", "comm-with-parens.txt")
    before, after = snapshots(text)
    pid = pid_in(text)
    assert before.procs[pid].comm == "we ird) (x"
    assert before.procs[pid].state == "S"
    p = process_shares(before, after, pid)
    assert p["cpu"] == pytest.approx(0.0, abs=0.02)     # it slept


def test_procstat_errors():
    with pytest.raises(ParseError):
        snapshots("intr 1 2 3\nctxt 5\n")
    text = fixture("procstat", "comm-with-parens.txt")
    before, after = snapshots(text)
    with pytest.raises(ParseError):
        process_shares(before, after, 1)                  # pid 1 was not read


# ---- auditctl ---------------------------------------------------------------------------

def test_audit_status_off_and_with_auditd():
    off = audit_status(fixture("auditctl", "status-off.txt"))
    assert off["enabled"] == 0 and off["pid"] == 0 and off["backlog_limit"] == 64
    assert off["loginuid_immutable"] == "0 unlocked"
    on = audit_status(fixture("auditctl", "status-auditd.txt"))
    assert on["enabled"] == 1 and on["pid"] > 0
    assert "backlog_wait_time_actual" in on and "backlog_wait_time_actual" not in audit_config(on)
    assert audit_config(off) != audit_config(on)
    with pytest.raises(ParseError):
        audit_status("Error - audit support not in kernel\n")


def test_audit_rules():
    assert audit_rules(fixture("auditctl", "rules-none.txt")) == []
    rules = audit_rules(fixture("auditctl", "rules-two.txt"))
    assert rules[0] == "-a always,exit -F arch=b64 -S all -F pid=32768"
    assert len(rules) == 2 and "key=pcb-fixture" in rules[1]


# ---- folded stacks of a copy phase ------------------------------------------------------

def _record_module():
    spec = importlib.util.spec_from_file_location("fstime_record", ROOT / "labs" / "fstime" / "record.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_kernel_leaf_share_of_a_copy_phase():
    folded = fixture("fstime", "copy-xfs-on-tmpfs.folded")
    kernel, total = _record_module()._leaf_in_kernel(folded)
    assert total == sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines())
    # Recount by hand: the innermost frame of each line.
    by_hand = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()
                  if line.rsplit(" ", 1)[0].split(";")[-1].endswith("_[k]"))
    assert kernel == by_hand
    assert kernel / total > 0.5                      # a copy loop lives in the kernel
    assert "xfs_file_buffered_write_[k]" in folded
    assert 0 < share_under(folded, ["audit_", "__audit_"]) < 1


# ---- the lab's small programs -----------------------------------------------------------

def cpushare(*args):
    return subprocess.run([sys.executable, str(ROOT / "labs" / "fstime" / "cpushare.py"), *args],
                          capture_output=True, text=True, env={"PYTHONPATH": str(ROOT)})


def test_cpushare_one_line():
    path = FIX / "procstat" / "fstime-copy-tmpfs.txt"
    pid = pid_in(path.read_text())
    p = cpushare(str(path), str(pid))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("over ") and "CPU0 usr" in lines[0] and f"fstime (pid {pid}, state R)" in lines[0]


def test_cpushare_errors():
    assert cpushare("--help").returncode == 0
    assert cpushare().returncode == 2
    assert cpushare("a", "notapid").returncode == 2
    assert cpushare("/nonexistent").returncode == 1
    one = FIX / "procstat" / "comm-with-parens.txt"
    assert cpushare(str(one), "1").returncode == 1         # pid 1 not in the file


def test_audit_exec_usage():
    script = ROOT / "labs" / "fstime" / "audit_exec.sh"
    h = subprocess.run(["sh", str(script), "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "auditctl -a always,exit" in h.stdout
    bad = subprocess.run(["sh", str(script), "b64"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_cpusample_usage_and_output():
    script = ROOT / "labs" / "fstime" / "cpusample.sh"
    h = subprocess.run(["sh", str(script), "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "cpusample.sh PID SECONDS" in h.stdout
    for bad in ([], ["notapid", "1"], ["1"]):
        p = subprocess.run(["sh", str(script), *bad], capture_output=True, text=True)
        assert p.returncode == 2 and "usage" in p.stderr
    # Two real readings of this test process, parsed back.
    p = subprocess.run(["sh", str(script), str(os.getpid()), "0.1"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    before, after = snapshots(p.stdout)
    assert os.getpid() in before.procs and os.getpid() in after.procs
    assert set(before.cpus) == set(after.cpus) and "cpu0" in before.cpus


def test_diskstats_rates_from_two_lines_of_one_device():
    """A real /proc/diskstats line of this machine, and the same line with counters advanced:
    reads and sectors read (fields 1 and 3 after the name), writes and sectors written (5, 7),
    per second over the step's duration; two devices or one line are refused."""
    first = next(line for line in Path("/proc/diskstats").read_text().splitlines() if line.split()[2].startswith(("vd", "sd", "nvme", "loop")))
    f = first.split()
    later = f[:3] + [str(int(x) + d) for x, d in zip(f[3:10], (10, 0, 80, 0, 30, 0, 400))] + f[10:]
    rates = _record_module().diskstats_rates(first + "\n" + " ".join(later) + "\n", 2.0)
    assert rates == {"read": {"kib_per_s": 80 * 512 / 1024 / 2, "ios_per_s": 5.0},
                     "write": {"kib_per_s": 400 * 512 / 1024 / 2, "ios_per_s": 15.0}}
    with pytest.raises(ValueError):
        _record_module().diskstats_rates(first, 2.0)
    with pytest.raises(ValueError):
        _record_module().diskstats_rates(first + "\n" + " ".join(f[:2] + ["other"] + f[3:]), 2.0)
