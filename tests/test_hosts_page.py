"""The Hosts page (docs/hosts.md) describes each committed host in words; every such statement
is pinned here to the committed results' provenance, so that a rerun that changes it fails
instead of leaving the page wrong (DESIGN.md, "Chapters and evidence pages"). Each test quotes
its sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit import model

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "hosts.md").read_text()


def results(host: str) -> dict[str, dict]:
    """lab -> the committed result of ``host``."""
    found = {p.stem: model.load(p) for p in sorted((ROOT / "results" / host).glob("*.json"))}
    assert found, host
    return found


def test_the_page_names_exactly_the_committed_hosts():
    """Each committed host folder has its paragraph (bold label), and no other host has one."""
    named = {line.split("**")[1] for line in PAGE.splitlines() if line.startswith("**") and "**" in line[2:]}
    assert named == {p.name for p in (ROOT / "results").iterdir() if p.is_dir()}


def test_xeon_host():
    """"a Debian 12 container in a KVM virtual machine with 2 vCPUs of an Intel Xeon (no SMT;
    the nvme_swiotlb and optane_kyber results name family 6, model 106, the lat_tcp result
    predates the CPU signature field), kernel 6.18. It has no
    hardware PMU counters … no `function_graph` … `Lockdown: blktrace: debugfs access is
    restricted` … Audit had been enabled on its boot before the reference runs; each run kept its
    processes off audit's path with `auditctl -a task,never`"."""
    for lab, r in results("xeon-kvm-2vcpu").items():
        h = r["host"]
        assert h["cpu_vendor"] == "GenuineIntel" and "Xeon" in h["cpu_model"], lab
        sig = h.get("cpu_signature")
        assert (sig is None) == (lab == "lat_tcp"), lab
        assert sig is None or sig.startswith("family 6, model 106,"), (lab, sig)
        assert h["cpus"] == 2 and h["smt"] is False and h["kernel"].startswith("6.18."), lab
        assert h["distro"].startswith("Debian GNU/Linux 12") and h["virtualization"].startswith("vm: kvm; container:"), lab
        assert h["pmu"]["available"] is False, lab
        assert h["audit_ever_enabled"] is True and h["audit_context"] == "suppressed with task,never", lab
    nvme = results("xeon-kvm-2vcpu")["nvme_swiotlb"]
    fgraph = model.find_step(nvme, "fgraph")
    assert fgraph["status"] == "skipped" and "function_graph is not in available_tracers" in fgraph["reason"]
    assert "Lockdown: blktrace: debugfs access is restricted" in model.find_step(nvme, "btt.blktrace")["reason"]


@pytest.mark.parametrize("lab, day, audit", [
    ("fio_engines", "2026-12-02", "never enabled"),
    ("fstime", "2026-12-06", "suppressed with task,never"),
    ("lat_tcp", "2026-12-06", "suppressed with task,never"),
    ("optane_kyber", "2026-12-05", "never enabled")])
def test_epyc_host(lab, day, audit):
    """"the same kind of machine with 2 vCPUs of an AMD EPYC (no SMT), kernel 6.18, no hardware
    PMU counters … fio_engines (2026-12-02) and optane_kyber (2026-12-05), each on a boot where
    audit had never been enabled, and fstime and lat_tcp (2026-12-06), on a boot where audit had
    been enabled, so each of those runs kept its processes off audit's path with `auditctl -a
    task,never` … the fio result was recorded before results named the model"."""
    r = results("epyc-kvm-2vcpu")[lab]
    h = r["host"]
    assert h["cpu_vendor"] == "AuthenticAMD" and "EPYC" in h["cpu_model"], lab
    assert h["cpus"] == 2 and h["smt"] is False and h["kernel"].startswith("6.18.") and h["pmu"]["available"] is False
    assert r["run"]["start"].startswith(day) and not r["run"]["quick"]
    assert h["audit_context"] == audit and h["audit_ever_enabled"] is (audit != "never enabled")
    assert ("cpu_signature" in h) is (lab != "fio_engines")
    assert set(results("epyc-kvm-2vcpu")) == {"fio_engines", "fstime", "lat_tcp", "optane_kyber"}


def test_the_epyc_results_name_one_model():
    """"the fstime, lat_tcp and optane_kyber results were measured on one machine (family 25,
    model 17 …)": one CPU signature and one kernel build among the three."""
    r = results("epyc-kvm-2vcpu")
    labs = ("fstime", "lat_tcp", "optane_kyber")
    assert {r[lab]["host"]["cpu_signature"].rsplit(",", 1)[0] for lab in labs} == {"family 25, model 17"}
    assert len({r[lab]["host"]["kernel"] for lab in labs}) == 1


def test_emulated_arm64_host():
    """"QEMU's `virt` machine with 2 emulated Cortex-A72 cores and 3 GiB of memory, Debian
    bookworm's arm64 kernel (6.1) and userspace"."""
    for lab, r in results("qemu-arm64-tcg").items():
        h = r["host"]
        e = h["emulation"]
        assert e["accelerator"] == "tcg" and e["machine"] == "virt" and e["guest_cpu"] == "cortex-a72", lab
        assert h["arch"] == "aarch64" and h["cpus"] == 2 and h["cpu_model"] == "Cortex-A72", lab
        assert 2.5 * 2**30 < h["memory_bytes"] <= 3 * 2**30, lab      # 3 GiB less what the kernel keeps
        assert h["kernel"].startswith("6.1.") and h["kernel"].endswith("-arm64") and "bookworm" in h["distro"], lab
