"""Finding results: every host folder with result files.

Search path, in order (a label may appear once):

1. ``<root>/results/<host>/``        committed reference results (the embedded default)
2. directories in ``$PERF_CASEBOOK_RESULTS`` (``:``-separated), each holding host folders
   (CI merges runner artifacts this way)
3. ``<root>/local-results/<host>/``   the reader's own runs (``make labs``), marked as theirs
   (left out when ``PERF_CASEBOOK_LOCAL=0``, as the test suite does for repeatable builds)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from . import model
from .model import Result

ROOT = Path(__file__).resolve().parent.parent


class NoResult(LookupError):
    """No host has a result for the requested lab."""


@dataclass
class Host:
    """One host folder: ``label``, its ``dir``, whether it is the reader's own (``local``),
    and ``results`` (lab name → validated result dict)."""

    label: str
    dir: Path
    local: bool = False
    results: dict[str, Result] = field(default_factory=dict)

    @property
    def title(self) -> str:
        """Tab title: the label, with "(your machine)" for local results."""
        return f"{self.label} (your machine)" if self.local else self.label


def search_path(root: Path = ROOT) -> list[tuple[Path, bool]]:
    """(directory of host folders, is_local) in search order."""
    dirs = [(root / "results", False)]
    for extra in filter(None, os.environ.get("PERF_CASEBOOK_RESULTS", "").split(":")):
        dirs.append((Path(extra), False))
    if os.environ.get("PERF_CASEBOOK_LOCAL") != "0":     # unset or anything but 0: the reader's own results too
        dirs.append((root / "local-results", True))
    return dirs


def load_hosts(root: Path = ROOT) -> list[Host]:
    """Every host with at least one valid result, in search order.

    Raises:
        model.ResultError: a result file is invalid (never silently skipped), or
        the same host label appears in two places.
    """
    hosts: dict[str, Host] = {}
    for base, local in search_path(root):
        if not base.is_dir():
            continue
        for hdir in sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")):
            files = sorted(hdir.glob("*.json"))
            if not files:
                continue
            if hdir.name in hosts:
                raise model.ResultError(
                    f"host label {hdir.name!r} is in both {hosts[hdir.name].dir} and {hdir}: rename one (--host LABEL)")
            host = Host(hdir.name, hdir, local)
            for f in files:
                r = model.load(f)
                if r["host"]["label"] != hdir.name:
                    raise model.ResultError(f"{f}: host label {r['host']['label']!r} differs from its folder {hdir.name!r}")
                host.results[r["lab"]] = r
            hosts[host.label] = host
    return list(hosts.values())


def for_lab(lab: str, hosts: list[Host]) -> list[tuple[Host, Result]]:
    """(host, result) for every host that ran ``lab``: the reader's own hosts (local results)
    first, then the others, each in search order.

    Raises:
        NoResult: no host has a result for ``lab``.
    """
    found = sorted(((h, h.results[lab]) for h in hosts if lab in h.results), key=lambda p: not p[0].local)
    if not found:
        raise NoResult(f"no result for lab {lab!r} in any host folder: run labs/{lab}/run.sh")
    return found


def host(label: str, hosts: list[Host]) -> Host:
    """The host called ``label``. Raises NoResult if there is none."""
    for h in hosts:
        if h.label == label or h.title == label:
            return h
    raise NoResult(f"no host {label!r} (hosts: {', '.join(h.label for h in hosts) or 'none'})")
