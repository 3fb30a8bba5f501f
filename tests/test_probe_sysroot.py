"""The probe's SMT and PMU readings (labkit/run/probe.py) from sysroot trees and recorded outputs.

SMT: ``/sys/devices/system/cpu/smt/active`` when the kernel has it ("1" on, "0" off), else the
topology's threads per core. The trees are util-linux's real lscpu dumps (tests/fixtures/cpuinfo),
copied into tmp_path and given an ``smt/active`` file or not (file layouts, no measurements).
PMU: ``perf stat -e instructions``, ``perf record -h`` and ``perf evlist`` outputs recorded on
real hosts (tests/fixtures/perf and tests/fixtures/arm64, each with the .cmd that made it).
Audit readings are tested in tests/test_probe_audit.py on recorded auditctl outputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from labkit.run import probe
import refhost

FIX = Path(__file__).resolve().parent / "fixtures"
DUMPS = FIX / "cpuinfo"
ROOT = Path(__file__).resolve().parent.parent


def threads_per_core(dump: str) -> int:
    """util-linux's own expected lscpu output for the dump."""
    return int(re.search(r"^Thread\(s\) per core:\s*(\d+)", (DUMPS / dump / "lscpu.expected").read_text(), re.M).group(1))


def sysroot(tmp_path: Path, dump: str, active: str | None) -> Path:
    """The dump as a sysroot, with ``smt/active`` holding ``active`` (None: no smt directory, as
    on kernels before 4.19 and architectures without SMT control)."""
    root = tmp_path / dump
    shutil.copytree(DUMPS / dump, root)
    smt = root / "sys/devices/system/cpu/smt"
    assert not smt.exists()
    if active is not None:
        smt.mkdir()
        (smt / "active").write_text(active)
    return root


def test_the_dumps_cover_smt_and_no_smt():
    assert threads_per_core("x86_64-dell_e4310") == 2 and threads_per_core("armv7") == 1


@pytest.mark.parametrize("dump", ["x86_64-dell_e4310", "armv7"])
@pytest.mark.parametrize("active,want", [("1\n", True), ("0\n", False)])
def test_smt_active_file_decides(dump, active, want, tmp_path):
    """The kernel's own answer wins over the topology (SMT off at run time: nosmt or
    ``echo off > smt/control``, while the topology files may still list two threads)."""
    root = str(sysroot(tmp_path, dump, active))
    tpc = probe.cpu_counts(probe.topology(root))["threads_per_core"]
    assert probe.smt_active(root, tpc) is want
    assert probe.smt_active(root) is want


@pytest.mark.parametrize("dump", ["x86_64-dell_e4310", "x86_64-epyc_7451", "armv7"])
def test_without_the_smt_file_the_topology_decides(dump, tmp_path):
    root = str(sysroot(tmp_path, dump, None))
    tpc = probe.cpu_counts(probe.topology(root))["threads_per_core"]
    assert tpc == threads_per_core(dump)
    assert probe.smt_active(root, tpc) is (threads_per_core(dump) > 1)
    assert probe.smt_active(root) is None                    # nothing to read: unknown, not a guess


def test_probe_reports_the_sysroots_smt_and_counts(tmp_path, monkeypatch):
    """probe() wires the topology's threads per core into ``smt``: the readings of a sysroot
    (the slow capability probes replaced by fixed answers, which this test does not check)."""
    for dump, active in (("x86_64-dell_e4310", None), ("x86_64-dell_e4310", "0"), ("armv7", None),
                         ("arm-A510-A710-A715-X3", None)):
        root = str(sysroot(tmp_path / (active or "none"), dump, active))
        real = {name: getattr(probe, name) for name in ("topology", "smt_active", "lscpu_models")}
        monkeypatch.setattr(probe, "topology", lambda sysroot=None: real["topology"](root))
        monkeypatch.setattr(probe, "smt_active", lambda sysroot=None, threads_per_core=None:
                            real["smt_active"](root, threads_per_core))
        monkeypatch.setattr(probe, "lscpu_models", lambda sysroot=None: real["lscpu_models"](root))
        for name in ("pmu", "tracefs", "loop_devices", "netns"):
            monkeypatch.setattr(probe, name, lambda: probe.cap(False, "not probed here"))
        monkeypatch.setattr(probe, "audit_ever_enabled", lambda *a, **k: None)
        monkeypatch.setattr(probe, "virtualization", lambda hypervisor: "none")
        h = probe.probe(None, "sysroot-test")
        tpc = threads_per_core(dump)
        assert h["threads_per_core"] == tpc
        assert h["smt"] is (active != "0" and tpc > 1), (dump, active)
        counts = probe.cpu_counts(real["topology"](root))
        assert (h["cpus"], h["cores"], h["sockets"]) == (counts["cpus"], counts["cores"], counts["sockets"])
        models = list(dict.fromkeys(real["lscpu_models"](root)["models"]))   # each model once, in order
        assert h["cpu_models"] == models and h["cpu_model"] == " + ".join(models), h["cpu_model"]
        monkeypatch.undo()


