"""The tool cards' exercises (``docs/tools/<tool>.md``), kept as data in the checkout's ``cards/``.

Layout: one folder per tool, one file per lab whose results the exercises read::

    cards/<tool>/<lab>.exercises.toml

Each file has the format of a chapter's ``labs/<lab>/exercises.toml`` (``[[exercise]]`` with
id, title, change, predict, check; :func:`labkit.stats.claims.load_exercises`), and each check is
evaluated on a result of ``<lab>`` by the chapters' evaluator
(:func:`labkit.stats.claims.exercise_claim`, :func:`labkit.stats.claims.evaluate_one`): the card page
renders them (macro ``tool_exercises``) and ``labkit check <tool>`` checks them on the reader's
own results. The files are content, not code, so they are outside the labkit package; they are
not under ``labs/<lab>/``, where every file but the page data and ``tests/`` is the lab's
measuring code (:func:`labkit.stale.lab_code`), and not in ``docs/``, which holds pages.
"""

from __future__ import annotations

from pathlib import Path

from .results import ROOT
from .stats import claims

DIR = ROOT / "cards"
SUFFIX = ".exercises.toml"


def tools(base: Path = DIR) -> list[str]:
    """Names of the tools with a folder of exercises, sorted (e.g. ``["auditctl", "blktrace", ...]``)."""
    return sorted(p.name for p in base.iterdir() if p.is_dir() and any(p.glob(f"*{SUFFIX}")))


def load(tool: str, base: Path = DIR, root: Path = ROOT) -> list[tuple[str, list[dict]]]:
    """``[(lab, exercises), ...]`` for ``tool``, labs in name order, each list as
    :func:`labkit.stats.claims.load_exercises` returns it.

    Raises:
        KeyError: ``tool`` has no folder of exercises.
        labkit.stats.claims.ClaimError: a bad file, a file named after no lab
            (``labs/<lab>/run.sh`` missing), or an exercise id used twice in the tool.
    """
    folder = base / tool
    files = sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []
    if not files:
        raise KeyError(tool)
    out, seen = [], set()
    for f in files:
        lab = f.name[: -len(SUFFIX)]
        if not (root / "labs" / lab / "run.sh").is_file():
            raise claims.ClaimError(f"{f}: no lab {lab!r} (the file name names the lab whose results it checks)")
        exercises = claims.load_exercises(f)
        for ex in exercises:
            if ex["id"] in seen:
                raise claims.ClaimError(f"{f}: exercise id {ex['id']} is used twice in tool {tool}")
            seen.add(ex["id"])
        out.append((lab, exercises))
    return out
