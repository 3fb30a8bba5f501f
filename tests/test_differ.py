"""Why does my result differ? A verdict that differs from the reference host's names the host
provenance that differs (labkit/site/macros/differ.py), read from the two committed results."""

from __future__ import annotations

import copy
import json

from conftest import ROOT
from labkit.site.macros import differ
import refhost

X86 = json.loads((refhost.RESULTS / "lat_tcp.json").read_text())["host"]
ARM = json.loads((ROOT / "results" / "qemu-arm64-tcg" / "lat_tcp.json").read_text())["host"]


def test_the_committed_hosts_differ_in_what_a_verdict_depends_on():
    diff = differ.provenance_diff(X86, ARM)
    joined = "; ".join(diff)
    assert f"kernel {ARM['kernel']} vs {X86['kernel']}" in diff
    assert "emulated CPU (TCG) vs hardware CPU" in diff
    assert f"architecture {ARM['arch']} vs {X86['arch']}" in diff
    assert "SMT" not in joined      # neither host has SMT


def test_one_field_at_a_time():
    for key, value, phrase in [("smt", True, "SMT vs no SMT"), ("kernel", "4.9.0", "kernel 4.9.0 vs"),
                               ("scratch_fs", "xfs", "scratch filesystem xfs vs"), ("root", False, "not root vs root"),
                               ("cpu_model", "Ampere Altra", f"CPU Ampere Altra vs {X86['cpu_model']}"),
                               ("virtualization", "none", f"virtualization none vs {X86['virtualization']}"),
                               ("audit_context", "present: not root", "audit: present: not root vs audit: ")]:
        other = copy.deepcopy(X86)
        other[key] = value
        diff = differ.provenance_diff(X86, other)
        assert len(diff) == 1 and diff[0].startswith(phrase), (key, diff)
    other = copy.deepcopy(X86)
    other["pmu"] = dict(other["pmu"], available=not other["pmu"]["available"])
    assert len(differ.provenance_diff(X86, other)) == 1
    assert differ.provenance_diff(X86, copy.deepcopy(X86)) == []


def test_a_note_only_where_the_verdicts_differ_and_say_nothing_of_why():
    assert differ.differs_note("holds", "holds", X86, ARM, "ref") is None
    assert differ.differs_note("not applicable", "holds", X86, ARM, "ref") is None
    assert differ.differs_note("holds", "untested", X86, ARM, "ref") is None
    note = differ.differs_note("inconclusive", "holds", X86, ARM, "ref")
    assert note.startswith("differs from ref (holds there); what differs: architecture")
    same = differ.differs_note("fails", "holds", X86, copy.deepcopy(X86), "ref")
    assert same.endswith("nothing in the host provenance: the run itself (noise, load)")


def test_a_result_from_before_audit_context_is_compared_by_the_boot():
    """A result recorded before ``audit_context`` existed has only ``audit_ever_enabled``: the
    comparison falls back to it, and says nothing where neither field is known."""
    old, ref = copy.deepcopy(X86), copy.deepcopy(X86)
    for h in (old, ref):
        del h["audit_context"]
    old["audit_ever_enabled"], ref["audit_ever_enabled"] = False, True
    assert differ.provenance_diff(ref, old) == ["audit never enabled on the boot vs audit enabled on the boot"]
    old["audit_ever_enabled"] = None
    assert differ.provenance_diff(ref, old) == []