# ---- PMU ------------------------------------------------------------------------------------

class Recorded:
    """A command runner for probe.pmu answering from recorded outputs, keeping the commands."""

    def __init__(self, stat: Path | None, usage: Path | None = FIX / "perf" / "record-help.txt",
                 evlist: Path | None = FIX / "perf" / "evlist-default-no-pmu.txt"):
        self.files = {"stat": stat, "usage": usage, "evlist": evlist}
        self.calls: list[list[str]] = []

    def __call__(self, cmd, timeout=20):
        self.calls.append(list(cmd))
        if cmd[:2] == ["perf", "stat"]:
            f, out_on = self.files["stat"], "stderr"
        elif cmd[:3] == ["perf", "record", "-h"]:
            f, out_on = self.files["usage"], "stderr"           # perf prints its usage on stderr, exit 129
        elif cmd[:2] == ["perf", "record"]:
            return subprocess.CompletedProcess(cmd, 0 if self.files["evlist"] else 1, "", "")
        elif cmd[:2] == ["perf", "evlist"]:
            f, out_on = self.files["evlist"], "stdout"
        else:
            raise AssertionError(cmd)
        if f is None:
            return None
        text = f.read_text()
        return subprocess.CompletedProcess(cmd, 129 if "-h" in cmd else 0, text if out_on == "stdout" else "",
                                           text if out_on == "stderr" else "")


def committed_pmu(host: str) -> dict:
    """host.pmu of a committed result: what probe.pmu said on that host."""
    return json.loads(next((ROOT / "results" / host).glob("*.json")).read_text())["host"]["pmu"]


# What `perf evlist` printed for the recorded default event (the fixture's one line).
DEFAULT_EVENT = (FIX / "perf" / "evlist-default-no-pmu.txt").read_text().strip()


def test_no_pmu_on_a_kvm_guest_as_its_committed_result_says():
    run = Recorded(FIX / "perf" / "stat-instructions-vm.txt")
    got = probe.pmu(run, which=lambda name: f"/usr/bin/{name}")
    assert got == {"available": False, "reason": "perf stat -e instructions: <not supported> (no hardware PMU counters here)",
                   "detail": f"perf record default event: {DEFAULT_EVENT}"}
    assert got == committed_pmu(refhost.HOST)
    assert run.calls[0] == ["perf", "stat", "-x,", "-e", "instructions", "--", "true"]
    record = next(c for c in run.calls if c[:2] == ["perf", "record"] and "-h" not in c)
    assert "--no-bpf-event" in record and "--no-buildid-cache" in record      # its usage lists the option
    assert run.calls[-1][:3] == ["perf", "evlist", "-i"] and run.calls[-1][3] == record[record.index("-o") + 1]


def test_no_pmu_on_an_arm64_tcg_guest():
    run = Recorded(FIX / "arm64" / "perf-stat-instructions.csv", evlist=None)
    got = probe.pmu(run, which=lambda name: f"/usr/bin/{name}")
    assert got["available"] is False and got["detail"] is None
    assert got["reason"] == committed_pmu("qemu-arm64-tcg")["reason"]


def test_perf_record_without_the_bpf_option_when_its_usage_is_unknown():
    run = Recorded(FIX / "perf" / "stat-instructions-vm.txt", usage=None)
    assert probe.pmu(run, which=lambda name: "/usr/bin/perf")["detail"] == f"perf record default event: {DEFAULT_EVENT}"
    record = next(c for c in run.calls if c[:2] == ["perf", "record"] and "-h" not in c)
    assert "--no-bpf-event" not in record


