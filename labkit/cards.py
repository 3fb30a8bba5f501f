"""The tool cards' exercises (``docs/tools/<tool>.md``), kept as data in the labs' folders.

Layout: a lab's exercises for a tool's card are in that lab's folder, one file per tool::

    labs/<lab>/cards/<tool>.exercises.toml

so that a case, with everything a reader practises on its results, is one folder. Each file has
the format of a chapter's ``labs/<lab>/exercises.toml`` (``[[exercise]]`` with id, title, change,
predict, check; :func:`labkit.stats.claims.load_exercises`), and each check is evaluated on a
result of ``<lab>`` by the chapters' evaluator (:func:`labkit.stats.claims.exercise_claim`,
:func:`labkit.stats.claims.evaluate_one`): the card page gathers a tool's files from every lab
(macro ``tool_exercises``) and ``labkit check <tool>`` checks them on the reader's own results.
They are page data, not measuring code: a change to them leaves the lab's results fresh
(``cards`` is in :data:`labkit.stale.NOT_MEASURING`).
"""

from __future__ import annotations

from pathlib import Path

from .results import ROOT
from .stats import claims

FOLDER = "cards"
SUFFIX = ".exercises.toml"


def _files(root: Path) -> list[Path]:
    """Every ``labs/<lab>/cards/<tool>.exercises.toml`` of a lab (a folder with ``run.sh``) under ``root``.

    Raises:
        labkit.stats.claims.ClaimError: a lab's ``cards/`` holds a file not named ``<tool>.exercises.toml``.
    """
    out = []
    for f in sorted((root / "labs").glob(f"*/{FOLDER}/*")):
        if not (f.parent.parent / "run.sh").is_file():
            continue
        if not f.name.endswith(SUFFIX) or not f.is_file():
            raise claims.ClaimError(f"{f}: a lab's {FOLDER}/ holds only <tool>{SUFFIX} files")
        out.append(f)
    return out


def tools(root: Path = ROOT) -> list[str]:
    """Names of the tools that some lab has exercises for, sorted (e.g. ``["auditctl", "blktrace", ...]``)."""
    return sorted({f.name[: -len(SUFFIX)] for f in _files(root)})


def load(tool: str, root: Path = ROOT) -> list[tuple[str, list[dict]]]:
    """``[(lab, exercises), ...]`` for ``tool`` from ``labs/<lab>/cards/<tool>.exercises.toml``,
    labs in name order, each list as :func:`labkit.stats.claims.load_exercises` returns it.

    Raises:
        KeyError: no lab has exercises for ``tool``.
        labkit.stats.claims.ClaimError: a bad file, or an exercise id used twice in the tool.
    """
    files = [f for f in _files(root) if f.name == f"{tool}{SUFFIX}"]
    if not files:
        raise KeyError(tool)
    out, seen = [], set()
    for f in files:
        exercises = claims.load_exercises(f)
        for ex in exercises:
            if ex["id"] in seen:
                raise claims.ClaimError(f"{f}: exercise id {ex['id']} is used twice in tool {tool}")
            seen.add(ex["id"])
        out.append((f.parent.parent.name, exercises))
    return out
