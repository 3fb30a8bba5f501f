"""Is a result older than its lab? A result is *stale* when the lab's code changed in a
commit that the result's run did not include (``git merge-base --is-ancestor``)."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Result


def git(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``git -C root ARGS`` (any directory's owner accepted), its output captured as text; a
    non-zero exit is returned, not raised.

    Raises:
        OSError: git is not installed; subprocess.TimeoutExpired: it took more than 20 s.
    """
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=20)


PAGE_DATA = ("claims.toml", "original.toml", "exercises.toml", "lab.toml", "evidence.md")  # pages, setup, CI read these
TESTS = "tests"   # the lab's own tests (pytest collects labs/<lab>/tests/): they check the lab, no run executes them
CARDS = "cards"   # the lab's exercises for the tool cards (labkit.cards): page data, as exercises.toml
NOT_MEASURING = (*PAGE_DATA, TESTS, CARDS)


def lab_code(lab: str) -> list[str]:
    """Git pathspecs of ``lab``'s own code: its folder less :data:`NOT_MEASURING`, the page data,
    the lab's tests and its tool-card exercises."""
    return [f"labs/{lab}", *(f":(exclude)labs/{lab}/{name}" for name in NOT_MEASURING)]


@lru_cache(maxsize=64)
def last_change(root: Path, lab: str) -> str | None:
    """Newest commit that touched ``labs/<lab>/``, the lab's own code (None outside git).

    The shared contract (labs/lib) is left out on purpose: a change there that alters what
    a lab measures must come with a change to the lab itself, or every result goes stale
    at once for a fix to a progress message. So are the lab's page data, which every build
    reads afresh and which change nothing a run measures: ``claims.toml`` (claims are evaluated
    on each result at build time), ``original.toml`` (the original's figures), ``exercises.toml``,
    ``lab.toml`` (the manifest), ``evidence.md`` (the lab's part of its evidence page) and
    ``cards/`` (its exercises for the tool cards); and the lab's tests (``tests/``), which pytest
    runs and a run of the lab never does.
    """
    try:
        proc = git(root, "log", "-1", "--format=%H", "--", *lab_code(lab))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


COMMENTED = (".sh", ".py")
"""Files whose whole-line ``#`` comments and blank lines cannot change what a run measures (a
shell script, Python; a ``run.sh`` is one): a change to those lines only leaves a result fresh.
A line that starts with ``#`` inside a here-document or a multi-line string counts as a comment
too, so such text must not carry what a run does."""


def code_lines(text: str) -> list[str]:
    """The lines of a shell or Python file that are not blank and not a whole-line ``#`` comment,
    right-stripped (a ``#`` inside a line, or in a Python string, is kept)."""
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@lru_cache(maxsize=64)
def same_code(root: Path, lab: str, commit: str) -> str | None:
    """How the lab's code (:func:`lab_code`) at ``commit`` compares with the work tree's HEAD,
    whatever commits touched it in between: ``"same"`` (a change and its revert), ``"comments"``
    (only whole-line comments and blank lines of :data:`COMMENTED` files differ), None (code
    differs, or git did not answer)."""
    try:
        proc = git(root, "diff", "--name-only", "--no-renames", commit, "HEAD", "--", *lab_code(lab))
        if proc.returncode != 0:
            return None
        changed = [p for p in proc.stdout.splitlines() if p]
        if not changed:
            return "same"
        for path in changed:
            if not path.endswith(COMMENTED):
                return None
            old, new = (git(root, "show", f"{rev}:{path}") for rev in (commit, "HEAD"))
            if old.returncode != 0 or new.returncode != 0 or code_lines(old.stdout) != code_lines(new.stdout):
                return None
    except (OSError, subprocess.TimeoutExpired):
        return None
    return "comments"


def staleness(result: Result, root: Path) -> tuple[str, str]:
    """(state, explanation) with state one of ``fresh``, ``stale``, ``unknown``.

    fresh: the lab's last change is an ancestor of (or is) the commit the run used, or the lab's
    code is the same as at that commit but for whole-line comments of its shell and Python files
    (:func:`same_code`), and the run had no uncommitted lab changes. stale: the lab's code
    changed after the run's commit.
    unknown: no git history here, or the run's commit is not in it.
    """
    run_commit = result["run"].get("git_commit")
    change = last_change(Path(root), result["lab"])
    if not run_commit or not change:
        return "unknown", "no git history to compare the run with the lab"
    try:
        known = git(Path(root), "cat-file", "-e", f"{run_commit}^{{commit}}").returncode == 0
        if not known:
            return "unknown", f"the run's commit {run_commit[:12]} is not in this repository's history"
        ancestor = git(Path(root), "merge-base", "--is-ancestor", change, run_commit).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", "git did not answer"
    same = None if ancestor else same_code(Path(root), result["lab"], run_commit)  # changed back, or comments only
    if not ancestor and not same:
        return "stale", f"labs/{result['lab']} changed in {change[:12]}, after this run's commit {run_commit[:12]}: rerun the lab"
    if result["run"].get("git_dirty"):
        return "unknown", f"run from commit {run_commit[:12]} with uncommitted changes to the lab"
    if same == "comments":
        return "fresh", (f"run from commit {run_commit[:12]}; the lab's code here differs from it only in comments "
                         f"(changed in {change[:12]})")
    if same:
        return "fresh", f"run from commit {run_commit[:12]}; the lab's code is the same here (changed since, and changed back)"
    return "fresh", f"run from commit {run_commit[:12]}, which includes the lab's latest change {change[:12]}"