def test_no_perf_or_no_answer_is_no_pmu():
    run = Recorded(FIX / "perf" / "stat-instructions-vm.txt")
    assert probe.pmu(run, which=lambda name: None) == {"available": False, "reason": "perf not installed", "detail": None}
    assert run.calls == []
    silent = Recorded(None)
    assert probe.pmu(silent, which=lambda name: "/usr/bin/perf") == {"available": False, "reason": "perf stat did not run",
                                                                      "detail": None}
    assert len(silent.calls) == 1


# ---- the other readings, on this host: each compared with the source it reads, read here ------

def test_no_sysroot_reads_this_hosts_own_sys(monkeypatch):
    """Without a sysroot the topology is /sys's, not a count of os.cpu_count() CPUs."""
    online = probe.parse_cpu_list(Path("/sys/devices/system/cpu/online").read_text())
    monkeypatch.setattr(probe.os, "cpu_count", lambda: len(online) + 7)
    assert sorted(probe.topology()) == online


def test_counts_of_an_empty_topology():
    assert probe.cpu_counts({}) == {"cpus": 0, "cores": 0, "sockets": 0, "threads_per_core": 1}


def test_virtualization_says_what_systemd_detect_virt_says():
    if not shutil.which("systemd-detect-virt"):
        pytest.skip("no systemd-detect-virt here")
    parts = []
    for kind in ("vm", "container"):
        out = subprocess.run(["systemd-detect-virt", f"--{kind}"], capture_output=True, text=True).stdout.strip()
        if out not in ("", "none"):
            parts.append(f"{kind}: {out}")
    if not parts:
        pytest.skip("systemd-detect-virt finds no virtualization here")
    assert probe.virtualization(None) == "; ".join(parts)


def test_virtualization_without_systemd_detect_virt(monkeypatch):
    """Then lscpu's hypervisor vendor, else /proc/cpuinfo's hypervisor flag, else "none"."""
    monkeypatch.setattr(probe, "run_command", lambda cmd, timeout=20: None)
    assert probe.virtualization("KVM") == "vm: kvm"
    flagged = bool(re.search(r"^flags\s*:.*\bhypervisor\b", Path("/proc/cpuinfo").read_text(), re.M))
    assert probe.virtualization(None) == ("vm: unknown hypervisor (cpuinfo flag)" if flagged else "none")


def test_loop_devices_need_root():
    got = probe.loop_devices()
    assert (got["reason"] == "loop devices need root") is (probe.os.geteuid() != 0)


def test_the_capability_table_names_the_results_capability_fields():
    """probe.CAPABILITIES' keys are the host fields the result schema types as a capability (the
    supervisor exports each one's reason under its name)."""
    schema = json.loads((ROOT / "labkit" / "schema.json").read_text())
    fields = {k for k, v in schema["properties"]["host"]["properties"].items() if v == {"$ref": "#/$defs/capability"}}
    assert set(probe.CAPABILITIES) == fields
    assert sorted(probe.CAPABILITIES.values()) == ["loop", "netns", "pmu", "tracefs"]


@pytest.mark.parametrize("where", ["sys/kernel/tracing", "sys/kernel/debug/tracing"])
def test_tracefs_is_found_at_either_mount_point(tmp_path, where):
    """tracefs at its own mount point, or under debugfs where older systems mount it; its
    tracers listed from available_tracers (a layout of empty files, as tracefs has them)."""
    d = tmp_path / where
    d.mkdir(parents=True)
    (d / "trace").write_text("")
    (d / "available_tracers").write_text("function_graph function nop\n")
    assert probe.tracefs(tmp_path) == {"available": True, "reason": f"/{where} readable",
                                       "detail": "tracers: function_graph function nop"}


def test_tracefs_missing_says_whether_the_kernel_has_it(tmp_path, monkeypatch):
    monkeypatch.setattr(probe.os, "geteuid", lambda: 0)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/filesystems").write_text("nodev\tsysfs\nnodev\ttracefs\n")
    assert probe.tracefs(tmp_path) == {"available": False, "detail": None,
                                       "reason": "tracefs supported but not mounted (mount -t tracefs nodev /sys/kernel/tracing)"}
    (tmp_path / "proc/filesystems").write_text("nodev\tsysfs\n")
    assert probe.tracefs(tmp_path) == {"available": False, "reason": "kernel has no tracefs", "detail": None}
    monkeypatch.setattr(probe.os, "geteuid", lambda: 1000)
    assert probe.tracefs(tmp_path) == {"available": False, "reason": "tracefs needs root here", "detail": None}
