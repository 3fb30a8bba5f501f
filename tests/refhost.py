"""The committed x86_64 references: the host folder under ``results/`` whose result of each lab
the tests read as real data (samples to scale, raw outputs, the verdicts of a real run). A
lab's reference is its newest full run on the machine kind that development and CI run on;
that kind has been an Intel Xeon VM and an AMD EPYC VM, so one lab's reference can come from
another host than the rest. The site orders hosts on its own
(:func:`labkit.site.macros.build.all_hosts`); tests that need a reference name it here, never
as "the first folder in alphabetical order"."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "xeon-kvm-2vcpu"
"""The host label (``--host``) of every lab's reference not in :data:`LAB_HOSTS`."""
RESULTS = ROOT / "results" / HOST
"""``results/<HOST>/``: ``<lab>.json`` and each lab's folder of outputs."""
LAB_HOSTS = {"fio_engines": "epyc-kvm-2vcpu", "fstime": "epyc-kvm-2vcpu", "lat_tcp": "epyc-kvm-2vcpu",
             "optane_kyber": "epyc-kvm-2vcpu"}
"""Labs whose reference was measured on another host than :data:`HOST`: lab -> host label."""


def host(lab: str) -> str:
    """The host label of ``lab``'s reference."""
    return LAB_HOSTS.get(lab, HOST)


def result(lab: str) -> Path:
    """``results/<host>/<lab>.json`` of ``lab``'s reference (the lab's folder of outputs is
    the same path without ``.json``)."""
    return ROOT / "results" / host(lab) / f"{lab}.json"
