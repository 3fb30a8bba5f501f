"""Lab manifests: ``labs/<lab>/lab.toml``, what the rest of the project needs to know about a lab.

The site's nav and home table, the Makefile's Debian package list and the CI workflow's matrix
are derived from these files, so that a new case is one lab folder plus one chapter. Keys
(checked with the JSON Schema ``labkit/lab.schema.json``):

``title``        the chapter's title in the nav
``order``        position among the cases (ascending)
``problem``      the problem, one line, for the home page's table
``practise``     what the reader practises, one line (Markdown), for the same table
``needs``        what a reader needs to run the lab, short items (the chapter's first screen)
``debs``         Debian packages the lab uses beyond the base set (``make setup`` installs them)
``guest_profile`` optional: the labkit.guest package set its ``--guest`` runs need
``quick_budget_s``, ``full_budget_s``  wall-time budgets on 2 cores (seconds)
``quick_leaves_out`` optional: groups a quick run leaves out → why, one line each (the
                 supervisor leaves them out unless ``--only`` names them; the claims that read
                 them declare ``group`` and are not applicable on such a run)
``[case_units]`` case keys whose values carry a unit (``bytes``: shown as KiB, MiB)
``[case]``       every case key the lab's steps carry (``lab_run --case KEY=VALUE``) and its type:
                 ``"str"``, ``"int"``, ``"float"`` or ``"bool"`` (:mod:`labkit.steps`)

Only the standard library is used at import (the Makefile and the CI workflow run
``python3 labkit/manifest.py`` before any venv exists); jsonschema checks the files when it is
installed (:func:`labkit.tomlschema.load`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:
    from . import tomlschema
except ImportError:   # run as a script, python3 labkit/manifest.py: labkit/ is the first entry of sys.path
    import tomlschema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = Path(__file__).with_name("lab.schema.json")


class ManifestError(ValueError):
    """A lab.toml is missing, not TOML, or does not follow labkit/lab.schema.json."""


def load(lab_dir: Path | str) -> dict:
    """``<lab_dir>/lab.toml`` as a dict, with ``name`` (the folder's name) added.

    Raises:
        ManifestError: no file, bad TOML, or (with jsonschema installed) a schema violation:
            ``<path>: <JSON path>: <message>`` (:func:`labkit.tomlschema.check`).
    """
    data = tomlschema.load(Path(lab_dir) / "lab.toml", SCHEMA, ManifestError, missing="no lab manifest", optional=True)
    return {"name": Path(lab_dir).name, **data}


def labs(root: Path | str = ROOT) -> list[dict]:
    """Every lab's manifest (folders of ``<root>/labs`` with a run.sh), by ``order`` then name."""
    dirs = [d for d in sorted((Path(root) / "labs").iterdir()) if (d / "run.sh").is_file()]
    return sorted((load(d) for d in dirs), key=lambda m: (m["order"], m["name"]))


def case_units(root: Path | str = ROOT) -> dict[str, str]:
    """Case key → unit over every lab (``{"bs": "bytes", ...}``).

    Raises:
        ManifestError: two labs give one key different units.
    """
    units: dict[str, str] = {}
    for m in labs(root):
        for key, unit in m.get("case_units", {}).items():
            if units.setdefault(key, unit) != unit:
                raise ManifestError(f"case key {key!r}: {m['name']} says {unit!r}, another lab {units[key]!r}")
    return units


def main(argv: list[str] | None = None) -> int:
    """``python3 labkit/manifest.py --names | --json | --debs | --matrix``."""
    ap = argparse.ArgumentParser(description="print what the labs' manifests (labs/*/lab.toml) say")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--names", action="store_true", help="lab names, one a line, in order")
    g.add_argument("--json", action="store_true", help="every manifest, as a JSON list")
    g.add_argument("--debs", action="store_true", help="the Debian packages of every lab, one line")
    g.add_argument("--matrix", action="store_true", help='{"lab": [names]}, for a CI matrix')
    a = ap.parse_args(argv)
    try:
        ms = labs()
    except ManifestError as exc:
        print(f"manifest: {exc}", file=sys.stderr)
        return 2
    if a.names:
        print("\n".join(m["name"] for m in ms))
    elif a.json:
        print(json.dumps(ms, indent=1))
    elif a.debs:
        print(" ".join(sorted({d for m in ms for d in m.get("debs", [])})))
    else:
        print(json.dumps({"lab": [m["name"] for m in ms]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
