"""Host probe on real CPU dumps (tests/fixtures/cpuinfo, from util-linux's lscpu tests; its README
says where each comes from) and on this host."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import pytest

from labkit.run import probe

DUMPS = Path(__file__).resolve().parent / "fixtures" / "cpuinfo"


def expected(dump: str, field: str) -> list[str]:
    """Values of ``field`` in util-linux's own expected lscpu output for the dump."""
    text = (DUMPS / dump / "lscpu.expected").read_text()
    return [m.strip() for m in re.findall(rf"^{re.escape(field)}:\s*(.+)$", text, re.M)]


needs_dumps = pytest.mark.skipif(not DUMPS.exists(), reason="tests/fixtures/cpuinfo missing")


@needs_dumps
@pytest.mark.parametrize("dump", ["x86_64-epyc_7451", "x86_64-dell_e4310", "armv7"])
def test_model_names_match_lscpu_expected(dump):
    got = probe.lscpu_models(str(DUMPS / dump))
    want = [" ".join(m.split()) for m in expected(dump, "Model name")]
    assert got["models"] == want
    assert got["vendor"] == expected(dump, "Vendor ID")[0]


@needs_dumps
def test_hybrid_arm64_lists_every_core_type():
    """big.LITTLE: one model per core type. Debian 12's util-linux (2.38) does not yet know
    the Cortex-X3 part (0xd4e), which newer util-linux names; the probe says "unknown" rather
    than guessing from its own part table."""
    got = probe.lscpu_models(str(DUMPS / "arm-A510-A710-A715-X3"))["models"]
    want = expected("arm-A510-A710-A715-X3", "Model name")
    assert len(got) == len(want) == 4
    for g in got:
        assert g in want or g == "unknown"
    assert {"Cortex-A510", "Cortex-A710", "Cortex-A715"} <= set(got)


@needs_dumps
@pytest.mark.parametrize("dump", ["x86_64-epyc_7451", "x86_64-dell_e4310"])
def test_topology_counts_match_lscpu_expected(dump):
    counts = probe.cpu_counts(probe.topology(str(DUMPS / dump)))
    tpc = int(expected(dump, "Thread(s) per core")[0])
    cps = int(expected(dump, "Core(s) per socket")[0])
    sockets = int(expected(dump, "Socket(s)")[0])
    assert counts["threads_per_core"] == tpc
    assert counts["sockets"] == sockets
    assert counts["cores"] == cps * sockets
    assert counts["cpus"] == tpc * cps * sockets


@needs_dumps
def test_pair_relations_on_real_topologies():
    dell = probe.topology(str(DUMPS / "x86_64-dell_e4310"))
    # the dump's own sibling list for cpu0 decides which CPU is its SMT sibling
    sib = [c for c in dell[0]["siblings"] if c != 0][0]
    assert probe.pair_relation(dell, 0, 0) == "same-cpu"
    assert probe.pair_relation(dell, 0, sib) == "smt-sibling"
    other = next(c for c in dell if c not in dell[0]["siblings"])
    assert probe.pair_relation(dell, 0, other) == "other-core"
    epyc = probe.topology(str(DUMPS / "x86_64-epyc_7451"))
    far = next(c for c in epyc if epyc[c]["package"] != epyc[0]["package"])
    assert probe.pair_relation(epyc, 0, far) == "other-package"


def test_parse_cpu_list():
    assert probe.parse_cpu_list("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    with pytest.raises(ValueError):
        probe.parse_cpu_list("zero")


def test_probe_this_host_reads_every_field(tmp_path):
    h = probe.probe(str(tmp_path), "probe-test")
    assert h["arch"] == platform.machine()
    assert h["kernel"] == platform.release()
    assert h["cpus"] >= 1 and h["cores"] >= 1
    for cap in ("pmu", "tracefs", "loop_devices", "netns"):
        assert isinstance(h[cap]["available"], bool) and h[cap]["reason"]
    assert h["scratch_fs"]
