"""Is a result older than its lab? A result is *stale* when the lab's code changed in a
commit that the result's run did not include (``git merge-base --is-ancestor``)."""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-c", "safe.directory=*", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=20)


PAGE_DATA = ("claims.toml", "original.toml", "exercises.toml", "lab.toml", "evidence.md")  # pages, setup, CI read these
TESTS = "tests"   # the lab's own tests (pytest collects labs/<lab>/tests/): they check the lab, no run executes them
NOT_MEASURING = (*PAGE_DATA, TESTS)


def lab_code(lab: str) -> list[str]:
    """Git pathspecs of ``lab``'s own code: its folder less :data:`NOT_MEASURING`, the page data
    and the lab's tests."""
    return [f"labs/{lab}", *(f":(exclude)labs/{lab}/{name}" for name in NOT_MEASURING)]


@lru_cache(maxsize=64)
def last_change(root: Path, lab: str) -> str | None:
    """Newest commit that touched ``labs/<lab>/``, the lab's own code (None outside git).

    The shared contract (labs/lib) is left out on purpose: a change there that alters what
    a lab measures must come with a change to the lab itself, or every result goes stale
    at once for a fix to a progress message. So are the lab's page data, which every build
    reads afresh and which change nothing a run measures: ``claims.toml`` (claims are evaluated
    on each result at build time), ``original.toml`` (the original's figures), ``exercises.toml``,
    ``lab.toml`` (the manifest) and ``evidence.md`` (the lab's part of its evidence page); and the
    lab's tests (``tests/``), which pytest runs and a run of the lab never does.
    """
    try:
        proc = _git(root, "log", "-1", "--format=%H", "--", *lab_code(lab))
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() or None if proc.returncode == 0 else None


@lru_cache(maxsize=64)
def _same_code(root: Path, lab: str, commit: str) -> bool:
    """True when the lab's code (:func:`lab_code`) at ``commit`` is the same as in the work tree's
    HEAD, whatever commits touched it in between (a change and its revert)."""
    try:
        proc = _git(root, "diff", "--quiet", commit, "HEAD", "--", *lab_code(lab))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def staleness(result: dict, root: Path) -> tuple[str, str]:
    """(state, explanation) with state one of ``fresh``, ``stale``, ``unknown``.

    fresh: the lab's last change is an ancestor of (or is) the commit the run used, and the
    run had no uncommitted lab changes. stale: the lab changed after the run's commit.
    unknown: no git history here, or the run's commit is not in it.
    """
    run_commit = result["run"].get("git_commit")
    change = last_change(Path(root), result["lab"])
    if not run_commit or not change:
        return "unknown", "no git history to compare the run with the lab"
    try:
        known = _git(Path(root), "cat-file", "-e", f"{run_commit}^{{commit}}").returncode == 0
        if not known:
            return "unknown", f"the run's commit {run_commit[:12]} is not in this repository's history"
        ancestor = _git(Path(root), "merge-base", "--is-ancestor", change, run_commit).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return "unknown", "git did not answer"
    same = not ancestor and _same_code(Path(root), result["lab"], run_commit)  # changed, then changed back
    if not ancestor and not same:
        return "stale", f"labs/{result['lab']} changed in {change[:12]}, after this run's commit {run_commit[:12]}: rerun the lab"
    if result["run"].get("git_dirty"):
        return "unknown", f"run from commit {run_commit[:12]} with uncommitted changes to the lab"
    if same:
        return "fresh", f"run from commit {run_commit[:12]}; the lab's code is the same here (changed since, and changed back)"
    return "fresh", f"run from commit {run_commit[:12]}, which includes the lab's latest change {change[:12]}"
