"""The committed x86_64 reference: the host folder under ``results/`` whose results the tests
read as real data (samples to scale, raw outputs, the verdicts of a real run). The site orders
hosts on its own (:func:`labkit.site.macros.build.all_hosts`); tests that need the reference
name it here, never as "the first folder in alphabetical order"."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "xeon-kvm-2vcpu"
"""The reference's host label (``--host``), its folder's name under ``results/``."""
RESULTS = ROOT / "results" / HOST
"""``results/<HOST>/``: ``<lab>.json`` and each lab's folder of outputs."""
