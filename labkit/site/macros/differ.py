"""Why does my result differ? The host provenance that a verdict can depend on, compared
between two results (the reference host's and another's, a reader's own run included).

Only what can change a timing or a count on the same code is compared: the architecture and
CPU model, the kernel, virtualization and CPU emulation, SMT, the hardware PMU (perf then
samples on ``cpu-clock``), the scratch filesystem, root (what a lab may do), and audit
(whether the measured processes carried an audit context). Each is read from the results'
``host`` provenance (:func:`labkit.run.probe.probe`); nothing is guessed from labels.
"""

from __future__ import annotations


def _pmu(host: dict) -> str | None:
    pmu = host.get("pmu")
    if not isinstance(pmu, dict):
        return None
    return "hardware counters" if pmu.get("available") else "no hardware counters"


def _emulation(host: dict) -> str:
    emu = host.get("emulation") or {}
    return "emulated CPU (TCG)" if emu.get("accelerator") == "tcg" else "hardware CPU"


def _audit(host: dict) -> str | None:
    """How the run's processes stood with audit (``audit_context``, a string in the schema), else,
    for a result recorded before that field, whether audit had been enabled on the boot."""
    ctx = host.get("audit_context")
    if ctx:
        return f"audit: {ctx}"
    ever = host.get("audit_ever_enabled")
    if ever is None:
        return None
    return "audit enabled on the boot" if ever else "audit never enabled on the boot"


# (the words before a value that does not name itself, how to read it from a host's provenance)
FIELDS = (
    ("architecture ", lambda h: h.get("arch")),
    ("CPU ", lambda h: h.get("cpu_model")),
    ("kernel ", lambda h: h.get("kernel")),
    ("", _emulation),
    ("virtualization ", lambda h: h.get("virtualization")),
    ("", lambda h: None if h.get("smt") is None else ("SMT" if h.get("smt") else "no SMT")),
    ("", _pmu),
    ("scratch filesystem ", lambda h: h.get("scratch_fs")),
    ("", lambda h: None if h.get("root") is None else ("root" if h.get("root") else "not root")),
    ("", _audit),
)


def provenance_diff(reference: dict, other: dict) -> list[str]:
    """What differs between two hosts' provenance among :data:`FIELDS`, as short phrases,
    ``other``'s value first: ``"kernel 6.1.0-50-arm64 vs 6.18.44"``, ``"SMT vs no SMT"``, in
    the order of :data:`FIELDS`; empty when nothing listed differs. ``reference`` and ``other``
    are the results' ``host`` dicts; a field either host lacks is left out."""
    out = []
    for prefix, read in FIELDS:
        a, b = read(other), read(reference)
        if a is not None and b is not None and a != b:
            out.append(f"{prefix}{a} vs {b}")
    return out


def differs_note(claim_verdict: str, ref_verdict: str, reference: dict, other: dict, ref_label: str) -> str | None:
    """The note a verdict cell gets when its verdict differs from the reference host's: "differs
    from <ref_label> (holds there); what differs: ..." with :func:`provenance_diff`, or None when
    the verdicts agree. Verdicts that already say why (untested, not applicable) get none."""
    if claim_verdict == ref_verdict or claim_verdict in ("untested", "not applicable") \
            or ref_verdict in ("untested", "not applicable"):
        return None
    diff = provenance_diff(reference, other)
    what = "; ".join(diff) if diff else "nothing in the host provenance: the run itself (noise, load)"
    return f"differs from {ref_label} ({ref_verdict} there); what differs: {what}"
