"""tests/mutation.py's arithmetic: the kill ratio and the Wilson interval printed beside a
sampled ratio (Wilson 1927; the numbers are the formula's, not measurements)."""

from __future__ import annotations

import subprocess

import pytest

import mutation


def test_ratio_counts_timeouts_and_suspicious_as_detected():
    d = {"killed": 6, "timeout": 1, "suspicious": 1, "survived": 2, "skipped": 0, "untested": 5}
    assert mutation.ratio(d) == (8, 10, 0.8)
    assert mutation.ratio({"killed": 0, "timeout": 0, "suspicious": 0, "survived": 0}) == (0, 0, 0.0)


def test_wilson_interval():
    lo, hi = mutation.interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-3) and hi == pytest.approx(0.9433, abs=1e-3)
    lo, hi = mutation.interval(40, 40)
    assert hi == 1.0 and lo == pytest.approx(0.9124, abs=1e-3)
    assert mutation.interval(0, 0) == (0.0, 1.0)


def _d(killed=0, timeout=0, survived=0, suspicious=0):
    return {"killed": killed, "timeout": timeout, "survived": survived, "suspicious": suspicious,
            "skipped": 0, "untested": 0}


def test_the_table_has_one_row_per_module_with_its_own_ratio():
    per = {"labkit/run/probe.py": _d(killed=9, survived=1), "labkit/guest/command.py": _d(killed=3, timeout=1),
           "labkit/run/journal.py": _d()}
    total = {k: sum(d[k] for d in per.values()) for k in mutation.STATES}
    rows = {line.split()[0]: line.split()[1:] for line in mutation.table(per, total).splitlines()[2:]}
    assert list(rows) == ["labkit/guest/command.py", "labkit/run/journal.py", "labkit/run/probe.py", "all"]
    assert rows["labkit/run/probe.py"] == ["9", "0", "0", "1", "90%"]
    assert rows["labkit/guest/command.py"] == ["3", "1", "0", "0", "100%"]
    assert rows["labkit/run/journal.py"] == ["0", "0", "0", "0", "-"]          # nothing tried: no ratio
    assert rows["all"] == ["12", "1", "0", "1", "93%"]


def test_a_sampled_table_gives_each_module_its_interval():
    per = {"labkit/run/probe.py": _d(killed=8, survived=2)}
    line = mutation.table(per, per["labkit/run/probe.py"], sampled=True).splitlines()[2]
    lo, hi = mutation.interval(8, 10)
    assert line.endswith(f"{lo:.0%}–{hi:.0%}")


def test_every_module_it_mutates_by_default_has_tests_that_exist(tmp_path):
    """Each default module maps to test files (globs allowed) of which at least one exists here."""
    for path in mutation.DEFAULT_PATHS:
        assert (mutation.ROOT / path).is_file(), path
        assert mutation.test_files(mutation.ROOT, mutation.TESTS[path]), path
    for module in ("labkit/record.py", "labkit/manifest.py", "labkit/run/probe.py", "labkit/run/supervisor.py",
                   "labkit/run/journal.py", "labkit/guest/command.py"):
        assert module in mutation.DEFAULT_PATHS


def test_test_files_expands_globs_once_each_in_order(tmp_path):
    for name in ("test_b.py", "test_a1.py", "test_a2.py"):
        (tmp_path / name).write_text("")
    got = mutation.test_files(tmp_path, ["test_b.py", "test_a*.py", "test_b.py", "test_none*.py", "test_gone.py"])
    assert got == ["test_b.py", "test_a1.py", "test_a2.py"]


def test_the_copy_holds_tracked_and_new_files_not_ignored_ones(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    for name, text in (("pkg/a.py", "a"), ("pkg/gone.py", "g"), (".gitignore", "/ignored.txt\n")):
        (repo / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    (repo / "pkg" / "a.py").write_text("a, changed")
    (repo / "pkg" / "gone.py").unlink()
    (repo / "pkg" / "new.py").write_text("new")
    (repo / "ignored.txt").write_text("i")
    monkeypatch.setattr(mutation, "ROOT", repo)
    dest = tmp_path / "copy"
    dest.mkdir()
    mutation.copy_tree(dest)
    got = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert got == [".gitignore", "pkg/a.py", "pkg/new.py"]
    assert (dest / "pkg" / "a.py").read_text() == "a, changed"
