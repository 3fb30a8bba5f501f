"""The staleness rule (labkit/stale.py) and the dirty flag of a run (labkit/record.py:
measuring_code, git_commit): which files count as the code that measures. Each page-data file
(stale.PAGE_DATA), the lab's tests (labs/<lab>/tests/) and its tool-card exercises
(labs/<lab>/cards/) change nothing a run measured; each
measuring file of the lab does.

Each test builds a small git repository in tmp_path (a lab folder, labs/lib, a few labkit files)
and commits changes to it: file layouts and commits, no measured values."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from labkit import record, stale

LAB = "demo"
MEASURING = ["run.sh", "record.py", "prog.c", "jobs/engines.fio", "README"]   # anything in the folder but page data
OUTSIDE = ["labs/lib/lab.sh", "labkit/stats/claims.py", "labkit/site/macros/tables.py", "docs/cases/demo.md", "labs/other/run.sh"]
TESTS = ["tests/test_demo_record.py", "tests/test_demo_lab.py"]   # the lab's own tests, under labs/demo/
CARDS = ["cards/perf.exercises.toml"]   # the lab's exercises for a tool card (labkit.cards), under labs/demo/


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                           "-C", str(repo), *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> Path:
    files = [f"labs/{LAB}/{f}" for f in (*MEASURING, *stale.PAGE_DATA, *TESTS, *CARDS)] + OUTSIDE + [
        "labkit/run/probe.py", "labkit/record.py", "labkit/parsers/fio.py", "labkit/guest/qemu.py"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(f"{f} v1\n")
    git(tmp_path, "init", "-q")
    commit(tmp_path, "first")
    stale.last_change.cache_clear()
    stale.same_code.cache_clear()
    return tmp_path


def state(repo: Path, run_commit: str | None, dirty: bool = False) -> str:
    stale.last_change.cache_clear()       # a build reads git afresh; here the repository changes under it
    stale.same_code.cache_clear()
    return stale.staleness({"lab": LAB, "run": {"git_commit": run_commit, "git_dirty": dirty}}, repo)[0]


def change(repo: Path, path: str, text: str = "v2\n") -> str:
    (repo / path).write_text(text)
    return commit(repo, f"change {path}")


def test_page_data_are_the_five_files_pages_setup_and_ci_read():
    assert set(stale.PAGE_DATA) == {"claims.toml", "original.toml", "exercises.toml", "lab.toml", "evidence.md"}


def test_a_run_of_the_latest_lab_code_is_fresh(repo):
    run = git(repo, "rev-parse", "HEAD")
    assert state(repo, run) == "fresh"
    assert stale.last_change(repo, LAB) == run


@pytest.mark.parametrize("name", stale.PAGE_DATA)
def test_a_change_to_page_data_leaves_a_result_fresh(repo, name):
    run = git(repo, "rev-parse", "HEAD")
    change(repo, f"labs/{LAB}/{name}")
    assert state(repo, run) == "fresh"
    stale.last_change.cache_clear()
    assert stale.last_change(repo, LAB) == run


NEW_FILES = {"tests": ("tests/test_demo_new.py", "def test_x():\n    pass\n"),
             "cards": ("cards/gdb.exercises.toml", "[[exercise]]\n")}


@pytest.mark.parametrize("name", [*TESTS, *CARDS])
def test_a_change_to_the_labs_tests_or_card_exercises_leaves_a_result_fresh(repo, name):
    """labs/<lab>/tests/ is pytest's and labs/<lab>/cards/ holds page data (a tool card's
    exercises): a changed file there, or a new one, measures nothing."""
    run = git(repo, "rev-parse", "HEAD")
    change(repo, f"labs/{LAB}/{name}")
    new, text = NEW_FILES[name.split("/")[0]]
    (repo / f"labs/{LAB}/{new}").write_text(text)
    commit(repo, f"a new {new}")
    assert state(repo, run) == "fresh"
    stale.last_change.cache_clear()
    assert stale.last_change(repo, LAB) == run


@pytest.mark.parametrize("name", MEASURING)
def test_a_change_to_measuring_code_makes_a_result_stale(repo, name):
    run = git(repo, "rev-parse", "HEAD")
    new = change(repo, f"labs/{LAB}/{name}")
    assert state(repo, run) == "stale"
    assert stale.last_change(repo, LAB) == new
    assert state(repo, new) == "fresh"                  # a run of the new code is not


@pytest.mark.parametrize("path", OUTSIDE)
def test_a_change_outside_the_lab_folder_leaves_a_result_fresh(repo, path):
    run = git(repo, "rev-parse", "HEAD")
    change(repo, path)
    assert state(repo, run) == "fresh"


@pytest.mark.parametrize("name", ["jobs/claims.toml", "jobs/tests/x.fio"])
def test_a_measuring_file_named_like_page_data_elsewhere_counts(repo, name):
    """Only the lab folder's own page data and tests/ are left out: a claims.toml or a tests
    folder in a subfolder is code."""
    run = git(repo, "rev-parse", "HEAD")
    (repo / f"labs/{LAB}/{name}").parent.mkdir(parents=True, exist_ok=True)
    (repo / f"labs/{LAB}/{name}").write_text("x\n")
    commit(repo, "sub")
    assert state(repo, run) == "stale"


def test_a_change_and_its_revert_leave_a_result_fresh(repo):
    run = git(repo, "rev-parse", "HEAD")
    change(repo, f"labs/{LAB}/run.sh", "v2\n")
    assert state(repo, run) == "stale"
    change(repo, f"labs/{LAB}/run.sh", f"labs/{LAB}/run.sh v1\n")
    assert state(repo, run) == "fresh"


@pytest.mark.parametrize("name, before, after, fresh", [
    ("run.sh", "#!/bin/bash\n# the likely state\nrun x\n", "#!/bin/bash\n# one plausible reading\n\nrun x\n", True),
    ("record.py", "import x\n    # a note\nx.y()\n", "import x\nx.y()   \n", True),
    ("run.sh", "run x\n# note\n", "run x --fast\n# note\n", False),          # code changed
    ("run.sh", "run x  # a note\n", "run x  # another note\n", False),        # a comment inside a line: kept
    ("prog.c", "int x; /* a */\n", "int x; /* b */\n", False),                # other files: every byte counts
    ("record.py", 's = """\nkeep\n"""\n', 's = """\nkept\n"""\n', False),
])
def test_a_change_to_comments_only_leaves_a_result_fresh(repo, name, before, after, fresh):
    """Whole-line # comments and blank lines of a lab's shell and Python files do not change what
    it measures; any other change of its code does."""
    path = f"labs/{LAB}/{name}"
    run = change(repo, path, before)
    change(repo, path, after)
    assert state(repo, run) == ("fresh" if fresh else "stale")
    if fresh:
        stale.last_change.cache_clear()
        stale.same_code.cache_clear()
        why = stale.staleness({"lab": LAB, "run": {"git_commit": run, "git_dirty": False}}, repo)[1]
        assert "differs from it only in comments" in why, why
        change(repo, f"labs/{LAB}/run.sh", "a code change\n")
        assert state(repo, run) == "stale"


def test_unknown_without_history_or_commit_or_with_a_dirty_run(repo, tmp_path):
    run = git(repo, "rev-parse", "HEAD")
    assert state(repo, None) == "unknown"
    assert state(repo, "0" * 40) == "unknown"
    assert state(repo, run, dirty=True) == "unknown"
    plain = tmp_path / "nogit"
    (plain / "labs" / LAB).mkdir(parents=True)
    assert state(plain, run) == "unknown"


# ---- the run's dirty flag: uncommitted changes to the code that measures -------------------

def dirty_after(repo: Path, path: str) -> bool:
    (repo / path).write_text("uncommitted\n")
    commit_, dirty = record.git_commit(repo, record.measuring_code(LAB))
    assert commit_ == git(repo, "rev-parse", "HEAD")
    return dirty


@pytest.mark.parametrize("path", [f"labs/{LAB}/{f}" for f in MEASURING] + [
    "labs/lib/lab.sh", "labkit/run/probe.py", "labkit/record.py", "labkit/parsers/fio.py", "labkit/guest/qemu.py"])
def test_an_uncommitted_measuring_file_makes_the_run_dirty(repo, path):
    assert record.git_commit(repo, record.measuring_code(LAB)) == (git(repo, "rev-parse", "HEAD"), False)
    assert dirty_after(repo, path) is True


@pytest.mark.parametrize("path", [f"labs/{LAB}/{f}" for f in (*stale.PAGE_DATA, *TESTS)] + [
    "labkit/stats/claims.py", "labkit/site/macros/tables.py", "docs/cases/demo.md", "labs/other/run.sh"])
def test_uncommitted_page_data_or_page_code_leaves_the_run_clean(repo, path):
    assert dirty_after(repo, path) is False


def test_a_copy_without_git_takes_the_commit_and_dirty_flag_it_was_given(repo, tmp_path_factory, monkeypatch):
    """A guest's copy of the checkout has no .git: the host that made it passes PCB_GIT_COMMIT and
    PCB_GIT_DIRTY; a checkout with its .git ignores them."""
    head = git(repo, "rev-parse", "HEAD")
    copy = tmp_path_factory.mktemp("copy")                 # outside the repository (tmp_path is one)
    (copy / "labs" / LAB).mkdir(parents=True)
    monkeypatch.setenv("PCB_GIT_COMMIT", "f" * 40)
    monkeypatch.setenv("PCB_GIT_DIRTY", "1")
    assert record.git_commit(copy, record.measuring_code(LAB)) == ("f" * 40, True)
    monkeypatch.setenv("PCB_GIT_DIRTY", "0")
    assert record.git_commit(copy) == ("f" * 40, False)
    assert record.git_commit(repo, record.measuring_code(LAB)) == (head, False)
    monkeypatch.delenv("PCB_GIT_COMMIT")
    assert record.git_commit(copy) == (None, None)


def explain(repo: Path, run_commit: str | None, dirty: bool = False) -> tuple[str, str]:
    stale.last_change.cache_clear()
    stale.same_code.cache_clear()
    return stale.staleness({"lab": LAB, "run": {"git_commit": run_commit, "git_dirty": dirty}}, repo)


def test_each_state_says_why_with_twelve_digit_commits(repo, tmp_path):
    """The explanation a page shows beside the state, word for word: which commits, and why."""
    run = git(repo, "rev-parse", "HEAD")
    assert explain(repo, run) == ("fresh", f"run from commit {run[:12]}, which includes the lab's latest change {run[:12]}")
    later = change(repo, f"labs/{LAB}/evidence.md")            # page data: the lab's latest change stays `run`
    assert explain(repo, later) == ("fresh", f"run from commit {later[:12]}, which includes the lab's latest change {run[:12]}")
    assert explain(repo, run, dirty=True) == ("unknown", f"run from commit {run[:12]} with uncommitted changes to the lab")
    assert explain(repo, None) == ("unknown", "no git history to compare the run with the lab")
    assert explain(repo, "0" * 40) == ("unknown", f"the run's commit {'0' * 12} is not in this repository's history")
    new = change(repo, f"labs/{LAB}/run.sh")
    assert explain(repo, run) == ("stale", f"labs/{LAB} changed in {new[:12]}, after this run's commit {run[:12]}: rerun the lab")
    change(repo, f"labs/{LAB}/run.sh", f"labs/{LAB}/run.sh v1\n")
    assert explain(repo, run) == ("fresh", f"run from commit {run[:12]}; the lab's code is the same here (changed since, and changed back)")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the repository to another user")
def test_a_checkout_owned_by_another_user_is_still_read(repo):
    """git refuses a repository another user owns ("dubious ownership") unless safe.directory
    allows it; a CI clone or a sudo run reads one: the state must still come from its history."""
    run = git(repo, "rev-parse", "HEAD")
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    try:
        assert explain(repo, run)[0] == "fresh"
    finally:
        subprocess.run(["chown", "-R", f"{os.getuid()}:{os.getgid()}", str(repo)], check=True)


def test_git_that_does_not_answer_leaves_the_state_unknown(repo, monkeypatch):
    run = git(repo, "rev-parse", "HEAD")
    stale.last_change.cache_clear()
    stale.last_change(repo, LAB)                 # the lab's change is known; git then stops answering

    def slow(*args, **kw):
        raise subprocess.TimeoutExpired(args, 20)
    monkeypatch.setattr(stale, "git", slow)
    assert stale.staleness({"lab": LAB, "run": {"git_commit": run, "git_dirty": False}}, repo) == \
        ("unknown", "git did not answer")


# Committed results that a lab change has made stale on purpose, each until its lab's next
# reference run (its page says "stale: rerun the lab" meanwhile): lab → why.
STALE_UNTIL_RERUN: dict[str, str] = {
    "lat_tcp": "the wakeup group's cpuidle step also reads the haltpoll modules' parameters; the Xeon "
               "VM's result, kept beside the EPYC reference, waits for a machine of that kind",
    "optane_kyber": "the overhead group's quick case list follows higher-rate-costs-more to one job; "
                    "the Xeon VM's result, kept beside the EPYC reference, waits for a machine of that kind",
}


def test_committed_results_are_fresh_but_those_awaiting_a_rerun():
    """A code change to a lab makes its committed results stale, and every page of the lab says
    so; that must be a decision (listed above, with the reason), not the side effect of a
    refactor. A listed lab whose results are fresh again must leave the list."""
    root = Path(__file__).resolve().parent.parent
    from labkit import model
    states = {}
    for f in sorted((root / "results").glob("*/*.json")):
        r = model.load(f)
        state, why = stale.staleness(r, root)
        if state == "unknown":   # a checkout without the history (a shallow clone, an archive)
            pytest.skip(f"{f.relative_to(root)}: {why}")
        states.setdefault(r["lab"], set()).add(state)
    assert states
    for lab, seen in states.items():
        if lab in STALE_UNTIL_RERUN:
            assert "stale" in seen, f"{lab}: fresh again, drop it from STALE_UNTIL_RERUN"
        else:
            assert seen == {"fresh"}, f"{lab}: a committed result is {seen}: rerun the lab, revert the change, or list it"
