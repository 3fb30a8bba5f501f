"""What bash and Python say to each other about a run, each written down once: the probe's
capabilities and the names labs ask for them by (labkit/run/probe.py CAPABILITIES), the --help text's
account of quick mode (the lab's own budgets), prctl's options by name."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labkit import manifest
from labkit.run import probe, supervisor

ROOT = Path(__file__).resolve().parents[1]
LAB_SH = (ROOT / "labs" / "lib" / "lab.sh").read_text()
# What lab_require checks by itself, without the probe.
BUILTIN = {"root", "perf", "inferno", "tracefs"}


def test_capabilities_are_the_probes():
    """Every capability a committed host reports ({"available", ...}) is in the table, and only those."""
    for path in sorted((ROOT / "results").glob("*/*.json")):
        host = json.loads(path.read_text())["host"]
        caps = {k for k, v in host.items() if isinstance(v, dict) and "available" in v}
        assert caps == set(probe.CAPABILITIES), path


def test_every_capability_a_lab_requires_is_known():
    """lab_require's capabilities in every run.sh: a built-in check, cmd:PROG, cpus:N, or a name
    of the probe's table (lab.sh names none of the probe's itself)."""
    names = set(probe.CAPABILITIES.values())
    for run_sh in sorted(ROOT.glob("labs/*/run.sh")):
        for call in re.findall(r"^[^#\n]*?\blab_require \S+ ([^|;&#\n]+)", run_sh.read_text(), re.M):
            for cap in call.replace("\"", "").split():
                if cap.startswith(("cmd:", "cpus:", "$")) or cap in ("||", "&&"):
                    continue
                assert cap in BUILTIN | names, f"{run_sh.parent.name}: lab_require ... {cap}"
    for name in names - {"tracefs"}:
        assert not re.search(rf"^\s*[a-z|]*\b{name}\b[a-z|]*\)", LAB_SH, re.M), f"lab.sh names {name} itself"


def test_the_supervisor_exports_the_table():
    source = (ROOT / "labkit" / "run" / "supervisor.py").read_text()
    assert "CAPABILITIES" in source and "split('_')" not in source
    assert "PCB_LAB_CAPS" in LAB_SH


@pytest.mark.parametrize("m", manifest.labs(), ids=lambda m: m["name"])
def test_help_gives_the_labs_own_budgets(m):
    lab = supervisor.Lab(ROOT / "labs" / m["name"] / "run.sh", m["name"], m["title"], "", [])
    text = supervisor.usage_text(lab)
    assert "under 2 minutes" not in text and "the same repetitions" not in text
    quick = re.search(r"--quick .*?(?=\n  --)", text, re.S)[0]
    assert f"quick {m['quick_budget_s']:g} s, full {m['full_budget_s']:g} s" in " ".join(quick.split())
    assert "fewer cases" in quick and "as often as in a full run" in " ".join(quick.split())


def test_prctl_options_are_named():
    """prctl(2): PR_SET_PDEATHSIG is 1 and PR_SET_CHILD_SUBREAPER 36 (<linux/prctl.h>)."""
    assert (supervisor.PR_SET_PDEATHSIG, supervisor.PR_SET_CHILD_SUBREAPER) == (1, 36)
    source = (ROOT / "labkit" / "run" / "supervisor.py").read_text()
    assert not re.search(r"\.prctl\(\d", source)


def test_steps_tsv_has_one_reader():
    """The supervisor and labkit record read steps.tsv through labkit.steps.read_tsv, not by substring."""
    for path in ("labkit/run/supervisor.py", "labkit/record.py"):
        source = (ROOT / path).read_text()
        assert "read_tsv(" in source and '"\\tskipped\\t"' not in source, path


def test_help_of_a_lab_without_a_manifest_leaves_the_budgets_out(tmp_path):
    """A lab folder without lab.toml (a lab being written) still gets its --help: no budgets
    line, nothing in its place."""
    (tmp_path / "run.sh").write_text("")
    lab = supervisor.Lab(tmp_path / "run.sh", "draft", "A draft", "", [])
    quick = re.search(r"--quick .*?(?=\n  --)", supervisor.usage_text(lab), re.S)[0]
    assert quick.endswith("as often as in a full run")   # nothing after "run"
    assert "budgets" not in quick and "XX" not in quick
